// Waits for a queue to drain (nothing waiting, delayed, active or prioritised), with a progress
// callback and a bound: a queue that does not drain in time is a failure, not a hang.
import type { Queue } from 'bullmq';

export const DRAIN_POLL_INTERVAL_MS = 250;

export interface QueueProgress {
  waiting: number;
  delayed: number;
  active: number;
  prioritized: number;
  completed: number;
  failed: number;
}

/** The counts of one queue, or summed over several (the shards of one deployment). */
export async function queueProgress(queues: Queue | readonly Queue[]): Promise<QueueProgress> {
  const list = Array.isArray(queues) ? queues : [queues as Queue];
  const all = await Promise.all(
    list.map((q) => q.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'completed', 'failed')),
  );
  const sum = (state: keyof QueueProgress) => all.reduce((n, c) => n + (c[state] ?? 0), 0);
  return {
    waiting: sum('waiting'),
    delayed: sum('delayed'),
    active: sum('active'),
    prioritized: sum('prioritized'),
    completed: sum('completed'),
    failed: sum('failed'),
  };
}

export function isDrained(p: QueueProgress): boolean {
  return p.waiting + p.delayed + p.active + p.prioritized === 0;
}

/**
 * Resolves with the final counts once drained; throws after timeoutMs with the counts it saw,
 * or as soon as `signal` is aborted (an interrupted run stops waiting).
 */
export async function waitForDrain(
  queue: Queue | readonly Queue[],
  timeoutMs: number,
  onProgress?: (p: QueueProgress) => void,
  signal?: AbortSignal,
): Promise<QueueProgress> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const progress = await queueProgress(queue);
    onProgress?.(progress);
    if (isDrained(progress)) return progress;
    if (performance.now() > deadline) {
      const names = (Array.isArray(queue) ? queue : [queue as Queue]).map((q) => q.name).join(', ');
      throw new Error(`queue ${names} did not drain within ${timeoutMs} ms: ${JSON.stringify(progress)}`);
    }
    if (signal?.aborted) throw new Error('interrupted');
    await new Promise((r) => setTimeout(r, DRAIN_POLL_INTERVAL_MS));
  }
}
