// The watch of the worker fleet through a formation fault, and the run's check on it: readiness
// read from probes that answer as scripted, leases from real lock keys in the shared Redis under
// a prefix of the test's own; the check fails on a worker that never said not ready through a
// failover, on workers not ready again, and on a lease held past the bound.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { walletHoldBoundMs } from '../../../harness/chaos/pg-blackhole.ts';
import {
  NOT_READY_REQUIRED_AFTER_MS,
  type PgFleetFigures,
  PgFleetWatch,
  pgFleetCheck,
} from '../../../harness/chaos/pg-fleet-watch.ts';
import { connectShared, deleteKeysWithPrefix, uniqueKeyPrefix } from '../../lock/lock-fixtures.ts';

let redis: Redis;
const prefix = uniqueKeyPrefix('pg-fleet-watch');

beforeAll(() => {
  redis = connectShared();
});

afterAll(async () => {
  await deleteKeysWithPrefix(redis, prefix);
  redis.disconnect();
});

/** A probe answering 503 for `notReadyMs` after its first call, then 200; 0 (no answer) when `silent`. */
function scripted(index: number, notReadyMs: number, silent = false) {
  let firstMs: number | null = null;
  return {
    index,
    async readyStatus() {
      if (silent) return 0;
      firstMs ??= Date.now();
      return Date.now() - firstMs < notReadyMs ? 503 : 200;
    },
  };
}

function figures(over: Partial<PgFleetFigures> = {}): PgFleetFigures {
  return {
    workersAnswering: 4,
    workersNotReady: 4,
    notReadyMsMax: 5_000,
    readyAgainAfterMs: 9_000,
    leases: {
      boundMs: 12_000,
      heldAtStart: 3,
      releasedAfterMs: 400,
      heldMax: 5,
      longestHoldMs: 600,
      longestHoldWallet: 'w1',
      ok: true,
    },
    ...over,
  };
}

describe('PgFleetWatch', () => {
  it('sees each worker not ready, then ready again, and how long a lease stayed held', async () => {
    const key = `${prefix}{wallet:w7}:lock`;
    await redis.set(key, 'worker-123-abc:lease-1', 'PX', 10_000);
    const watch = PgFleetWatch.start(
      [scripted(1, 800), scripted(2, 1_200), scripted(3, 0, true)],
      redis,
      prefix,
      1_000,
    );
    await new Promise((r) => setTimeout(r, 700));
    await redis.del(key);
    const f = await watch.stop();
    expect(f.workersAnswering).toBe(2);
    expect(f.workersNotReady).toBe(2);
    expect(f.notReadyMsMax).toBeGreaterThanOrEqual(800);
    expect(f.readyAgainAfterMs).toBeGreaterThanOrEqual(1_200);
    expect(f.leases.longestHoldWallet).toBe('w7');
    expect(f.leases.longestHoldMs).toBeGreaterThanOrEqual(500);
    expect(f.leases.boundMs).toBe(walletHoldBoundMs(1_000));
    expect(f.leases.ok).toBe(true);
  });
});

describe('pgFleetCheck', () => {
  const failover = (fleet: PgFleetFigures, noPrimaryMs = 8_000) => ({
    id: 1,
    kind: 'pg-failover',
    pg: { noPrimaryMs, fleet },
  });

  it('passes a failover every worker noticed and recovered from', () => {
    expect(pgFleetCheck([failover(figures())]).ok).toBe(true);
  });

  it('fails a failover a worker never said not ready through', () => {
    const r = pgFleetCheck([failover(figures({ workersNotReady: 3 }))]);
    expect(r.ok).toBe(false);
    expect(String(r.counterexamples[0]?.problem)).toContain('1 of 4 workers never said not ready');
  });

  it('does not ask a switchover or a short failover to be noticed', () => {
    const quiet = figures({ workersNotReady: 0, notReadyMsMax: 0 });
    expect(pgFleetCheck([{ ...failover(quiet), kind: 'pg-switchover' }]).ok).toBe(true);
    expect(pgFleetCheck([failover(quiet, NOT_READY_REQUIRED_AFTER_MS - 1)]).ok).toBe(true);
  });

  it('fails workers not ready again, and a lease held past the bound', () => {
    expect(pgFleetCheck([failover(figures({ readyAgainAfterMs: null }))]).ok).toBe(false);
    const held = figures();
    const r = pgFleetCheck([failover({ ...held, leases: { ...held.leases, longestHoldMs: 13_000, ok: false } })]);
    expect(r.ok).toBe(false);
    expect(String(r.counterexamples[0]?.problem)).toContain('held 13000 ms (bound 12000 ms)');
  });
});
