// `--lock`: the cases of LOCK_MODES run once per lock service. Each gets its own summary and
// table row; every service but Redis is set against Redis run by run (so a slow run of the
// machine falls on both sides of a ratio); the ratios between cases keep reading Redis's.
import { describe, expect, it } from 'vitest';
import type { CaseName } from '../../../harness/bench/bench-options.ts';
import { formatCpuTable, formatLockTable, formatTable } from '../../../harness/bench/bench-table.ts';
import type { CaseRunResult } from '../../../harness/bench/case-result.ts';
import { lockRatios, ratios, summarize, systemMsPerTransfer } from '../../../harness/bench/summary.ts';
import type { LockBackendName } from '../../../src/lock/lock-service.ts';

/** One run's result: CPU ms per transfer of the workers, Redis, etcd and the machine. */
function result(
  name: CaseName,
  lock: LockBackendName | undefined,
  run: number,
  perS: number,
  cpu: { processes: number; redis: number; etcd: number | null; machine: number } | null,
): CaseRunResult {
  return {
    case: name,
    ...(lock === undefined ? {} : { lock }),
    run,
    throughputPerS: perS,
    processes: [],
    latencyMs: { enqueueToCommit: null, enqueueToAnswer: null, activeToCommit: null, call: null },
    cpu:
      cpu === null
        ? null
        : {
            windowMs: 1_000,
            transfers: 100,
            msPerTransfer: { relays: null, postgres: 0.5 * run, bench: 0.1, other: 0.1, ...cpu },
            machineCores: 1.5,
          },
    verification: { ok: true },
    notes: {},
  } as unknown as CaseRunResult;
}

// Run 2 on a machine twice as slow: both services slow down together, and their ratio holds.
const runs = [
  result('db-ceiling', undefined, 1, 8_000, null),
  result('e2e', 'redis', 1, 4_000, { processes: 1, redis: 0.3, etcd: null, machine: 2 }),
  result('e2e', 'etcd', 1, 2_000, { processes: 1.2, redis: 0.2, etcd: 0.8, machine: 3 }),
  result('e2e', 'postgres', 1, 3_000, { processes: 1, redis: 0.1, etcd: null, machine: 2.5 }),
  result('e2e', 'redis', 2, 2_000, { processes: 2, redis: 0.6, etcd: null, machine: 4 }),
  result('e2e', 'etcd', 2, 1_000, { processes: 2.4, redis: 0.4, etcd: 1.6, machine: 6 }),
  result('e2e', 'postgres', 2, 1_500, { processes: 2, redis: 0.2, etcd: null, machine: 5 }),
];

describe('lock services side by side', () => {
  it('sets each service against Redis in the same run, then takes the median', () => {
    const { lockToRedisRatios, e2eToRedisRatio } = lockRatios(runs);
    expect(lockToRedisRatios.map((r) => r.lock)).toEqual(['etcd', 'postgres']);
    // System CPU: redis 1 + 0.5 + 0.3 = 1.8, etcd 1.2 + 0.5 + 0.2 + 0.8 = 2.7 (run 1; run 2 twice both).
    expect(e2eToRedisRatio?.etcd).toEqual({
      case: 'e2e',
      lock: 'etcd',
      throughputRatio: 0.5,
      machineCpuRatio: 1.5,
      systemCpuRatio: 1.5,
    });
    expect(e2eToRedisRatio?.postgres).toMatchObject({ throughputRatio: 0.75, machineCpuRatio: 1.25 });
    expect(systemMsPerTransfer(runs[2]?.cpu ?? null)).toBe(2.7);
  });

  it('has no ratio to Redis without a Redis case, and none when Redis ran alone', () => {
    expect(lockRatios(runs.filter((r) => r.lock !== 'redis')).e2eToRedisRatio).toBeNull();
    const alone = lockRatios(runs.filter((r) => r.lock !== 'etcd' && r.lock !== 'postgres'));
    expect(alone).toEqual({ lockToRedisRatios: [], e2eToRedisRatio: null });
  });

  it('summarizes each service apart, and the ratios between cases read the Redis one', () => {
    const summaries = summarize(runs, ['db-ceiling', 'e2e']);
    expect(summaries.map((s) => [s.case, s.lock])).toEqual([
      ['db-ceiling', undefined],
      ['e2e', 'redis'],
      ['e2e', 'etcd'],
      ['e2e', 'postgres'],
    ]);
    expect(summaries[2]?.cpuMsPerTransfer?.etcd).toBe(1.2);
    expect(ratios(summaries, runs).e2eToDbCeilingRatio).toBe(0.375);
  });

  it('labels the rows with their service only when there is more than Redis', () => {
    const summaries = summarize(runs, ['db-ceiling', 'e2e']);
    const r = ratios(summaries, runs);
    expect(formatTable(summaries, r, 2).split('\n')[0]).toMatch(/^\| case \| lock \| transfers\/s/);
    expect(formatCpuTable(summaries)?.split('\n')[0]).toMatch(/\| lock \|.*\| redis \| etcd \| bench \|/);
    const lockTable = formatLockTable(summaries, r) ?? '';
    expect(lockTable).toContain('| e2e | etcd | 1,500 | 0.500 | 4.500 | 1.500 | 4.050 | 1.500 |');
    expect(lockTable).toContain('| e2e | redis | 3,000 | 1.000 |');

    const redisOnly = runs.filter((x) => x.lock === undefined || x.lock === 'redis');
    const before = summarize(redisOnly, ['db-ceiling', 'e2e']);
    expect(formatTable(before, ratios(before, redisOnly), 2).split('\n')[0]).toMatch(/^\| case \| transfers\/s/);
    expect(formatCpuTable(before)?.split('\n')[0]).not.toMatch(/lock|etcd/);
    expect(formatLockTable(before, ratios(before, redisOnly))).toBeNull();
  });
});
