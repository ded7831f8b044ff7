// The peer's settings, shared by the bench (which adds its jobs) and its worker entry:
// Graphile Worker's own batching recommendations, from its performance page.

export const GRAPHILE_TASK = 'transfer';
/** Jobs fetched (and locked) per round trip, as on Graphile Worker's performance page. */
export const GRAPHILE_LOCAL_QUEUE_SIZE = 500;
/** 0: completions (and failures) that fall in the same tick go to the database together. */
export const GRAPHILE_COMPLETE_BATCH_DELAY_MS = 0;

/** The docs' advice for maxPoolSize: 10 or concurrency + 2, whichever is larger. */
export function graphilePoolMax(concurrency: number): number {
  return Math.max(10, concurrency + 2);
}
