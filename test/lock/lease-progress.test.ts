// The bound on a lease held without progress, against the shared Redis: a lease whose rider never
// gets an answer (its database stopped answering) stops being renewed once progressMsMax has
// passed, its signal fires with `no_progress`, and its lock is released at once, so another lock
// client acquires the wallet. A lease whose riders come and go is renewed as before.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockLostError } from '../../src/errors.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { LEASE_PROGRESS_MS_MAX_DEFAULT, SharedLeases } from '../../src/lock/shared-leases.ts';
import { abortedAt, captureLog, connectShared, deleteKeysWithPrefix, uniqueKeyPrefix } from './lock-fixtures.ts';

const TTL_MS = 300;
const PROGRESS_MS_MAX = 600;
const prefix = uniqueKeyPrefix('lease-progress');
let redis: Redis;
let other: Redis;

beforeAll(() => {
  redis = connectShared();
  other = connectShared();
});

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
  other.disconnect();
});

describe('a lease whose riders get no answer', () => {
  it('is given up after progressMsMax and released, so another client gets the wallet', async () => {
    const log = captureLog();
    const lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: prefix, logger: log.logger });
    const rival = new FencedLock({ redis: other, lockTtlMs: TTL_MS, keyPrefix: prefix });
    const leases = new SharedLeases(lock, { progressMsMax: PROGRESS_MS_MAX });
    const entered = await leases.enter('w-stuck');
    if (entered.kind !== 'held') throw new Error('expected the lease');
    const startedAtMs = performance.now();
    // The rider never leaves: its decision hangs. Meanwhile the watchdog keeps renewing.
    await sleep(PROGRESS_MS_MAX / 2);
    expect((await rival.acquire('w-stuck')).kind).toBe('busy');

    const lostAtMs = await abortedAt(entered.ride.lease.signal, 5_000);
    const reason: unknown = entered.ride.lease.signal.reason;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('no_progress');
    // Checked at each renewal (every TTL/3): given up within one interval of the bound.
    expect(lostAtMs - startedAtMs).toBeGreaterThanOrEqual(PROGRESS_MS_MAX);
    expect(lostAtMs - startedAtMs).toBeLessThan(PROGRESS_MS_MAX + TTL_MS);

    // Released at once, not left to expire: the rival acquires well within a TTL.
    let acquiredAfterMs = Number.NaN;
    for (;;) {
      const r = await rival.acquire('w-stuck');
      if (r.kind === 'acquired') {
        acquiredAfterMs = performance.now() - lostAtMs;
        await rival.release('w-stuck', r.lease.owner);
        break;
      }
      if (performance.now() - lostAtMs > 5 * TTL_MS) break;
      await sleep(10);
    }
    expect(acquiredAfterMs).toBeLessThan(TTL_MS);
    expect(log.entries.some((e) => e.event === 'lease_given_up' && e.walletId === 'w-stuck')).toBe(true);

    // The stuck rider leaving later sends no second release; a new job acquires afresh.
    await entered.ride.leave();
    const again = await leases.enter('w-stuck');
    expect(again.kind).toBe('held');
    if (again.kind === 'held') {
      expect(again.ride.joined).toBe(false);
      await again.ride.leave();
    }
    await leases.settled();
  });

  it('keeps renewing a lease whose riders come and go', async () => {
    const lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: prefix });
    const leases = new SharedLeases(lock, { progressMsMax: PROGRESS_MS_MAX, rideMsMax: 10_000 });
    const first = await leases.enter('w-busy');
    if (first.kind !== 'held') throw new Error('expected the lease');
    // A new rider joins and the previous one leaves every 200 ms, for three bounds' time.
    let current = first.ride;
    const until = performance.now() + 3 * PROGRESS_MS_MAX;
    while (performance.now() < until) {
      await sleep(200);
      const next = await leases.enter('w-busy');
      if (next.kind !== 'held') throw new Error('expected to ride');
      expect(next.ride.joined).toBe(true);
      await current.leave();
      current = next.ride;
    }
    expect(current.lease.signal.aborted).toBe(false);
    await current.leave();
    await leases.settled();
  });

  it('has a default bound: the decision deadline of a worker with the default statement timeout', async () => {
    const { DECISION_DEADLINE_MS_DEFAULT } = await import('../../src/ledger/decision-batcher.ts');
    expect(LEASE_PROGRESS_MS_MAX_DEFAULT).toBe(DECISION_DEADLINE_MS_DEFAULT);
  });
});
