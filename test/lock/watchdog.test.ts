// The watchdog against the shared Redis (unique key prefix): it keeps a lease alive through
// long work, fires when the lock is deleted or taken, and assertHeld() catches a frozen process.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError } from '../../src/errors.ts';
import { FencedLock, type LockLease } from '../../src/lock/fenced-lock.ts';
import { Watchdog } from '../../src/lock/watchdog.ts';
import {
  abortedAt,
  captureLog,
  connectShared,
  deleteKeysWithPrefix,
  freezeEventLoopMs,
  PATIENT_TTL_MS,
  uniqueKeyPrefix,
} from './lock-fixtures.ts';

const TTL_MS = 300;
/** Timer latency on a loaded machine; the lease bound itself is checked without it. */
const TIMER_SLACK_MS = 100;

const keyPrefix = uniqueKeyPrefix('watchdog');
let redis: Redis;
let lock: FencedLock;
const watchdogs: Watchdog[] = [];

async function acquire(walletId: string, target: FencedLock = lock): Promise<LockLease> {
  const result = await target.acquire(walletId);
  if (result.kind !== 'acquired') throw new Error(`expected the lock on ${walletId}`);
  return result.lease;
}

function watch(lease: LockLease, target: FencedLock = lock): Watchdog {
  const watchdog = Watchdog.start({ renewer: target, lease, logger: target.logger });
  watchdogs.push(watchdog);
  return watchdog;
}

beforeAll(() => {
  redis = connectShared();
  lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix });
});

afterAll(async () => {
  for (const watchdog of watchdogs) watchdog.stop();
  await deleteKeysWithPrefix(redis, keyPrefix);
  redis.disconnect();
});

describe('Watchdog', () => {
  it('keeps the lock through work lasting 5 × TTL; the signal never fires', async () => {
    const patient = new FencedLock({ redis, lockTtlMs: PATIENT_TTL_MS, keyPrefix });
    let renewals = 0;
    const counting = {
      renew: (walletId: string, owner: string) => {
        renewals += 1;
        return patient.renew(walletId, owner);
      },
    };
    const lease = await acquire('long-work', patient);
    const watchdog = Watchdog.start({ renewer: counting, lease });
    watchdogs.push(watchdog);
    let fired = false;
    watchdog.signal.addEventListener('abort', () => {
      fired = true;
    });

    const rival = new FencedLock({ redis, lockTtlMs: PATIENT_TTL_MS, keyPrefix });
    for (let slice = 0; slice < 5; slice += 1) {
      await sleep(PATIENT_TTL_MS);
      // Long past the original TTL, the lock is still ours and still excludes others.
      expect((await rival.acquire('long-work')).kind).toBe('busy');
      watchdog.assertHeld();
    }
    expect(fired).toBe(false);
    expect(watchdog.leaseRemainingMs()).toBeGreaterThan(0);
    expect(renewals).toBeGreaterThanOrEqual(12);
    expect(await redis.get(patient.keysOf('long-work').lockKey)).toBe(lease.owner);
    watchdog.stop();
    expect(await patient.release('long-work', lease.owner)).toBe(true);
  });

  it('fires within TTL after the lock key is deleted', async () => {
    const { logger, entries } = captureLog();
    const logged = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix, logger });
    const lease = await acquire('deleted', logged);
    const watchdog = watch(lease, logged);
    await sleep(TTL_MS / 2);

    await redis.del(lock.keysOf('deleted').lockKey);
    const deletedAtMs = performance.now();
    const firedAtMs = await abortedAt(watchdog.signal, 5 * TTL_MS);

    expect(firedAtMs - deletedAtMs).toBeLessThanOrEqual(TTL_MS);
    expect(watchdog.signal.reason).toBeInstanceOf(LockLostError);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'not_owner', walletId: 'deleted', token: lease.token });
    expect(() => watchdog.assertHeld()).toThrow(LockLostError);
    expect(watchdog.leaseRemainingMs()).toBe(0);
    expect(entries.find((entry) => entry.event === 'lock_lost')).toMatchObject({
      walletId: 'deleted',
      owner: lease.owner,
      token: lease.token.toString(),
      reason: 'not_owner',
    });
  });

  it('fires within TTL after another owner overwrites the lock, and leaves that owner alone', async () => {
    const lease = await acquire('overwritten');
    const watchdog = watch(lease);
    await sleep(TTL_MS / 2);

    const { lockKey } = lock.keysOf('overwritten');
    await redis.set(lockKey, 'another-owner', 'PX', 10_000);
    const overwrittenAtMs = performance.now();
    const firedAtMs = await abortedAt(watchdog.signal, 5 * TTL_MS);

    expect(firedAtMs - overwrittenAtMs).toBeLessThanOrEqual(TTL_MS);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'not_owner' });
    // The renewal that noticed did not extend the other owner's TTL, and a release deletes nothing.
    expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(10_000);
    expect(await lock.release('overwritten', lease.owner)).toBe(false);
    expect(await redis.get(lockKey)).toBe('another-owner');
  });

  it('assertHeld() throws after a stop-the-world pause longer than the TTL, before any timer has run', async () => {
    const lease = await acquire('frozen');
    const watchdog = watch(lease);
    watchdog.assertHeld();

    freezeEventLoopMs(TTL_MS + 50);

    // No timer or renewal reply could run during the freeze: only the monotonic clock knows.
    expect(watchdog.signal.aborted).toBe(false);
    expect(watchdog.leaseRemainingMs()).toBe(0);
    expect(() => watchdog.assertHeld()).toThrow(LockLostError);
    expect(watchdog.signal.aborted).toBe(true);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'lease_expired' });
  });

  it('measures the lease from the moment the acquire was sent', () => {
    const sentLongAgo: LockLease = {
      walletId: 'slow-reply',
      owner: 'owner',
      leaseId: '00000000-0000-4000-8000-000000000001',
      token: 1n,
      acquireSentAtMs: performance.now() - TTL_MS - 1,
      lockTtlMs: TTL_MS,
    };
    const watchdog = watch(sentLongAgo);
    expect(watchdog.signal.aborted).toBe(true);
    expect(() => watchdog.assertHeld()).toThrow(LockLostError);

    const sentJustNow: LockLease = { ...sentLongAgo, acquireSentAtMs: performance.now() - TTL_MS / 2 };
    const fresh = watch(sentJustNow);
    expect(fresh.leaseRemainingMs()).toBeLessThanOrEqual(TTL_MS / 2 + 1);
    fresh.stop();
    expect(() => fresh.assertHeld()).toThrow(LockLostError);
  });

  it('fires at the lease end when renewals never answer, however long the client would wait', async () => {
    const lease = await acquire('hung');
    const neverAnswers = { renew: () => new Promise<boolean>(() => {}) };
    const watchdog = Watchdog.start({ renewer: neverAnswers, lease });
    watchdogs.push(watchdog);
    // A plain timer for the lease's end, beside it: on a loaded machine the event loop may run
    // every timer late, and the watchdog is held to the plain timer's lateness, not to the clock's.
    const leaseEndMs = lease.acquireSentAtMs + TTL_MS;
    const plainTimer = new Promise<number>((resolve) =>
      setTimeout(() => resolve(performance.now()), Math.max(0, leaseEndMs - performance.now())),
    );
    const firedAtMs = await abortedAt(watchdog.signal, 5 * TTL_MS);
    const plainFiredAtMs = await plainTimer;
    expect(firedAtMs - lease.acquireSentAtMs).toBeGreaterThanOrEqual(TTL_MS - 1);
    // Not the renewal's answer (which never comes, so 5 × TTL would be the test's own timeout).
    expect(firedAtMs).toBeLessThanOrEqual(Math.max(plainFiredAtMs, leaseEndMs) + TIMER_SLACK_MS);
    expect(watchdog.signal.reason).toMatchObject({ reason: 'lease_expired' });
  });
});
