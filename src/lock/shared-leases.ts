// One lease per wallet per process, shared by every job of the process that needs that wallet:
// the first job acquires (one token, one watchdog), the jobs that arrive while it is held ride
// on it, and the last one out releases. A hot wallet then costs one acquisition per ride
// instead of one per job, and its jobs can go into one batch. A ride is bounded in time and in
// riders, and a ride that ended on its time bound yields a moment before the process competes
// again, so other processes get their turn at the wallet. A wallet held elsewhere is waited for
// by one poll loop per wallet per process (never one per job), for a bounded time. A lease whose
// riders get no answer for progressMsMax (a database that stops answering) is given up: no longer
// renewed, its riders aborted through its signal, and released at once for the other processes.
import { setTimeout as sleep } from 'node:timers/promises';
import { wholeNumberIn } from '../config/bounds.ts';
import { CONFIG_DEFAULTS, LOCK_RIDE_MS_MAX_LIMIT } from '../config/config.ts';
import { LockLostError } from '../errors.ts';
import type { AcquireResult, LockService } from './lock-service.ts';
import { type HeldLease, Watchdog } from './watchdog.ts';
import { releaseWithin } from './with-lock.ts';

/**
 * How long after its acquisition a lease still takes new riders; then it drains and is released.
 * The same default as the worker's LOCK_RIDE_MS_MAX, so a lease table built without a config
 * (tests, tools) rides like a worker.
 */
export const LEASE_RIDE_MS_MAX_DEFAULT = Number(CONFIG_DEFAULTS.LOCK_RIDE_MS_MAX);
/** Riders on one lease at once. */
export const LEASE_RIDERS_MAX_DEFAULT = 256;
/** After a ride that ended on its time bound, the process waits this long before competing again. */
export const LEASE_YIELD_MS = 40;
/** A wallet held by another process is polled every LEASE_POLL_MS_MIN..MAX (jittered)... */
export const LEASE_POLL_MS_MIN = 5;
export const LEASE_POLL_MS_MAX = 25;
/** ...for at most this long; then the jobs waiting for it go back to the queue, delayed. */
export const LEASE_WAIT_MS_MAX_DEFAULT = 1_000;
/**
 * How long a lease with riders may go without one of them leaving (answered or failed) before it
 * is given up. The worker passes its decision deadline (dbCallDeadlineMs: a connection, then the
 * statement and the client's margin; 11 s with the default DB_STATEMENT_TIMEOUT_MS): past it no
 * call the database answers is still running. Giving a lease up early costs a retry, never money.
 */
export const LEASE_PROGRESS_MS_MAX_DEFAULT = 11_000;
export const LEASE_PROGRESS_MS_MAX_LIMIT = 3_600_000;
/** Limits on the options. */
export const LEASE_RIDERS_MAX_LIMIT = 10_000;
export const LEASE_WAIT_MS_MAX_LIMIT = 60_000;

export interface SharedLeasesOptions {
  readonly rideMsMax?: number;
  readonly ridersMax?: number;
  readonly waitMsMax?: number;
  /** Default LEASE_PROGRESS_MS_MAX_DEFAULT. */
  readonly progressMsMax?: number;
  /** Default: lockTtlMs (by then the lease has expired anyway). */
  readonly releaseTimeoutMs?: number;
  /** Source of jitter in [0, 1); default Math.random. */
  readonly random?: () => number;
}

/** A job's place on a wallet's lease. */
export interface LeaseRide {
  readonly walletId: string;
  readonly token: bigint;
  /** The lease's identity: its riders share it with the token, and nobody else has it. */
  readonly leaseId: string;
  /** The lease's watchdog view: signal, assertHeld(), remaining time. */
  readonly lease: HeldLease;
  /** True when the job rode on a lease another job of this process had taken. */
  readonly joined: boolean;
  /**
   * The database refused this token as stale: nobody may join this lease any more, so the
   * next job (after the fence is advanced) takes a fresh token.
   */
  spoil(): void;
  /** Leaves the lease; the last rider out stops the watchdog and releases the lock. Once only. */
  leave(): Promise<void>;
}

export type EnterResult =
  | { readonly kind: 'held'; readonly ride: LeaseRide }
  /** Another process holds the wallet after the bounded retries: hand the job back to the queue. */
  | { readonly kind: 'busy'; readonly retryAfterMs: number; readonly attempts: number };

type Entry =
  | { state: 'acquiring'; readonly acquired: Promise<void> }
  | {
      state: 'held';
      readonly watchdog: Watchdog;
      readonly acquiredAtMs: number;
      riders: number;
      spoiled: boolean;
      /** Set when the lease is released while closed by its time bound: waiters yield first. */
      endedOnTime: boolean;
      /** When it was acquired or a rider last left: its riders' progress. */
      lastProgressAtMs: number;
      /** Given up for lack of progress and released already: the last rider out sends no release. */
      givenUp: boolean;
      readonly released: Promise<void>;
      readonly markReleased: () => void;
    };

export class SharedLeases {
  readonly rideMsMax: number;
  readonly ridersMax: number;
  readonly waitMsMax: number;
  readonly progressMsMax: number;
  private readonly releaseTimeoutMs: number;
  private readonly random: () => number;
  private readonly entries = new Map<string, Entry>();
  /** A busy verdict shared with the jobs that waited on the same acquisition. */
  private readonly verdicts = new WeakMap<Promise<void>, EnterResult & { kind: 'busy' }>();
  private readonly releases = new Set<Promise<void>>();

  constructor(
    private readonly lock: LockService,
    options: SharedLeasesOptions = {},
  ) {
    this.rideMsMax = wholeNumberIn(
      'rideMsMax',
      options.rideMsMax ?? LEASE_RIDE_MS_MAX_DEFAULT,
      0,
      LOCK_RIDE_MS_MAX_LIMIT,
    );
    this.ridersMax = wholeNumberIn(
      'ridersMax',
      options.ridersMax ?? LEASE_RIDERS_MAX_DEFAULT,
      1,
      LEASE_RIDERS_MAX_LIMIT,
    );
    this.waitMsMax = wholeNumberIn(
      'waitMsMax',
      options.waitMsMax ?? LEASE_WAIT_MS_MAX_DEFAULT,
      0,
      LEASE_WAIT_MS_MAX_LIMIT,
    );
    this.progressMsMax = wholeNumberIn(
      'progressMsMax',
      options.progressMsMax ?? LEASE_PROGRESS_MS_MAX_DEFAULT,
      1,
      LEASE_PROGRESS_MS_MAX_LIMIT,
    );
    this.releaseTimeoutMs = options.releaseTimeoutMs ?? lock.lockTtlMs;
    this.random = options.random ?? Math.random;
  }

  /** Wallets this process holds a lease on right now. */
  get heldCount(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.state === 'held') n += 1;
    return n;
  }

  /**
   * A ride on the wallet's lease: joins the one this process holds when it still takes riders,
   * waits for an acquisition in progress, or acquires (with the lock's bounded retries). Redis
   * errors are thrown; they are transient for the caller.
   */
  async enter(walletId: string): Promise<EnterResult> {
    for (;;) {
      const entry = this.entries.get(walletId);
      if (entry === undefined) return this.acquire(walletId);
      if (entry.state === 'acquiring') {
        await entry.acquired;
        const verdict = this.verdicts.get(entry.acquired);
        if (verdict !== undefined) return verdict;
        continue;
      }
      if (this.joinable(entry)) {
        entry.riders += 1;
        return { kind: 'held', ride: this.ride(walletId, entry, true) };
      }
      // Closed to new riders: wait until its riders are gone and the release is sent, then
      // compete for the wallet again like any other process. Right after a ride that used its
      // whole time, yield first: our acquisition would otherwise always beat the other
      // processes' polls, since it leaves on the connection right behind the release.
      await entry.released;
      if (entry.endedOnTime) await sleep(LEASE_YIELD_MS);
    }
  }

  /** Resolves once every release that was sent has been answered (or timed out): for shutdown. */
  async settled(): Promise<void> {
    await Promise.all([...this.releases]);
  }

  private async acquire(walletId: string): Promise<EnterResult> {
    let settle!: () => void;
    const acquired = new Promise<void>((resolve) => {
      settle = resolve;
    });
    this.entries.set(walletId, { state: 'acquiring', acquired });
    try {
      const result = await this.acquireWaiting(walletId);
      if (result.kind === 'busy') {
        const verdict = { kind: 'busy', retryAfterMs: result.retryAfterMs, attempts: result.attempts } as const;
        this.verdicts.set(acquired, verdict);
        this.entries.delete(walletId);
        return verdict;
      }
      let markReleased!: () => void;
      const released = new Promise<void>((resolve) => {
        markReleased = resolve;
      });
      const acquiredAtMs = performance.now();
      const entry: Entry & { state: 'held' } = {
        state: 'held',
        watchdog: Watchdog.start({
          renewer: this.lock,
          lease: result.lease,
          logger: this.lock.logger,
          stalled: () => entry.riders > 0 && performance.now() - entry.lastProgressAtMs > this.progressMsMax,
        }),
        acquiredAtMs,
        riders: 1,
        spoiled: false,
        endedOnTime: false,
        lastProgressAtMs: acquiredAtMs,
        givenUp: false,
        released,
        markReleased,
      };
      this.entries.set(walletId, entry);
      entry.watchdog.signal.addEventListener('abort', () => this.giveUpIfStalled(walletId, entry), { once: true });
      return { kind: 'held', ride: this.ride(walletId, entry, false) };
    } catch (err) {
      // The jobs waiting on this acquisition find no entry and try for themselves.
      this.entries.delete(walletId);
      throw err;
    } finally {
      settle();
    }
  }

  /** Polls until the lock is ours or waitMsMax has passed; one loop per wallet per process. */
  private async acquireWaiting(walletId: string): Promise<AcquireResult> {
    const deadline = performance.now() + this.waitMsMax;
    for (let attempts = 1; ; attempts += 1) {
      const result = await this.lock.acquire(walletId);
      if (result.kind === 'acquired') return result;
      const leftMs = deadline - performance.now();
      if (leftMs <= 0) return { kind: 'busy', retryAfterMs: result.retryAfterMs, attempts };
      const pollMs = LEASE_POLL_MS_MIN + this.random() * (LEASE_POLL_MS_MAX - LEASE_POLL_MS_MIN);
      await sleep(Math.min(leftMs, pollMs));
    }
  }

  private joinable(entry: Entry & { state: 'held' }): boolean {
    return (
      !entry.spoiled &&
      entry.riders < this.ridersMax &&
      performance.now() - entry.acquiredAtMs < this.rideMsMax &&
      !entry.watchdog.signal.aborted &&
      entry.watchdog.leaseRemainingMs() > 0
    );
  }

  /** A lease lost for lack of progress is released now: its riders are stuck, the wallet is not. */
  private giveUpIfStalled(walletId: string, entry: Entry & { state: 'held' }): void {
    const reason: unknown = entry.watchdog.signal.reason;
    if (!(reason instanceof LockLostError) || reason.reason !== 'no_progress') return;
    entry.givenUp = true;
    this.lock.logger.warn(
      {
        event: 'lease_given_up',
        walletId,
        token: entry.watchdog.token.toString(),
        riders: entry.riders,
        sinceProgressMs: Math.round(performance.now() - entry.lastProgressAtMs),
      },
      'no answer for the riders of a lease; released for other processes',
    );
    void this.sendRelease(walletId, entry);
  }

  /** Removes the entry (new jobs acquire afresh) and releases its lock; close() waits for it. */
  private async sendRelease(walletId: string, entry: Entry & { state: 'held' }): Promise<void> {
    const { watchdog } = entry;
    entry.endedOnTime = performance.now() - entry.acquiredAtMs >= this.rideMsMax;
    if (this.entries.get(walletId) === entry) this.entries.delete(walletId);
    // Commands on one connection are answered in order, so an acquisition sent after
    // this release (by a waiting job of this process) finds the lock free.
    const release = releaseWithin(this.lock, walletId, watchdog.owner, watchdog.token, this.releaseTimeoutMs);
    entry.markReleased();
    this.releases.add(release);
    try {
      await release;
    } finally {
      this.releases.delete(release);
    }
  }

  private ride(walletId: string, entry: Entry & { state: 'held' }, joined: boolean): LeaseRide {
    let left = false;
    const { watchdog } = entry;
    return {
      walletId,
      token: watchdog.token,
      leaseId: watchdog.leaseId,
      lease: watchdog,
      joined,
      spoil: () => {
        entry.spoiled = true;
      },
      leave: async () => {
        if (left) return;
        left = true;
        entry.riders -= 1;
        entry.lastProgressAtMs = performance.now();
        if (entry.riders > 0 || entry.givenUp) return;
        watchdog.stop();
        await this.sendRelease(walletId, entry);
      },
    };
  }
}
