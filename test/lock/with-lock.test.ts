// withLock against the shared Redis (unique key prefix): the result union, cleanup on success
// and on failure, busy without running the work, and a lost lock surfacing as LockLostError.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError } from '../../src/errors.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import type { HeldLease } from '../../src/lock/watchdog.ts';
import { withLock } from '../../src/lock/with-lock.ts';
import {
  abortedAt,
  captureLog,
  connectShared,
  deleteKeysWithPrefix,
  PATIENT_TTL_MS,
  uniqueKeyPrefix,
} from './lock-fixtures.ts';

const TTL_MS = 300;
const keyPrefix = uniqueKeyPrefix('with-lock');
let redis: Redis;
let lock: FencedLock;

beforeAll(() => {
  redis = connectShared();
  lock = new FencedLock({
    redis,
    lockTtlMs: TTL_MS,
    keyPrefix,
    acquireAttemptsMax: 3,
    acquireBackoffBaseMs: 5,
    acquireBackoffCapMs: 20,
  });
});

afterAll(async () => {
  await deleteKeysWithPrefix(redis, keyPrefix);
  redis.disconnect();
});

describe('withLock', () => {
  it('runs the work under the lock, returns its value and token, and releases', async () => {
    const { lockKey } = lock.keysOf('ok');
    const result = await withLock(lock, 'ok', async (signal, token, lease) => {
      expect(signal.aborted).toBe(false);
      expect(lease.token).toBe(token);
      expect(await redis.get(lockKey)).toBe(lease.owner);
      lease.assertHeld();
      return `done with ${token}`;
    });
    expect(result).toEqual({ kind: 'acquired', value: 'done with 1', token: 1n });
    expect(await redis.exists(lockKey)).toBe(0);
  });

  it('keeps the lock for work longer than the TTL', async () => {
    const patient = new FencedLock({ redis, lockTtlMs: PATIENT_TTL_MS, keyPrefix });
    const result = await withLock(patient, 'long', async (signal, _token, lease) => {
      await sleep(3 * PATIENT_TTL_MS);
      lease.assertHeld();
      return signal.aborted;
    });
    expect(result).toMatchObject({ kind: 'acquired', value: false });
  });

  it('rethrows the work error after stopping the watchdog and releasing', async () => {
    const { logger, entries } = captureLog();
    const logged = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix, logger });
    const { lockKey } = lock.keysOf('throws');
    const failure = new Error('work failed');
    const seen: { signal: AbortSignal; lease: HeldLease }[] = [];
    await expect(
      withLock(logged, 'throws', async (signal, _token, lease) => {
        seen.push({ signal, lease });
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await redis.exists(lockKey)).toBe(0);

    // The watchdog is stopped: no renewal runs later (one would find the lock gone and fire).
    await sleep(TTL_MS);
    const [ran] = seen;
    if (ran === undefined) throw new Error('the work did not run');
    expect(ran.signal.aborted).toBe(false);
    expect(() => ran.lease.assertHeld()).toThrow(LockLostError);
    expect(entries.map((entry) => entry.event)).toEqual(['lock_acquired', 'lock_released']);
    // Nothing keeps renewing a lock that is gone: a new holder keeps its own TTL.
    const next = await withLock(lock, 'throws', async (_signal, token) => token);
    expect(next).toEqual({ kind: 'acquired', value: 2n, token: 2n });
  });

  it('answers busy without running the work when another holder keeps the lock', async () => {
    const other = await lock.acquire('held');
    if (other.kind !== 'acquired') throw new Error('expected the lock');
    let ran = false;
    const result = await withLock(lock, 'held', async () => {
      ran = true;
    });
    expect(ran).toBe(false);
    expect(result).toMatchObject({ kind: 'busy', attempts: 3 });
    if (result.kind === 'busy') expect(result.retryAfterMs).toBeGreaterThan(0);
    expect(await redis.get(lock.keysOf('held').lockKey)).toBe(other.lease.owner);
    await lock.release('held', other.lease.owner);
  });

  it("surfaces a lost lock as LockLostError and does not delete the new owner's lock", async () => {
    const { logger, entries } = captureLog();
    const logged = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix, logger });
    const { lockKey } = lock.keysOf('stolen');
    const outcome = withLock(logged, 'stolen', async (signal) => {
      await redis.set(lockKey, 'thief', 'PX', 10_000);
      await abortedAt(signal, 5 * TTL_MS);
      signal.throwIfAborted();
    });
    await expect(outcome).rejects.toBeInstanceOf(LockLostError);
    await expect(outcome).rejects.toMatchObject({ reason: 'not_owner', walletId: 'stolen' });
    expect(await redis.get(lockKey)).toBe('thief');
    expect(entries.map((entry) => entry.event)).toEqual(['lock_acquired', 'lock_lost', 'lock_release_not_owner']);
  });
});
