// Waits for a queue to drain (nothing waiting, delayed, active or prioritised), with a progress
// callback and a bound: a queue that does not drain in time is a failure, not a hang, and so is
// a queue whose counts do not answer (Redis gone, a connection that retries for ever).
import { setTimeout as sleep } from 'node:timers/promises';
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

type Counted =
  | { readonly kind: 'counts'; readonly progress: QueueProgress }
  | { readonly kind: 'late' | 'interrupted' };

/**
 * Resolves with the final counts once drained; throws after timeoutMs with the counts it saw last
 * (each reading of the counts is bounded by the time left, and at least one poll interval), or as
 * soon as `signal` is aborted (an interrupted run stops waiting).
 */
export async function waitForDrain(
  queue: Queue | readonly Queue[],
  timeoutMs: number,
  onProgress?: (p: QueueProgress) => void,
  signal?: AbortSignal,
): Promise<QueueProgress> {
  const names = (Array.isArray(queue) ? queue : [queue as Queue]).map((q) => q.name).join(', ');
  const deadline = performance.now() + timeoutMs;
  /** The last counts read; what the timeout quotes, with a note when the last reading did not answer. */
  let counts = 'no counts read';
  let seen = counts;
  for (;;) {
    const budgetMs = Math.max(deadline - performance.now(), DRAIN_POLL_INTERVAL_MS);
    const counted = await raceSignal(
      queueProgress(queue).then((progress) => ({ kind: 'counts', progress }) as const),
      budgetMs,
      signal,
    );
    if (counted.kind === 'interrupted') throw new Error('interrupted');
    if (counted.kind === 'counts') {
      onProgress?.(counted.progress);
      if (isDrained(counted.progress)) return counted.progress;
      counts = JSON.stringify(counted.progress);
      seen = counts;
    } else {
      seen = `its counts did not answer within ${Math.round(budgetMs)} ms (the last read: ${counts})`;
    }
    if (performance.now() >= deadline) throw new Error(`queue ${names} did not drain within ${timeoutMs} ms: ${seen}`);
    if (signal?.aborted) throw new Error('interrupted');
    const paused = await raceSignal(null, DRAIN_POLL_INTERVAL_MS, signal);
    if (paused.kind === 'interrupted') throw new Error('interrupted');
  }
}

/** `work`'s answer, or 'late' after ms (no work: a pause), or 'interrupted' when `signal` aborts meanwhile. */
async function raceSignal(
  work: Promise<Counted> | null,
  ms: number,
  signal: AbortSignal | undefined,
): Promise<Counted> {
  const timer = new AbortController();
  const racers: Promise<Counted>[] = [
    sleep(ms, { kind: 'late' } as const, { signal: timer.signal }).catch(() => ({ kind: 'late' }) as const),
  ];
  if (work !== null) racers.push(work);
  let onAbort: (() => void) | null = null;
  if (signal !== undefined && !signal.aborted)
    racers.push(
      new Promise<Counted>((resolve) => {
        onAbort = () => resolve({ kind: 'interrupted' });
        signal.addEventListener('abort', onAbort, { once: true });
      }),
    );
  try {
    return await Promise.race(racers);
  } finally {
    timer.abort();
    if (onAbort !== null) signal?.removeEventListener('abort', onAbort);
  }
}
