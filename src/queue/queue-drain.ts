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

export async function queueProgress(queue: Queue): Promise<QueueProgress> {
  const c = await queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized', 'completed', 'failed');
  return {
    waiting: c.waiting ?? 0,
    delayed: c.delayed ?? 0,
    active: c.active ?? 0,
    prioritized: c.prioritized ?? 0,
    completed: c.completed ?? 0,
    failed: c.failed ?? 0,
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
  queue: Queue,
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
      throw new Error(`queue ${queue.name} did not drain within ${timeoutMs} ms: ${JSON.stringify(progress)}`);
    }
    if (signal?.aborted) throw new Error('interrupted');
    await new Promise((r) => setTimeout(r, DRAIN_POLL_INTERVAL_MS));
  }
}
