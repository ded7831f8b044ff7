// The one way the harnesses wait for something to be up, formed, ready or drained: a probe
// polled with a sleep between calls until it says done, under a deadline that also bounds each
// call of the probe (a probe stuck on a connection that never answers cannot outlive it), and a
// failure that names what was awaited and what the probe saw last. A wait that depends on a
// process ends at once when that process exits (`stop`), not when the deadline passes.
import { setTimeout as sleep } from 'node:timers/promises';

export const POLL_INTERVAL_MS_DEFAULT = 100;

/** What one call of a probe saw: done (with a value), or not yet (with what it saw instead). */
export type Poll<T> = { readonly done: true; readonly value: T } | { readonly done: false; readonly seen: string };

export function done<T>(value: T): Poll<T> {
  return { done: true, value };
}

export function notYet<T = never>(seen: string): Poll<T> {
  return { done: false, seen };
}

/**
 * The probe, with an error it throws read as "not yet" (its message is what was seen): a server
 * that does not answer yet is a reading, not a failure of the wait.
 */
export function errorsAsNotYet<T>(probe: () => Promise<Poll<T>>): () => Promise<Poll<T>> {
  return async () => {
    try {
      return await probe();
    } catch (err) {
      return notYet(err instanceof Error ? err.message : String(err));
    }
  };
}

export interface PollOptions {
  /** What is awaited, for the error: "redis-server on 127.0.0.1:6380 ready". */
  readonly what: string;
  readonly timeoutMs: number;
  readonly intervalMs?: number;
  /**
   * Settles with a reason when waiting further is pointless (the process awaited exited): the
   * wait then fails at once with that reason.
   */
  readonly stop?: Promise<string>;
  /** An interrupted run stops waiting ('interrupted'). */
  readonly signal?: AbortSignal;
  /** The message of a timeout, from what the probe saw last; default `<what>: not within <timeoutMs> ms; last seen: <seen>`. */
  readonly timedOut?: (seen: string) => string | Promise<string>;
}

/** Thrown when the deadline passed; `seen` is what the probe saw last. */
export class WaitTimeoutError extends Error {
  constructor(
    message: string,
    readonly seen: string,
  ) {
    super(message);
    this.name = 'WaitTimeoutError';
  }
}

/** Thrown when `stop` settled before the probe said done. */
export class WaitStoppedError extends Error {
  constructor(
    message: string,
    readonly reason: string,
  ) {
    super(message);
    this.name = 'WaitStoppedError';
  }
}

/** Why a wait ended before its probe said done. */
type Interruption = { readonly kind: 'stop'; readonly reason: string } | { readonly kind: 'abort' };

/**
 * Calls `probe` until it answers done, and resolves with its value. A probe that throws ends the
 * wait with its error (a probe that tolerates errors catches them and answers notYet). Each call
 * gets the time left, and at least one interval: the wait as a whole ends within about
 * timeoutMs + intervalMs.
 */
export async function pollUntil<T>(probe: () => Promise<Poll<T>>, options: PollOptions): Promise<T> {
  const intervalMs = options.intervalMs ?? POLL_INTERVAL_MS_DEFAULT;
  const deadline = performance.now() + options.timeoutMs;
  const interruption = interruptionOf(options);
  /** What the last probe that answered saw; `seen` adds a note when the last one did not answer. */
  let answered = 'nothing (no probe answered)';
  let seen = answered;
  const interrupted = (why: Interruption): Error =>
    why.kind === 'abort'
      ? new Error('interrupted')
      : new WaitStoppedError(`${options.what}: ${why.reason} (last seen: ${seen})`, why.reason);
  try {
    for (;;) {
      if (options.signal?.aborted === true) throw new Error('interrupted');
      const budgetMs = Math.max(deadline - performance.now(), intervalMs);
      const answer = await within(probe(), budgetMs, interruption.promise);
      if (answer.kind === 'interrupted') throw interrupted(answer.why);
      if (answer.kind === 'answered' && answer.value.done) return answer.value.value;
      if (answer.kind === 'answered' && !answer.value.done) {
        answered = answer.value.seen;
        seen = answered;
      } else {
        seen = `a probe did not answer within ${Math.round(budgetMs)} ms (the last answer: ${answered})`;
      }
      if (performance.now() >= deadline) {
        const message =
          options.timedOut === undefined
            ? `${options.what}: not within ${options.timeoutMs} ms; last seen: ${seen}`
            : await options.timedOut(seen);
        throw new WaitTimeoutError(message, seen);
      }
      const pause = await within(null, intervalMs, interruption.promise);
      if (pause.kind === 'interrupted') throw interrupted(pause.why);
    }
  } finally {
    interruption.dispose();
  }
}

type Within<T> =
  | { readonly kind: 'answered'; readonly value: T }
  | { readonly kind: 'late' }
  | { readonly kind: 'interrupted'; readonly why: Interruption };

/** `work`'s value, or 'late' after ms (with no work: a pause of ms), or the interruption if it comes first. */
async function within<T>(
  work: Promise<T> | null,
  ms: number,
  interruption: Promise<Interruption> | null,
): Promise<Within<T>> {
  const timer = new AbortController();
  const racers: Promise<Within<T>>[] = [
    sleep(ms, { kind: 'late' } as const, { signal: timer.signal }).catch(() => ({ kind: 'late' }) as const),
  ];
  if (work !== null) racers.push(work.then((value) => ({ kind: 'answered', value }) as const));
  if (interruption !== null) racers.push(interruption.then((why) => ({ kind: 'interrupted', why }) as const));
  try {
    return await Promise.race(racers);
  } finally {
    timer.abort();
  }
}

/** One promise for `stop` and `signal` together, settling with whichever comes first. */
function interruptionOf(options: PollOptions): { promise: Promise<Interruption> | null; dispose: () => void } {
  const { stop, signal } = options;
  if (stop === undefined && signal === undefined) return { promise: null, dispose: () => undefined };
  let onAbort: (() => void) | null = null;
  const promise = new Promise<Interruption>((resolve, reject) => {
    stop?.then((reason) => resolve({ kind: 'stop', reason }), reject);
    if (signal !== undefined) {
      onAbort = () => resolve({ kind: 'abort' });
      signal.addEventListener('abort', onAbort, { once: true });
    }
  });
  // A `stop` that rejects ends the wait with its error, when the wait looks; never unhandled.
  promise.catch(() => undefined);
  return {
    promise,
    dispose: () => {
      if (onAbort !== null) signal?.removeEventListener('abort', onAbort);
    },
  };
}
