// FencedLock against the shared Redis (unique key prefix): tokens, mutual exclusion under
// contention, takeover after expiry, bounded busy retries, exact token transport, logs, and
// scripts that are safe to run twice (ioredis resends a command whose reply a reconnect lost).
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedLock, type LockLease } from '../../src/lock/fenced-lock.ts';
import { FENCE_TARGET_MAX, loadLockScripts } from '../../src/lock/lock-scripts.ts';
import { captureLog, connectShared, deleteKeysWithPrefix, sharedRedisUrl, uniqueKeyPrefix } from './lock-fixtures.ts';

/** Long enough that no lease expires during the contention test. */
const CONTENTION_TTL_MS = 10_000;
const CONTENTION_CYCLES = 1_000;
const CONTENTION_CONNECTIONS = 4;
const SHORT_TTL_MS = 200;

const keyPrefix = uniqueKeyPrefix('fenced-lock');
const clients: Redis[] = [];
let redis: Redis;

function connect(): Redis {
  const client = connectShared();
  clients.push(client);
  return client;
}

function expectAcquired(result: Awaited<ReturnType<FencedLock['acquire']>>): LockLease {
  if (result.kind !== 'acquired') throw new Error(`expected the lock, got ${JSON.stringify(result)}`);
  return result.lease;
}

beforeAll(() => {
  redis = connect();
});

afterAll(async () => {
  await deleteKeysWithPrefix(redis, keyPrefix);
  for (const client of clients) client.disconnect();
});

describe('FencedLock', () => {
  it('issues increasing bigint tokens only to the acquirer that got the lock', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    const first = expectAcquired(await lock.acquire('basic'));
    expect(typeof first.token).toBe('bigint');
    expect(first.token).toBe(1n);

    const busy = await lock.acquire('basic');
    expect(busy.kind).toBe('busy');
    if (busy.kind === 'busy') {
      expect(busy.retryAfterMs).toBeGreaterThan(0);
      expect(busy.retryAfterMs).toBeLessThanOrEqual(CONTENTION_TTL_MS);
    }
    // A failed attempt issues no token.
    expect(await redis.get(lock.keysOf('basic').fenceKey)).toBe('1');

    expect(await lock.renew('basic', 'someone-else')).toBe(false);
    expect(await lock.release('basic', 'someone-else')).toBe(false);
    expect(await redis.get(lock.keysOf('basic').lockKey)).toBe(first.owner);

    expect(await lock.renew('basic', first.owner)).toBe(true);
    expect(await lock.release('basic', first.owner)).toBe(true);
    expect(await redis.exists(lock.keysOf('basic').lockKey)).toBe(0);

    const second = expectAcquired(await lock.acquire('basic'));
    expect(second.token).toBe(2n);
    expect(second.owner).not.toBe(first.owner);
    // Each acquisition has its own identity, a UUID that ends its owner id.
    expect(second.leaseId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(second.owner.endsWith(second.leaseId)).toBe(true);
    expect(second.leaseId).not.toBe(first.leaseId);
    await lock.release('basic', second.owner);
  });

  it(`keeps ${CONTENTION_CYCLES} acquire/release cycles over ${CONTENTION_CONNECTIONS} connections exclusive, with strictly increasing tokens`, async () => {
    const walletId = 'contended';
    const locks = Array.from(
      { length: CONTENTION_CONNECTIONS },
      () => new FencedLock({ redis: connect(), lockTtlMs: CONTENTION_TTL_MS, keyPrefix }),
    );
    let holders = 0;
    let granted = 0;
    let busyReplies = 0;
    let highestToken = 0n;
    const tokens = new Set<bigint>();
    const violations: string[] = [];

    const cycle = async (lock: FencedLock): Promise<void> => {
      while (granted < CONTENTION_CYCLES) {
        const result = await lock.acquire(walletId);
        if (result.kind === 'busy') {
          busyReplies += 1;
          await nextTurn();
          continue;
        }
        const { owner, token } = result.lease;
        holders += 1;
        if (holders !== 1) violations.push(`${holders} holders at once (token ${token})`);
        if (token <= highestToken) violations.push(`token ${token} after ${highestToken}`);
        if (tokens.has(token)) violations.push(`token ${token} granted twice`);
        tokens.add(token);
        highestToken = token > highestToken ? token : highestToken;
        granted += 1;
        // Hold the lock across a turn of the event loop so the other connections' attempts land on it.
        await nextTurn();
        holders -= 1;
        if (!(await lock.release(walletId, owner))) violations.push(`release of token ${token} deleted nothing`);
      }
    };

    const startedMs = performance.now();
    await Promise.all(locks.map(cycle));
    const elapsedMs = performance.now() - startedMs;

    expect(violations).toEqual([]);
    expect(granted).toBeGreaterThanOrEqual(CONTENTION_CYCLES);
    expect(tokens.size).toBe(granted);
    expect(busyReplies).toBeGreaterThan(0);
    // Tokens are issued only on success: the counter equals the number of grants.
    expect(await redis.get(locks[0]!.keysOf(walletId).fenceKey)).toBe(String(granted));
    expect(elapsedMs).toBeLessThan(30_000);
  });

  it('lets a new holder overtake an expired lease; the stale holder can neither release nor renew', async () => {
    const walletId = 'expiring';
    const stale = new FencedLock({ redis: connect(), lockTtlMs: SHORT_TTL_MS, keyPrefix });
    const fresh = new FencedLock({ redis: connect(), lockTtlMs: CONTENTION_TTL_MS, keyPrefix });

    const old = expectAcquired(await stale.acquire(walletId));
    expect((await fresh.acquire(walletId)).kind).toBe('busy');
    // No watchdog: the lease simply runs out.
    await sleep(SHORT_TTL_MS + 50);

    const next = expectAcquired(await fresh.acquire(walletId));
    expect(next.token).toBeGreaterThan(old.token);

    expect(await stale.release(walletId, old.owner)).toBe(false);
    expect(await redis.get(fresh.keysOf(walletId).lockKey)).toBe(next.owner);
    expect(await stale.renew(walletId, old.owner)).toBe(false);
    expect(await redis.get(fresh.keysOf(walletId).lockKey)).toBe(next.owner);
    const pttlMs = await redis.pttl(fresh.keysOf(walletId).lockKey);
    expect(pttlMs).toBeGreaterThan(SHORT_TTL_MS);

    expect(await fresh.renew(walletId, next.owner)).toBe(true);
    expect(await fresh.release(walletId, next.owner)).toBe(true);
  });

  it('acquireWithRetry gives up after acquireAttemptsMax with a typed busy result', async () => {
    const walletId = 'busy-retry';
    const holder = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    const held = expectAcquired(await holder.acquire(walletId));
    const waiter = new FencedLock({
      redis,
      lockTtlMs: CONTENTION_TTL_MS,
      keyPrefix,
      acquireAttemptsMax: 4,
      acquireBackoffBaseMs: 10,
      acquireBackoffCapMs: 40,
      random: () => 0.999,
    });
    const startedMs = performance.now();
    const result = await waiter.acquireWithRetry(walletId);
    const elapsedMs = performance.now() - startedMs;
    expect(result).toMatchObject({ kind: 'busy', attempts: 4 });
    if (result.kind === 'busy') expect(result.retryAfterMs).toBeGreaterThan(CONTENTION_TTL_MS - 5_000);
    // Waits of 10, 20 and 40 ms (the draw is at the top of each range), bounded by the cap.
    expect(elapsedMs).toBeGreaterThanOrEqual(65);
    expect(elapsedMs).toBeLessThan(2_000);
    await holder.release(walletId, held.owner);
  });

  it('acquireWithRetry gets the lock once the holder lets go during the back-off', async () => {
    const walletId = 'retry-success';
    const holder = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    const held = expectAcquired(await holder.acquire(walletId));
    const waiter = new FencedLock({
      redis,
      lockTtlMs: CONTENTION_TTL_MS,
      keyPrefix,
      acquireAttemptsMax: 20,
      acquireBackoffBaseMs: 5,
      acquireBackoffCapMs: 20,
    });
    const releasing = sleep(60).then(() => holder.release(walletId, held.owner));
    const result = await waiter.acquireWithRetry(walletId);
    await releasing;
    const lease = expectAcquired(result);
    expect(lease.token).toBe(held.token + 1n);
    await waiter.release(walletId, lease.owner);
  });

  it('carries tokens exactly as strings and bigints, also past 1e14 and 2^53', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    // Lua's tostring would print 123456789012346 as "1.2345678901235e+14".
    await lock.advanceFence('big', 123_456_789_012_345n);
    const aboveTenToFourteen = expectAcquired(await lock.acquire('big'));
    expect(aboveTenToFourteen.token).toBe(123_456_789_012_346n);
    await lock.release('big', aboveTenToFourteen.owner);

    // Counters above 2^53 only arise from a foreign writer; acquire still reports them exactly.
    await redis.set(lock.keysOf('huge').fenceKey, '9007199254740993');
    const aboveTwoToFiftyThree = expectAcquired(await lock.acquire('huge'));
    expect(aboveTwoToFiftyThree.token).toBe(9_007_199_254_740_994n);
    await lock.release('huge', aboveTwoToFiftyThree.owner);

    // 2^53 and above is a fence of a later lock epoch (lock-service.ts): this process is fenced out.
    expect((await lock.advanceFence('big', FENCE_TARGET_MAX + 1n)).kind).toBe('superseded');
    await expect(lock.advanceFence('big', -1n)).rejects.toThrow(RangeError);
  });

  it('gives the lock back when the fence counter is corrupt instead of holding it without a token', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    await redis.set(lock.keysOf('corrupt').fenceKey, 'not-a-number');
    await expect(lock.acquire('corrupt')).rejects.toThrow(/not an integer/);
    expect(await redis.exists(lock.keysOf('corrupt').lockKey)).toBe(0);
  });

  it('answers a repeat of an acquisition that holds the lock already with the lock and a fresh token', async () => {
    const scripts = loadLockScripts(redis);
    const keys = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix }).keysOf('repeated');
    expect(await scripts.acquire(keys, 'owner-a', CONTENTION_TTL_MS)).toEqual({ kind: 'ok', token: 1n });
    // The holder's clock counts from the first send, so a repeat must not lengthen the lease.
    await redis.pexpire(keys.lockKey, SHORT_TTL_MS * 10);

    // Token 1 went out in a reply that never arrived; the repeat gets the next one.
    expect(await scripts.acquire(keys, 'owner-a', CONTENTION_TTL_MS)).toEqual({ kind: 'ok', token: 2n });
    expect(await redis.get(keys.lockKey)).toBe('owner-a');
    expect(await redis.pttl(keys.lockKey)).toBeLessThanOrEqual(SHORT_TTL_MS * 10);

    // Another owner is still refused, and its attempt issues nothing.
    expect(await scripts.acquire(keys, 'owner-b', CONTENTION_TTL_MS)).toMatchObject({ kind: 'busy' });
    expect(await redis.get(keys.fenceKey)).toBe('2');

    // After advance-fence (the database had seen 100), a repeat answers above it: never the
    // counter read back, which is a token the database has seen, nor the token issued before.
    await scripts.advanceFence(keys, 100n);
    expect(await scripts.acquire(keys, 'owner-a', CONTENTION_TTL_MS)).toEqual({ kind: 'ok', token: 101n });

    // A repeat that meets a corrupt counter gives the lock back like a first run does.
    await redis.set(keys.fenceKey, 'not-a-number');
    await expect(scripts.acquire(keys, 'owner-a', CONTENTION_TTL_MS)).rejects.toThrow(/not an integer/);
    expect(await redis.exists(keys.lockKey)).toBe(0);
  });

  it('renews and releases safely when sent twice: a repeat touches no other owner', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    const keys = lock.keysOf('repeated-release');
    const first = expectAcquired(await lock.acquire('repeated-release'));
    expect(await lock.renew('repeated-release', first.owner)).toBe(true);
    expect(await lock.renew('repeated-release', first.owner)).toBe(true);
    expect(await lock.release('repeated-release', first.owner)).toBe(true);
    // The repeat of a release that ran finds nothing of ours: 0, nothing deleted.
    expect(await lock.release('repeated-release', first.owner)).toBe(false);

    const next = expectAcquired(await lock.acquire('repeated-release'));
    await redis.pexpire(keys.lockKey, SHORT_TTL_MS * 10);
    expect(await lock.release('repeated-release', first.owner)).toBe(false);
    expect(await lock.renew('repeated-release', first.owner)).toBe(false);
    expect(await redis.get(keys.lockKey)).toBe(next.owner);
    expect(await redis.pttl(keys.lockKey)).toBeLessThanOrEqual(SHORT_TTL_MS * 10);
    expect(await lock.release('repeated-release', next.owner)).toBe(true);
  });

  it('logs acquire and release with walletId, owner and token as a string, and no connection string', async () => {
    const { logger, entries, rawLines } = captureLog();
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix, logger });
    const lease = expectAcquired(await lock.acquire('logged'));
    await lock.release('logged', lease.owner, lease.token);
    await lock.release('logged', lease.owner, lease.token);

    expect(entries.find((entry) => entry.event === 'lock_acquired')).toMatchObject({
      walletId: 'logged',
      owner: lease.owner,
      token: lease.token.toString(),
    });
    expect(entries.find((entry) => entry.event === 'lock_released')).toMatchObject({
      walletId: 'logged',
      owner: lease.owner,
      token: lease.token.toString(),
    });
    expect(entries.find((entry) => entry.event === 'lock_release_not_owner')).toMatchObject({ walletId: 'logged' });
    for (const line of rawLines) {
      expect(line).not.toContain(sharedRedisUrl());
      expect(line).not.toMatch(/redis:\/\//);
    }
  });

  it('refuses options outside their limits', () => {
    expect(() => new FencedLock({ redis, lockTtlMs: 10 })).toThrow(RangeError);
    expect(() => new FencedLock({ redis, lockTtlMs: 1500.5 })).toThrow(RangeError);
    expect(() => new FencedLock({ redis, lockTtlMs: 1_000, keyPrefix: '{x}' })).toThrow(RangeError);
    expect(() => new FencedLock({ redis, lockTtlMs: 1_000, acquireAttemptsMax: 0 })).toThrow(RangeError);
    expect(
      () => new FencedLock({ redis, lockTtlMs: 1_000, acquireBackoffBaseMs: 100, acquireBackoffCapMs: 50 }),
    ).toThrow(RangeError);
  });
});

describe('FencedLock owner prefix and releaseAll', () => {
  it('writes owner ids that start with the prefix, so a process can find the locks it holds', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix, ownerPrefix: 'worker-7-ab12:' });
    const lease = expectAcquired(await lock.acquire('prefixed'));
    expect(lease.owner).toMatch(/^worker-7-ab12:[0-9a-f-]{36}$/);
    expect(await redis.get(lock.keysOf('prefixed').lockKey)).toBe(lease.owner);
    expect(() => new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, ownerPrefix: 'has space' })).toThrow(
      /ownerPrefix/,
    );
    expect(await lock.release('prefixed', lease.owner)).toBe(true);
  });

  it('releaseAll releases every lease still held and counts those taken over meanwhile', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: CONTENTION_TTL_MS, keyPrefix });
    const leases = [];
    for (const wallet of ['all-1', 'all-2', 'all-3']) leases.push(expectAcquired(await lock.acquire(wallet)));
    expect(await lock.release('all-1', (leases[0] as LockLease).owner)).toBe(true);
    // Someone else holds all-3 now (our lease expired and was taken over).
    await redis.set(lock.keysOf('all-3').lockKey, 'another-owner');
    expect(lock.heldCount).toBe(2);
    expect(await lock.releaseAll(2_000)).toEqual({ released: 1, notOwned: 1, failed: 0 });
    expect(lock.heldCount).toBe(0);
    expect(await redis.exists(lock.keysOf('all-2').lockKey)).toBe(0);
    expect(await redis.get(lock.keysOf('all-3').lockKey)).toBe('another-owner');
  });
});
