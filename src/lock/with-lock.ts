// Runs work under a wallet's fenced lock: acquire with bounded retries, keep the lease alive
// with a watchdog, and always stop the watchdog and release afterwards, also when the work throws.
import type { LockService } from './lock-service.ts';
import { type HeldLease, Watchdog } from './watchdog.ts';

/**
 * The work gets the signal that fires when the lock is lost, the fencing token to present
 * to the database, and the lease for a last assertHeld() right before committing.
 */
export type LockedWork<T> = (signal: AbortSignal, token: bigint, lease: HeldLease) => Promise<T>;

export type WithLockResult<T> =
  | { readonly kind: 'acquired'; readonly value: T; readonly token: bigint }
  /** Still held by someone else after the bounded retries: delay the job by about retryAfterMs. */
  | { readonly kind: 'busy'; readonly retryAfterMs: number; readonly attempts: number };

export interface WithLockOptions {
  /** Default: lockTtlMs / 3. */
  readonly renewIntervalMs?: number;
  /**
   * How long to wait for the release before giving up on it; default lockTtlMs (by then the
   * lease has expired anyway). Keeps a hung Redis from hanging the caller after the work.
   */
  readonly releaseTimeoutMs?: number;
}

/**
 * Errors of the work are rethrown after cleanup; a lost lock surfaces as the LockLostError the
 * work throws (signal.throwIfAborted() or lease.assertHeld()). A failed release is logged,
 * never thrown: the lease expires on its own and the token fences any stale write.
 */
export async function withLock<T>(
  lock: LockService,
  walletId: string,
  work: LockedWork<T>,
  options: WithLockOptions = {},
): Promise<WithLockResult<T>> {
  const acquired = await lock.acquireWithRetry(walletId);
  if (acquired.kind === 'busy') {
    return { kind: 'busy', retryAfterMs: acquired.retryAfterMs, attempts: acquired.attempts };
  }
  const { lease } = acquired;
  const watchdog = Watchdog.start({
    renewer: lock,
    lease,
    logger: lock.logger,
    ...(options.renewIntervalMs === undefined ? {} : { renewIntervalMs: options.renewIntervalMs }),
  });
  try {
    // The acquire reply may have come back after the lease already ended.
    watchdog.assertHeld();
    const value = await work(watchdog.signal, lease.token, watchdog);
    return { kind: 'acquired', value, token: lease.token };
  } finally {
    watchdog.stop();
    await releaseWithin(lock, walletId, lease.owner, lease.token, options.releaseTimeoutMs ?? lock.lockTtlMs);
  }
}

/** Releases, waiting at most timeoutMs for the answer; a failure or a timeout is logged, never thrown. */
export async function releaseWithin(
  lock: LockService,
  walletId: string,
  owner: string,
  token: bigint,
  timeoutMs: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed_out'>((resolve) => {
    timer = setTimeout(() => resolve('timed_out'), timeoutMs);
  });
  try {
    const outcome = await Promise.race([lock.release(walletId, owner, token), timedOut]);
    if (outcome === 'timed_out') {
      lock.logger.warn(
        { event: 'lock_release_timed_out', walletId, owner, token: token.toString(), timeoutMs },
        'lock release got no reply in time; the lease will expire',
      );
    }
  } catch (error) {
    lock.logger.warn(
      { event: 'lock_release_failed', walletId, owner, token: token.toString(), err: error },
      'lock release failed; the lease will expire',
    );
  } finally {
    clearTimeout(timer);
  }
}
