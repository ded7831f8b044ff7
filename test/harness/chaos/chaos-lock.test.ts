// The backend's row of the chaos report (harness/chaos/chaos-lock.ts), from hand-made figures.
import { describe, expect, it } from 'vitest';
import { type LockRowSource, lockBackendLines, lockEnv, lockRow } from '../../../harness/chaos/chaos-lock.ts';

const base: LockRowSource = {
  metrics: { lock_lost: 2, stale_fence: 5 },
  workerLogEvents: { 'lock_lost:not_owner': 3, 'lock_lost:lease_expired': 4, transfer_stale_fence: 5 },
  appliedPerSecond: { mean: 81.25 },
  faults: { list: [] },
};

describe('lockRow', () => {
  it('derives the postgres row from the figures and the lock measures', () => {
    const row = lockRow({
      ...base,
      lockBackend: { backend: 'postgres', longestHoldMs: 2_100, fenceIncrementsBehind: 0, fenceWalletsBehind: 0 },
    });
    expect(row).toEqual({
      backend: 'postgres',
      leasesLost: 7,
      lostBeforeCommit: 2,
      staleRefused: 5,
      fenceLostAtFailovers: null,
      fenceIncrementsBehind: 0,
      fenceWalletsBehind: 0,
      longestHoldMs: 2_100,
      appliedPerSecond: 81.25,
    });
    expect(lockBackendLines(base).join('\n')).toContain('| redis | 7 / 2 | 5 | not measured | — | 81.3 |');
  });

  it("sums a Redis cluster's lossy failovers, and reads a report without lock measures as Redis", () => {
    const lossy = { kind: 'lossy', fenceIncrementsLost: 4 } as const;
    const kill = { kind: 'kill' } as const;
    const row = lockRow({
      ...base,
      faults: { list: [{ failover: lossy }, { failover: kill }, {}, { failover: lossy }] },
    } as unknown as LockRowSource);
    expect(row.backend).toBe('redis');
    expect(row.fenceLostAtFailovers).toBe(8);
    expect(row.longestHoldMs).toBeNull();
  });

  it('tells postgres workers their lock service, and redis workers nothing new', () => {
    expect(lockEnv('redis', 'postgresql://w@127.0.0.1:1/chaos')).toEqual({});
    expect(lockEnv('postgres', 'postgresql://w@127.0.0.1:1/chaos')).toEqual({
      LOCK_BACKEND: 'postgres',
      LOCK_DATABASE_URL: 'postgresql://w@127.0.0.1:1/chaos',
    });
  });
});
