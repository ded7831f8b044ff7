// Queue depth by state, read from Redis when /metrics is scraped. Takes a list of queues, so a
// worker that consumes several (shards of one logical queue) reports each.
import type { Queue } from 'bullmq';
import { QUEUE_DEPTH_STATES, type QueueDepth, type QueueDepthSource } from './worker-metrics.ts';

/** A scrape does not wait longer than this for the counts; on timeout the gauge is left empty. */
export const QUEUE_DEPTH_READ_TIMEOUT_MS = 1_000;

export function queueDepthSource(queues: readonly Queue[]): QueueDepthSource {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`queue depth not read within ${QUEUE_DEPTH_READ_TIMEOUT_MS} ms`)),
        QUEUE_DEPTH_READ_TIMEOUT_MS,
      );
    });
    try {
      const all = await Promise.race([
        Promise.all(
          queues.map(async (queue) => ({ queue: queue.name, counts: await queue.getJobCounts(...QUEUE_DEPTH_STATES) })),
        ),
        timedOut,
      ]);
      const out: QueueDepth[] = [];
      for (const { queue, counts } of all) {
        for (const state of QUEUE_DEPTH_STATES) out.push({ queue, state, jobs: counts[state] ?? 0 });
      }
      return out;
    } finally {
      clearTimeout(timer);
    }
  };
}
