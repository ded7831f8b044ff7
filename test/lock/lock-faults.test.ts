// The watchdog when Redis itself fails, on a private redis-server: frozen (SIGSTOP) and killed.
// The clients queue commands forever (maxRetriesPerRequest: null), so only the watchdog's own
// lease clock can notice; withLock must still return, never hang on the release.
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { LockLostError } from '../../src/errors.ts';
import { FencedLock, type LockLease } from '../../src/lock/fenced-lock.ts';
import { Watchdog } from '../../src/lock/watchdog.ts';
import { withLock } from '../../src/lock/with-lock.ts';
import { abortedAt, captureLog, connectPrivate, makeTempDir } from './lock-fixtures.ts';

const TTL_MS = 300;
/** Timer latency on a loaded machine; the lease bound itself is checked without it. */
const TIMER_SLACK_MS = 100;

let dir: string;
let server: LocalRedis;
let redis: Redis;
const watchdogs: Watchdog[] = [];

async function acquire(lock: FencedLock, walletId: string): Promise<LockLease> {
  const result = await lock.acquire(walletId);
  if (result.kind !== 'acquired') throw new Error(`expected the lock on ${walletId}`);
  return result.lease;
}

beforeAll(async () => {
  dir = makeTempDir('faults');
  server = await LocalRedis.start({ dir });
});

afterEach(async () => {
  for (const watchdog of watchdogs.splice(0)) watchdog.stop();
  // Every test leaves the server running and a fresh client for the next one.
  server.resume();
  redis?.disconnect();
  if (server.pid === undefined) await server.restart();
});

afterAll(async () => {
  redis?.disconnect();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('watchdog when Redis fails', () => {
  it('fires within TTL after the server is frozen with SIGSTOP', async () => {
    redis = connectPrivate(server);
    const { logger, entries } = captureLog();
    const lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: 'faults:', logger });
    const lease = await acquire(lock, 'paused');
    const watchdog = Watchdog.start({ renewer: lock, lease, logger });
    watchdogs.push(watchdog);
    await sleep(TTL_MS / 2);

    server.pause();
    const pausedAtMs = performance.now();
    // Deterministic part: whatever renewal last succeeded was sent before the pause.
    expect(watchdog.leaseRemainingMs()).toBeLessThanOrEqual(TTL_MS);
    const firedAtMs = await abortedAt(watchdog.signal, 10 * TTL_MS);

    expect(firedAtMs - pausedAtMs).toBeLessThanOrEqual(TTL_MS + TIMER_SLACK_MS);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'lease_expired', walletId: 'paused' });
    expect(() => watchdog.assertHeld()).toThrow(LockLostError);
    expect(entries.some((entry) => entry.event === 'lock_lost' && entry.owner === lease.owner)).toBe(true);

    // The renewal stuck in the frozen server answers after the resume: too late, it changes nothing.
    server.resume();
    await redis.ping();
    await sleep(TTL_MS / 3);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'lease_expired' });
    expect(() => watchdog.assertHeld()).toThrow(LockLostError);
  });

  it('fires within TTL after the server is killed', async () => {
    redis = connectPrivate(server);
    const { logger, entries } = captureLog();
    const lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: 'faults:', logger });
    const lease = await acquire(lock, 'killed');
    const watchdog = Watchdog.start({ renewer: lock, lease, logger });
    watchdogs.push(watchdog);
    await sleep(TTL_MS / 2);

    const remainingMs = watchdog.leaseRemainingMs();
    await server.kill();
    const killedAtMs = performance.now();
    expect(remainingMs).toBeLessThanOrEqual(TTL_MS);
    const firedAtMs = await abortedAt(watchdog.signal, 10 * TTL_MS);

    expect(firedAtMs - killedAtMs).toBeLessThanOrEqual(TTL_MS + TIMER_SLACK_MS);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'lease_expired', walletId: 'killed' });
    const lost = entries.find((entry) => entry.event === 'lock_lost');
    expect(lost).toMatchObject({ walletId: 'killed', owner: lease.owner, token: lease.token.toString() });
  });

  it(
    'withLock aborts the work and returns after cleanup when Redis freezes mid-work',
    async () => {
      redis = connectPrivate(server);
      const { logger, entries } = captureLog();
      const lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: 'faults:', logger });
      let committed = false;

      const startedMs = performance.now();
      const outcome = withLock(lock, 'frozen-mid-work', async (signal, _token, lease) => {
        server.pause();
        // Work that would run far longer than the lease, but listens to the signal; timers/promises
        // rejects with an AbortError, throwIfAborted() turns that into the LockLostError.
        await sleep(20 * TTL_MS, undefined, { signal }).catch((error: unknown) => {
          signal.throwIfAborted();
          throw error;
        });
        lease.assertHeld();
        committed = true;
      });
      await expect(outcome).rejects.toBeInstanceOf(LockLostError);
      const elapsedMs = performance.now() - startedMs;

      expect(committed).toBe(false);
      // Lease (TTL) plus the bounded release wait (TTL), not the 20 × TTL of the work or forever.
      expect(elapsedMs).toBeLessThanOrEqual(2 * TTL_MS + 2 * TIMER_SLACK_MS);
      expect(entries.some((entry) => entry.event === 'lock_release_timed_out')).toBe(true);
    },
    20 * TTL_MS,
  );
});
