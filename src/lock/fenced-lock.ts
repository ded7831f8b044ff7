// The Redis lock service (LOCK_BACKEND=redis, the default): acquire (with a fencing token from a
// counter kept beside the lock key), renew, release and advance the fence, over the Lua scripts
// in lua/. Owns no connection: the ioredis client is passed in.

import type { ProbeResult } from '../ops/probes.ts';
import { withinMs } from '../ops/probes.ts';
import { assertKeyPrefix, type LockKeys, lockKeysOf } from './lock-keys.ts';
import { type LockRedisClient, type LockScripts, loadLockScripts } from './lock-scripts.ts';
import {
  type AdvanceFenceResult,
  composeToken,
  LockService,
  type LockServiceOptions,
  type RawAcquire,
} from './lock-service.ts';

export {
  ACQUIRE_ATTEMPTS_MAX_DEFAULT,
  ACQUIRE_ATTEMPTS_MAX_LIMIT,
  ACQUIRE_BACKOFF_BASE_MS_DEFAULT,
  ACQUIRE_BACKOFF_CAP_MS_DEFAULT,
  ACQUIRE_BACKOFF_CAP_MS_LIMIT,
  type AcquireResult,
  type AdvanceFenceResult,
  LOCK_TTL_MS_MAX,
  LOCK_TTL_MS_MIN,
  type LockLease,
  OWNER_PREFIX_LENGTH_MAX,
  type ReleaseAllResult,
} from './lock-service.ts';

export interface FencedLockOptions extends LockServiceOptions {
  /** The client the lock sends its scripts through; the caller owns (connects, closes) it. */
  readonly redis: LockRedisClient;
  /** Prepended to every key (`ft:` gives `ft:{wallet:w1}:lock`), so tenants and tests do not collide. */
  readonly keyPrefix?: string;
}

export class FencedLock extends LockService {
  readonly backend = 'redis' as const;
  readonly keyPrefix: string;
  private readonly redis: LockRedisClient;
  private readonly scripts: LockScripts;

  constructor(options: FencedLockOptions) {
    super(options);
    this.keyPrefix = options.keyPrefix ?? '';
    assertKeyPrefix(this.keyPrefix);
    this.redis = options.redis;
    this.scripts = loadLockScripts(options.redis);
  }

  keysOf(walletId: string): LockKeys {
    return lockKeysOf(this.keyPrefix, walletId);
  }

  protected async tryAcquire(walletId: string, owner: string): Promise<RawAcquire> {
    const keys = this.keysOf(walletId);
    // Redis starts the TTL after this moment, so a lease measured from here ends no later than Redis's.
    const startedAtMs = performance.now();
    const reply = await this.sendAcquire(walletId, keys, owner);
    if (reply.kind === 'busy') {
      if (reply.pttlMs < 0) {
        // Only a writer that bypassed acquire.lua leaves a lock without TTL; it will never expire.
        this.logger.error({ event: 'lock_without_ttl', walletId, pttlMs: reply.pttlMs }, 'lock key has no TTL');
      }
      return { kind: 'busy', retryAfterMs: reply.pttlMs >= 0 ? reply.pttlMs : this.lockTtlMs };
    }
    return { kind: 'acquired', raw: reply.token, startedAtMs };
  }

  /**
   * An acquire that failed (a command timeout, a connection flushed) may still run: ioredis
   * keeps it queued or resends it after a reconnect. Whoever reads its reply, nobody holds its
   * owner id any more, so an owner-checked release follows it on the same connection, in order,
   * without delaying the caller: the lock is given back instead of held by nobody for a TTL.
   */
  private async sendAcquire(
    walletId: string,
    keys: LockKeys,
    owner: string,
  ): Promise<Awaited<ReturnType<LockScripts['acquire']>>> {
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

  /** Resets the TTL to lockTtlMs if `owner` still holds the lock; false means it is not ours any more. */
  async renew(walletId: string, owner: string): Promise<boolean> {
    return this.scripts.renew(this.keysOf(walletId), owner, this.lockTtlMs);
  }

  protected async releaseOwned(walletId: string, owner: string): Promise<boolean> {
    return this.scripts.release(this.keysOf(walletId), owner);
  }

  /**
   * Raises the wallet's fence counter to at least `raw` (never lowers it), so the next token is
   * above every token the database has seen: the recovery after Redis lost its data.
   */
  protected async raiseRaw(walletId: string, raw: bigint): Promise<AdvanceFenceResult> {
    const reply = await this.scripts.advanceFence(this.keysOf(walletId), raw);
    return { kind: reply.kind, fence: composeToken(this.epoch, reply.fence) };
  }

  async probe(timeoutMs: number): Promise<ProbeResult> {
    try {
      await withinMs(this.redis.ping(), timeoutMs, 'PING');
      return { ok: true };
    } catch (err) {
      return { ok: false, variable: 'REDIS_URL', detail: `the lock's Redis: ${(err as Error).message}` };
    }
  }

  /** The client is the caller's: nothing to close. */
  async close(): Promise<void> {}
}
