// Keeps a held lock alive while work runs (renews every TTL/3) and aborts the work through an
// AbortSignal as soon as the lock may no longer be ours, judged by our own monotonic clock.
import { pino } from 'pino';
import { LockLostError, type LockLostReason } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import type { LockLease } from './fenced-lock.ts';

/** Renewals per TTL: two may fail (or be slow) before the lease runs out. */
export const RENEWALS_PER_TTL = 3;

/** What the work sees of the lock it runs under. */
export interface HeldLease {
  readonly walletId: string;
  readonly owner: string;
  /** The lease's identity (LockLease.leaseId), decided with beside the token. */
  readonly leaseId: string;
  readonly token: bigint;
  /** Fires, with a LockLostError as reason, when the lock is lost. */
  readonly signal: AbortSignal;
  /** Milliseconds until the lease ends by our clock, unless renewed; 0 once lost. */
  leaseRemainingMs(): number;
  /**
   * Throws LockLostError if the lock is lost or the lease has ended by our clock, even if no
   * timer has run yet (after a stop-the-world pause the timers fire late). Call it right
   * before committing; the fencing token still guards the commit if the check comes too late.
   */
  assertHeld(): void;
}

/** The one lock call the watchdog needs (every LockService provides it). */
export interface LeaseRenewer {
  renew(walletId: string, owner: string): Promise<boolean>;
}

export interface WatchdogOptions {
  readonly renewer: LeaseRenewer;
  readonly lease: LockLease;
  /** Default: lockTtlMs / RENEWALS_PER_TTL. */
  readonly renewIntervalMs?: number;
  /** Default: a silent logger. */
  readonly logger?: Logger;
  /**
   * Asked before each renewal: true means the work under the lease is stuck, and the lease is
   * given up (lost with `no_progress`, not renewed) so that other processes get the wallet.
   */
  readonly stalled?: () => boolean;
}

type WatchdogState = 'running' | 'lost' | 'stopped';

export class Watchdog implements HeldLease {
  readonly walletId: string;
  readonly owner: string;
  readonly leaseId: string;
  readonly token: bigint;
  readonly renewIntervalMs: number;
  private readonly lockTtlMs: number;
  private readonly renewer: LeaseRenewer;
  private readonly logger: Logger;
  private readonly stalled: (() => boolean) | undefined;
  private readonly controller = new AbortController();
  private state: WatchdogState = 'running';
  /** performance.now() at which the lease ends unless a renewal sent before then succeeds. */
  private leaseEndMs: number;
  private renewTimer: NodeJS.Timeout | null = null;
  private leaseTimer: NodeJS.Timeout | null = null;

  private constructor(options: WatchdogOptions) {
    const { lease } = options;
    this.walletId = lease.walletId;
    this.owner = lease.owner;
    this.leaseId = lease.leaseId;
    this.token = lease.token;
    this.lockTtlMs = lease.lockTtlMs;
    this.renewer = options.renewer;
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.stalled = options.stalled;
    this.renewIntervalMs = options.renewIntervalMs ?? Math.max(1, Math.floor(lease.lockTtlMs / RENEWALS_PER_TTL));
    if (
      !Number.isSafeInteger(this.renewIntervalMs) ||
      this.renewIntervalMs < 1 ||
      this.renewIntervalMs >= lease.lockTtlMs
    ) {
      throw new RangeError(`renewIntervalMs must be a whole number in [1, lockTtlMs), got ${this.renewIntervalMs}`);
    }
    // From the moment the acquire was sent, not when its reply came: Redis started the TTL
    // somewhere in between, so this end is never later than Redis's.
    this.leaseEndMs = lease.acquireSentAtMs + lease.lockTtlMs;
  }

  /** Starts renewing at once; the lease may already be over if the acquire reply was slow. */
  static start(options: WatchdogOptions): Watchdog {
    const watchdog = new Watchdog(options);
    if (performance.now() >= watchdog.leaseEndMs) {
      watchdog.lose('lease_expired');
      return watchdog;
    }
    watchdog.armLeaseTimer();
    watchdog.scheduleRenew(options.lease.acquireSentAtMs);
    return watchdog;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  leaseRemainingMs(): number {
    if (this.state === 'lost') return 0;
    return Math.max(0, this.leaseEndMs - performance.now());
  }

  assertHeld(): void {
    if (this.state === 'running' && performance.now() >= this.leaseEndMs) this.lose('lease_expired');
    if (this.state === 'lost') throw this.lostError();
    if (this.state === 'stopped') throw new LockLostError(this.walletId, this.token, 'stopped');
  }

  /** Stops renewing; does not abort the signal (the work ended normally) and does not release. */
  stop(): void {
    if (this.state !== 'running') return;
    this.state = 'stopped';
    this.clearTimers();
  }

  private lostError(): LockLostError {
    const reason: unknown = this.controller.signal.reason;
    return reason instanceof LockLostError ? reason : new LockLostError(this.walletId, this.token, 'lease_expired');
  }

  private scheduleRenew(lastSentAtMs: number): void {
    const delayMs = Math.max(0, lastSentAtMs + this.renewIntervalMs - performance.now());
    this.renewTimer = setTimeout(() => void this.renewOnce(), delayMs);
  }

  /**
   * One renewal at a time: a second command queued behind a hung one on the same connection
   * would not arrive sooner. A renewal that hangs needs no timeout of its own: the lease timer
   * ends the lease at leaseEndMs whatever the client does, and a late reply is then ignored.
   */
  private async renewOnce(): Promise<void> {
    this.renewTimer = null;
    if (this.state !== 'running') return;
    if (this.stalled?.() === true) {
      this.lose('no_progress');
      return;
    }
    const sentAtMs = performance.now();
    let stillOurs: boolean;
    try {
      stillOurs = await this.renewer.renew(this.walletId, this.owner);
    } catch (error) {
      if (this.state !== 'running') return;
      this.logger.warn(
        {
          event: 'lock_renew_failed',
          ...this.logFields(),
          err: error,
          leaseRemainingMs: Math.round(this.leaseRemainingMs()),
        },
        'lock renewal failed',
      );
      this.scheduleRenew(sentAtMs);
      return;
    }
    if (this.state !== 'running') return;
    if (!stillOurs) {
      this.lose('not_owner');
      return;
    }
    // Redis reset the TTL at some moment after sentAtMs: counting from the send keeps us early.
    this.leaseEndMs = Math.max(this.leaseEndMs, sentAtMs + this.lockTtlMs);
    this.scheduleRenew(sentAtMs);
  }

  /** Fires at leaseEndMs; renewals move leaseEndMs, so the timer re-arms itself when it is early. */
  private armLeaseTimer(): void {
    const delayMs = Math.max(0, this.leaseEndMs - performance.now());
    this.leaseTimer = setTimeout(() => {
      this.leaseTimer = null;
      if (this.state !== 'running') return;
      if (performance.now() >= this.leaseEndMs) {
        this.lose('lease_expired');
      } else {
        this.armLeaseTimer();
      }
    }, delayMs);
  }

  private lose(reason: LockLostReason): void {
    if (this.state !== 'running') return;
    this.state = 'lost';
    this.clearTimers();
    const overrunMs = Math.round(performance.now() - this.leaseEndMs);
    this.logger.warn({ event: 'lock_lost', ...this.logFields(), reason, overrunMs }, 'lock lost, aborting the work');
    this.controller.abort(new LockLostError(this.walletId, this.token, reason));
  }

  private clearTimers(): void {
    if (this.renewTimer !== null) clearTimeout(this.renewTimer);
    if (this.leaseTimer !== null) clearTimeout(this.leaseTimer);
    this.renewTimer = null;
    this.leaseTimer = null;
  }

  private logFields(): { walletId: string; owner: string; token: string } {
    return { walletId: this.walletId, owner: this.owner, token: this.token.toString() };
  }
}
