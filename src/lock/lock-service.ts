// What every lock service of a wallet does, whichever server runs it (LOCK_BACKEND: Redis, etcd,
// PostgreSQL advisory locks): acquire with a fencing token that only grows per wallet, renew,
// release only its own lease, raise the fence after the database refused a token. The worker
// above (watchdog, shared leases, the decision's fence check) sees this class alone. A backend
// implements four raw calls; retries, back-off, the leases held and the token's epoch are here.
//
// The token the database sees is `epoch × 2^53 + raw`: `raw` is the backend's own number (a
// Redis counter, an etcd create revision, a PostgreSQL sequence value), below 2^53; the epoch is
// the lock epoch the database recorded when the fleet moved to this backend (lock-epochs.ts).
// A holder of an older epoch can then never write after one of a newer epoch, however far the
// new backend's numbers are below the old one's.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { wholeNumberIn } from '../config/bounds.ts';
import { LOCK_BACKENDS, SETTINGS } from '../config/settings.ts';
import type { Logger } from '../log/logger.ts';
import type { ProbeResult } from '../ops/probes.ts';
import { fullJitterDelayMs } from './backoff.ts';

export { LOCK_BACKENDS };
export type LockBackendName = (typeof LOCK_BACKENDS)[number];

/** Same bounds as LOCK_TTL_MS in the configuration. */
export const LOCK_TTL_MS_MIN = SETTINGS.LOCK_TTL_MS.min;
export const LOCK_TTL_MS_MAX = SETTINGS.LOCK_TTL_MS.max;

/** Busy lock: a short bounded wait inside the worker slot, then the job goes back to the queue delayed. */
export const ACQUIRE_ATTEMPTS_MAX_DEFAULT = 5;
export const ACQUIRE_BACKOFF_BASE_MS_DEFAULT = 20;
export const ACQUIRE_BACKOFF_CAP_MS_DEFAULT = 500;
/** An owner prefix names the holder process in every owner id it writes (`<prefix><uuid>`). */
export const OWNER_PREFIX_LENGTH_MAX = 64;
const OWNER_PREFIX_PATTERN = /^[A-Za-z0-9._:-]*$/;
/** Limits on the options, so a typo cannot park a worker slot for minutes. */
export const ACQUIRE_ATTEMPTS_MAX_LIMIT = 100;
export const ACQUIRE_BACKOFF_CAP_MS_LIMIT = 60_000;

/** A backend's own token is below 2^53; the epoch takes the bits above. */
export const RAW_TOKEN_BITS = 53n;
export const RAW_TOKEN_MAX = 2n ** RAW_TOKEN_BITS - 1n;
/** PostgreSQL's bigint, where the fence is kept. */
export const TOKEN_MAX = 2n ** 63n - 1n;
/** Epochs 0..1023: the token stays below 2^63, PostgreSQL's bigint. */
export const LOCK_EPOCH_MAX = 1023;

/** The token the database sees for a backend's `raw` number in `epoch`. */
export function composeToken(epoch: number, raw: bigint): bigint {
  if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > LOCK_EPOCH_MAX) {
    throw new RangeError(`lock epoch must be a whole number in [0, ${LOCK_EPOCH_MAX}], got ${epoch}`);
  }
  // Epoch 0 is every fleet before epochs: its Redis tokens pass as they always did.
  if (epoch === 0 && raw >= 0n && raw <= TOKEN_MAX) return raw;
  if (raw < 0n || raw > RAW_TOKEN_MAX) throw new RangeError(`a backend's token must be in [0, 2^53), got ${raw}`);
  return (BigInt(epoch) << RAW_TOKEN_BITS) | raw;
}

/** The epoch and the backend's number of a token the database holds. */
export function splitToken(token: bigint): { readonly epoch: number; readonly raw: bigint } {
  if (token < 0n) throw new RangeError(`a fencing token is not negative, got ${token}`);
  return { epoch: Number(token >> RAW_TOKEN_BITS), raw: token & RAW_TOKEN_MAX };
}

export interface LockServiceOptions {
  /** Lease length; the watchdog renews every third of it. */
  readonly lockTtlMs: number;
  /** Default: a silent logger. */
  readonly logger?: Logger;
  /** Attempts acquireWithRetry makes, the first included. */
  readonly acquireAttemptsMax?: number;
  readonly acquireBackoffBaseMs?: number;
  readonly acquireBackoffCapMs?: number;
  /** Source of jitter in [0, 1); default Math.random. Pass a seeded one for reproducible runs. */
  readonly random?: () => number;
  /**
   * Put in front of every owner id this lock writes (default none), so the holder of a lock key
   * can be told from its value: a worker passes its instance id and can show it left none behind.
   */
  readonly ownerPrefix?: string;
  /** The lock epoch this process's tokens carry (default 0, the Redis of every fleet before epochs). */
  readonly epoch?: number;
}

export interface ReleaseAllResult {
  readonly released: number;
  /** Leases that had expired or been taken over already. */
  readonly notOwned: number;
  /** Releases that failed or did not answer in time; those leases expire by their TTL. */
  readonly failed: number;
}

/** What an acquisition holds. The token is a bigint: tokens are compared exactly, never as doubles. */
export interface LockLease {
  readonly walletId: string;
  /** Random per acquisition; renew and release must present it. */
  readonly owner: string;
  /**
   * The acquisition's identity, a UUID: the random part of `owner`. The decision records it
   * beside the token, so two leases that were given the same token are still told apart.
   */
  readonly leaseId: string;
  /** Strictly greater than every token issued before for this wallet (while the backend keeps its data). */
  readonly token: bigint;
  /**
   * performance.now() at or before the moment the lease began at the server, so a lease measured
   * from here ends no later than the server's (for Redis: just before the acquire was sent).
   */
  readonly acquireSentAtMs: number;
  readonly lockTtlMs: number;
}

export type AcquireResult =
  | { readonly kind: 'acquired'; readonly lease: LockLease }
  | {
      readonly kind: 'busy';
      /** A hint for delaying the job (the holder's remaining TTL when the backend knows it). */
      readonly retryAfterMs: number;
      readonly attempts: number;
    };

/**
 * After the database refused a token: `raised` (the next token is above `fence`), `unchanged`
 * (it already was), `superseded` (the fence belongs to a newer lock epoch: this process's tokens
 * can never pass again, the fleet has moved on), `behind` (same epoch, but the backend cannot
 * issue a number above the fence: an etcd cluster rebuilt from nothing; open a new epoch).
 */
export interface AdvanceFenceResult {
  readonly kind: 'raised' | 'unchanged' | 'superseded' | 'behind';
  /** The backend's counter after the call, as a token of this epoch (Redis: the next acquire issues fence + 1). */
  readonly fence: bigint;
}

/** One attempt of a backend: a raw token and when the lease began by our clock, or busy. */
export type RawAcquire =
  | { readonly kind: 'acquired'; readonly raw: bigint; readonly startedAtMs: number }
  | { readonly kind: 'busy'; readonly retryAfterMs: number };

export abstract class LockService {
  abstract readonly backend: LockBackendName;
  readonly lockTtlMs: number;
  readonly logger: Logger;
  readonly acquireAttemptsMax: number;
  readonly acquireBackoffBaseMs: number;
  readonly acquireBackoffCapMs: number;
  readonly ownerPrefix: string;
  private epochInForce: number;
  private readonly random: () => number;
  /** Leases acquired through this object and not released yet: owner id → wallet id. */
  private readonly held = new Map<string, string>();

  constructor(options: LockServiceOptions) {
    this.lockTtlMs = wholeNumberIn('lockTtlMs', options.lockTtlMs, LOCK_TTL_MS_MIN, LOCK_TTL_MS_MAX);
    this.logger = options.logger ?? pino({ level: 'silent' });
    this.acquireAttemptsMax = wholeNumberIn(
      'acquireAttemptsMax',
      options.acquireAttemptsMax ?? ACQUIRE_ATTEMPTS_MAX_DEFAULT,
      1,
      ACQUIRE_ATTEMPTS_MAX_LIMIT,
    );
    this.acquireBackoffCapMs = wholeNumberIn(
      'acquireBackoffCapMs',
      options.acquireBackoffCapMs ?? ACQUIRE_BACKOFF_CAP_MS_DEFAULT,
      1,
      ACQUIRE_BACKOFF_CAP_MS_LIMIT,
    );
    this.acquireBackoffBaseMs = wholeNumberIn(
      'acquireBackoffBaseMs',
      options.acquireBackoffBaseMs ?? ACQUIRE_BACKOFF_BASE_MS_DEFAULT,
      1,
      this.acquireBackoffCapMs,
    );
    this.random = options.random ?? Math.random;
    this.ownerPrefix = options.ownerPrefix ?? '';
    if (this.ownerPrefix.length > OWNER_PREFIX_LENGTH_MAX || !OWNER_PREFIX_PATTERN.test(this.ownerPrefix)) {
      throw new RangeError(
        `ownerPrefix must be up to ${OWNER_PREFIX_LENGTH_MAX} characters of [A-Za-z0-9._:-], got ${JSON.stringify(this.ownerPrefix)}`,
      );
    }
    this.epochInForce = wholeNumberIn('epoch', options.epoch ?? 0, 0, LOCK_EPOCH_MAX);
  }

  /** The lock epoch this process's tokens carry. */
  get epoch(): number {
    return this.epochInForce;
  }

  /**
   * Issues the tokens of `epoch` from now on: the worker reads the epoch in force at start, and
   * again whenever the database opens a new one for its backend. Leases already held keep the
   * tokens they were given (a wallet written under the new epoch refuses them).
   */
  enterEpoch(epoch: number): void {
    const next = wholeNumberIn('epoch', epoch, 0, LOCK_EPOCH_MAX);
    if (next === this.epochInForce) return;
    this.logger.warn(
      { event: 'lock_epoch_entered', backend: this.backend, from: this.epochInForce, to: next },
      'issuing the tokens of another lock epoch',
    );
    this.epochInForce = next;
  }

  /** One attempt at the server. Errors (unreachable, protocol) are thrown: transient, not "busy". */
  protected abstract tryAcquire(walletId: string, owner: string): Promise<RawAcquire>;
  /** Keeps `owner`'s lease; false means it is not ours any more. */
  abstract renew(walletId: string, owner: string): Promise<boolean>;
  /** Ends `owner`'s lease if it is still its own; false means nothing was released. */
  protected abstract releaseOwned(walletId: string, owner: string): Promise<boolean>;
  /** Raises the backend's number for the wallet to at least `raw` (this epoch's part of the fence). */
  protected abstract raiseRaw(walletId: string, raw: bigint): Promise<AdvanceFenceResult>;
  /** Does the lock service answer (readiness)? Bounded by timeoutMs. */
  abstract probe(timeoutMs: number): Promise<ProbeResult>;
  /** Closes what the backend opened itself (clients it was handed stay open). */
  abstract close(): Promise<void>;

  /** One attempt. Errors (server unreachable, protocol) are thrown: they are transient for the caller, not "busy". */
  async acquire(walletId: string): Promise<AcquireResult> {
    const leaseId = randomUUID();
    const owner = `${this.ownerPrefix}${leaseId}`;
    const reply = await this.tryAcquire(walletId, owner);
    if (reply.kind === 'busy') return { kind: 'busy', retryAfterMs: reply.retryAfterMs, attempts: 1 };
    const token = composeToken(this.epoch, reply.raw);
    const lease: LockLease = {
      walletId,
      owner,
      leaseId,
      token,
      acquireSentAtMs: reply.startedAtMs,
      lockTtlMs: this.lockTtlMs,
    };
    this.held.set(owner, walletId);
    if (this.logger.isLevelEnabled('debug')) {
      this.logger.debug(
        { event: 'lock_acquired', backend: this.backend, walletId, owner, token: token.toString() },
        'lock acquired',
      );
    }
    return { kind: 'acquired', lease };
  }

  /**
   * Up to acquireAttemptsMax attempts, waiting a full-jitter exponential back-off between
   * them; then "busy", which the worker turns into a delayed job instead of spinning.
   */
  async acquireWithRetry(walletId: string): Promise<AcquireResult> {
    for (let attempt = 1; ; attempt += 1) {
      const result = await this.acquire(walletId);
      if (result.kind === 'acquired') return result;
      if (attempt >= this.acquireAttemptsMax) {
        this.logger.info(
          { event: 'lock_busy', walletId, attempts: attempt, retryAfterMs: result.retryAfterMs },
          'lock busy, giving up for now',
        );
        return { ...result, attempts: attempt };
      }
      await sleep(fullJitterDelayMs(attempt - 1, this.acquireBackoffBaseMs, this.acquireBackoffCapMs, this.random));
    }
  }

  /**
   * Releases the lock if `owner` still holds it; false means nothing was released (expired or
   * taken over). `token` only goes into the log line.
   */
  async release(walletId: string, owner: string, token?: bigint): Promise<boolean> {
    const released = await this.releaseOwned(walletId, owner);
    // Released or not ours any more: either way this process holds it no longer.
    this.held.delete(owner);
    if (released && !this.logger.isLevelEnabled('debug')) return released;
    const fields = { walletId, owner, ...(token === undefined ? {} : { token: token.toString() }) };
    if (released) {
      this.logger.debug({ event: 'lock_released', ...fields }, 'lock released');
    } else {
      this.logger.warn({ event: 'lock_release_not_owner', ...fields }, 'lock release found the lock no longer ours');
    }
    return released;
  }

  /** Leases acquired and not yet released through this object. */
  get heldCount(): number {
    return this.held.size;
  }

  /** The owner ids of the leases held, for a backend that loses them all at once (a connection). */
  protected heldOwners(): ReadonlyMap<string, string> {
    return this.held;
  }

  /**
   * Releases every lease this object still holds, each bounded by timeoutMs: the last step of a
   * worker's shutdown, once no job runs. Leases whose release fails expire by their TTL.
   */
  async releaseAll(timeoutMs: number): Promise<ReleaseAllResult> {
    const leases = [...this.held];
    const outcomes = await Promise.all(
      leases.map(async ([owner, walletId]) => {
        let timer: NodeJS.Timeout | undefined;
        try {
          return await Promise.race([
            this.release(walletId, owner).then((ok) => (ok ? ('released' as const) : ('not_owned' as const))),
            new Promise<'failed'>((resolve) => {
              timer = setTimeout(() => resolve('failed'), timeoutMs);
            }),
          ]);
        } catch (err) {
          this.logger.warn(
            { event: 'lock_release_failed', walletId, owner, err },
            'lock release failed; the lease will expire',
          );
          return 'failed' as const;
        } finally {
          clearTimeout(timer);
        }
      }),
    );
    return {
      released: outcomes.filter((o) => o === 'released').length,
      notOwned: outcomes.filter((o) => o === 'not_owned').length,
      failed: outcomes.filter((o) => o === 'failed').length,
    };
  }

  /**
   * After the database refused a token as stale (`atLeast` is the wallet's fence): makes the next
   * token of this process above it when the backend can, or says why it cannot. A fence of a newer
   * epoch means the fleet has moved to another lock epoch: nothing this process issues can pass.
   */
  async advanceFence(walletId: string, atLeast: bigint): Promise<AdvanceFenceResult> {
    const fence = splitToken(atLeast);
    let result: AdvanceFenceResult;
    if (fence.epoch > this.epoch) {
      result = { kind: 'superseded', fence: composeToken(this.epoch, 0n) };
    } else if (fence.epoch < this.epoch) {
      // Every token of ours is above an older epoch's: the refusal came from a holder of ours.
      result = { kind: 'unchanged', fence: composeToken(this.epoch, 0n) };
    } else {
      result = await this.raiseRaw(walletId, fence.raw);
    }
    const level = result.kind === 'superseded' || result.kind === 'behind' ? 'error' : 'info';
    this.logger[level](
      {
        event: 'lock_fence_advanced',
        backend: this.backend,
        walletId,
        atLeast: atLeast.toString(),
        outcome: result.kind,
        fence: result.fence.toString(),
      },
      result.kind === 'superseded'
        ? 'the wallet was written under a newer lock epoch: this process is fenced out'
        : result.kind === 'behind'
          ? 'the lock service cannot issue a token above the wallet fence: open a new lock epoch'
          : 'lock fence advanced',
    );
    return result;
  }
}
