// The backend's row of the chaos report (harness/chaos/chaos-lock.ts), from hand-made figures.
import { describe, expect, it } from 'vitest';
import { prefixRangeEnd } from '../../../harness/chaos/chaos-etcd.ts';
import {
  type LockRowSource,
  lockBackendLines,
  lockBackendSummary,
  lockEnv,
  lockRow,
} from '../../../harness/chaos/chaos-lock.ts';
import { etcdQuorumCheck } from '../../../harness/chaos/etcd-faults.ts';
import type { FaultRecord } from '../../../harness/chaos/faults.ts';

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

  it('tells etcd workers the proxies in front of the members, and refuses a run without a cluster', () => {
    const endpoints = ['http://127.0.0.1:4001', 'http://127.0.0.1:4002', 'http://127.0.0.1:4003'];
    expect(lockEnv('etcd', 'postgresql://w@127.0.0.1:1/chaos', endpoints)).toEqual({
      LOCK_BACKEND: 'etcd',
      ETCD_ENDPOINTS: endpoints.join(','),
    });
    expect(() => lockEnv('etcd', 'postgresql://w@127.0.0.1:1/chaos')).toThrow(/no etcd cluster/);
  });

  it('derives the etcd row, and sums its cluster faults in the summary', () => {
    const fleet = { workersAnswering: 3, workersNotReady: 3, readyAgainAfterMs: 1_400 };
    const source = {
      ...base,
      lockBackend: { backend: 'etcd', longestHoldMs: 9_300, fenceIncrementsBehind: 0, fenceWalletsBehind: 0 },
      faults: {
        list: [
          { kind: 'etcd-kill-leader', etcd: { members: [0], noLeaderMs: 1_800 } },
          { kind: 'etcd-quorum-loss', etcd: { members: [1, 2], noLeaderMs: 6_100, noQuorumMs: 6_100, fleet } },
          { kind: 'etcd-freeze-member', etcd: { members: [2] } },
          { kind: 'kill-worker' },
        ],
      },
    } as const satisfies LockRowSource;
    expect(lockRow(source)).toMatchObject({ backend: 'etcd', fenceIncrementsBehind: 0, longestHoldMs: 9_300 });
    expect(lockBackendLines(source).join('\n')).toContain(
      '| etcd | 7 / 2 | 5 | 0 behind at the end (0 wallets) | 9300 |',
    );
    const summary = lockBackendSummary(source);
    expect(summary).toContain('  etcd faults: kill-leader 1, quorum-loss 1, freeze-member 1');
    expect(summary).toContain('new leader after 1800 ms');
    expect(summary).toContain('quorum lost: 6100 ms, 3/3 not ready, ready again +1400 ms');
    expect(lockBackendSummary(base)).not.toContain('etcd faults');
  });
});

describe('etcdQuorumCheck', () => {
  const record = (etcd: FaultRecord['etcd'], error: string | null = null): FaultRecord => ({
    id: 4,
    kind: 'etcd-quorum-loss',
    startMs: 0,
    endMs: 6_000,
    worker: null,
    link: null,
    detail: '',
    error,
    ...(etcd === undefined ? {} : { etcd }),
  });
  const ready = { workersAnswering: 3, workersNotReady: 3, readyAgainAfterMs: 900 };

  it('passes when every answering worker said not ready and all came back', () => {
    expect(etcdQuorumCheck([record({ members: [0, 1], noQuorumMs: 5_000, fleet: ready })]).ok).toBe(true);
    // Too short for the probe rounds to notice: not judged on not ready.
    const short = { ...ready, workersNotReady: 0 };
    expect(etcdQuorumCheck([record({ members: [0, 1], noQuorumMs: 1_000, fleet: short })]).ok).toBe(true);
  });

  it('fails a worker that stayed ready without a quorum, one not ready again, and a quorum not back', () => {
    const stayed = etcdQuorumCheck([
      record({ members: [0, 1], noQuorumMs: 5_000, fleet: { ...ready, workersNotReady: 2 } }),
    ]);
    expect(stayed.ok).toBe(false);
    expect(stayed.counterexamples[0]?.problem).toMatch(/1 of 3 never said not ready/);
    const stuck = etcdQuorumCheck([
      record({ members: [0, 1], noQuorumMs: 5_000, fleet: { ...ready, readyAgainAfterMs: null } }),
    ]);
    expect(stuck.ok).toBe(false);
    expect(etcdQuorumCheck([record(undefined, 'an etcd leader: timed out')]).counterexamples[0]?.problem).toMatch(
      /timed out/,
    );
  });
});

describe('prefixRangeEnd', () => {
  it('is the prefix with its last byte raised: every key under the prefix sorts below it', () => {
    expect(prefixRangeEnd('chaos:wallet/').toString()).toBe('chaos:wallet0');
    expect([...prefixRangeEnd('a\xff')]).toEqual([0x61, 0xc3, 0xc0]);
  });
});
