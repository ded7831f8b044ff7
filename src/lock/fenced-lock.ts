// The fenced lock of a wallet: acquire (with a fencing token), renew, release and advance the
// fence, over the Lua scripts in lua/. Owns no connection: the ioredis client is passed in.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { wholeNumberIn } from '../config/bounds.ts';
import { SETTINGS } from '../config/settings.ts';
import type { Logger } from '../log/logger.ts';
import { fullJitterDelayMs } from './backoff.ts';
import { assertKeyPrefix, type LockKeys, lockKeysOf } from './lock-keys.ts';
import {
  type AcquireReply,
  type AdvanceFenceReply,
  type LockRedisClient,
  type LockScripts,
  loadLockScripts,
} from './lock-scripts.ts';

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

export interface FencedLockOptions {
  /** The client the lock sends its scripts through; the caller owns (connects, closes) it. */
  readonly redis: LockRedisClient;
  /** Lease length; the watchdog renews every third of it. */
  readonly lockTtlMs: number;
  /** Prepended to every key (`ft:` gives `ft:{wallet:w1}:lock`), so tenants and tests do not collide. */
  readonly keyPrefix?: string;
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
   * beside the token, so two leases that Redis gave the same token are still told apart.
   */
  readonly leaseId: string;
  /** Strictly greater than every token issued before for this wallet (while Redis keeps its data). */
  readonly token: bigint;
  /**
   * performance.now() just before the acquire was sent. Redis starts the TTL later than this,
   * so a lease measured from here ends no later than Redis's.
   */
  readonly acquireSentAtMs: number;
  readonly lockTtlMs: number;
}

export type AcquireResult =
  | { readonly kind: 'acquired'; readonly lease: LockLease }
  | {
      readonly kind: 'busy';
      /** The holder's remaining TTL at the last attempt: a hint for delaying the job. */
      readonly retryAfterMs: number;
      readonly attempts: number;
    };

export type AdvanceFenceResult = AdvanceFenceReply;

export class FencedLock {
  readonly lockTtlMs: number;
  readonly keyPrefix: string;
  readonly logger: Logger;
  readonly acquireAttemptsMax: number;
  readonly acquireBackoffBaseMs: number;
  readonly acquireBackoffCapMs: number;
  readonly ownerPrefix: string;
  private readonly random: () => number;
  private readonly scripts: LockScripts;
  /** Leases acquired through this object and not released yet: owner id → wallet id. */
  private readonly held = new Map<string, string>();

  constructor(options: FencedLockOptions) {
    this.lockTtlMs = wholeNumberIn('lockTtlMs', options.lockTtlMs, LOCK_TTL_MS_MIN, LOCK_TTL_MS_MAX);
    this.keyPrefix = options.keyPrefix ?? '';
    assertKeyPrefix(this.keyPrefix);
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
    this.scripts = loadLockScripts(options.redis);
  }

  keysOf(walletId: string): LockKeys {
    return lockKeysOf(this.keyPrefix, walletId);
  }

  /** One attempt. Errors (Redis unreachable, protocol) are thrown: they are transient for the caller, not "busy". */
  async acquire(walletId: string): Promise<AcquireResult> {
    const keys = this.keysOf(walletId);
    const leaseId = randomUUID();
    const owner = `${this.ownerPrefix}${leaseId}`;
    const acquireSentAtMs = performance.now();
    const reply = await this.sendAcquire(walletId, keys, owner);
    if (reply.kind === 'busy') {
      if (reply.pttlMs < 0) {
        // Only a writer that bypassed acquire.lua leaves a lock without TTL; it will never expire.
        this.logger.error({ event: 'lock_without_ttl', walletId, pttlMs: reply.pttlMs }, 'lock key has no TTL');
      }
      return { kind: 'busy', retryAfterMs: reply.pttlMs >= 0 ? reply.pttlMs : this.lockTtlMs, attempts: 1 };
    }
    const lease: LockLease = {
      walletId,
      owner,
      leaseId,
      token: reply.token,
      acquireSentAtMs,
      lockTtlMs: this.lockTtlMs,
    };
    this.held.set(owner, walletId);
    if (this.logger.isLevelEnabled('debug')) {
      this.logger.debug({ event: 'lock_acquired', walletId, owner, token: reply.token.toString() }, 'lock acquired');
    }
    return { kind: 'acquired', lease };
  }

  /**
   * An acquire that failed (a command timeout, a connection flushed) may still run: ioredis
   * keeps it queued or resends it after a reconnect. Whoever reads its reply, nobody holds its
   * owner id any more, so an owner-checked release follows it on the same connection, in order,
   * without delaying the caller: the lock is given back instead of held by nobody for a TTL.
   */
  private async sendAcquire(walletId: string, keys: LockKeys, owner: string): Promise<AcquireReply> {
    try {
      return await this.scripts.acquire(keys, owner, this.lockTtlMs);
    } catch (err) {
      this.scripts.release(keys, owner).then(
        (released) => {
          if (released) {
            this.logger.warn(
              { event: 'lock_acquire_given_back', walletId, owner },
              'an acquire that had failed ran after all; its lock is given back',
            );
          }
        },
        (releaseErr: unknown) => {
          this.logger.warn(
            { event: 'lock_acquire_give_back_failed', walletId, owner, err: releaseErr },
            'could not give back a lock a failed acquire may have taken; it expires by its TTL',
          );
        },
      );
      throw err;
    }
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

  /** Resets the TTL to lockTtlMs if `owner` still holds the lock; false means it is not ours any more. */
  async renew(walletId: string, owner: string): Promise<boolean> {
    return this.scripts.renew(this.keysOf(walletId), owner, this.lockTtlMs);
  }

  /**
   * Deletes the lock if `owner` still holds it; false means nothing was deleted (expired or
   * taken over). `token` only goes into the log line.
   */
  async release(walletId: string, owner: string, token?: bigint): Promise<boolean> {
    const released = await this.scripts.release(this.keysOf(walletId), owner);
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
   * Raises the wallet's fence counter to at least `atLeast` (never lowers it), so the next
   * token is above every token the database has seen: the recovery after Redis lost its data.
   * `atLeast` must be below 2^53 (see FENCE_TARGET_MAX).
   */
  async advanceFence(walletId: string, atLeast: bigint): Promise<AdvanceFenceResult> {
    const result = await this.scripts.advanceFence(this.keysOf(walletId), atLeast);
    this.logger.info(
      {
        event: 'lock_fence_advanced',
        walletId,
        atLeast: atLeast.toString(),
        outcome: result.kind,
        fence: result.fence.toString(),
      },
      'lock fence advanced',
    );
    return result;
  }
}
