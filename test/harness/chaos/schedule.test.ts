// The fault schedule is a pure function of the seed and the options: the same seed gives the
// same faults at the same offsets against the same targets; another seed gives another one.

import { describe, expect, it } from 'vitest';
import {
  chaosOptions,
  ETCD_CHAOS_LOCK_TTL_MS,
  ETCD_LOCK_FAULT_KINDS,
  FAULT_KINDS,
  parseChaosArgs,
} from '../../../harness/chaos/chaos-options.ts';
import { buildWorkload } from '../../../harness/chaos/chaos-workload.ts';
import {
  BLACKHOLE_PAST_BOUND_MS_MAX,
  BLACKHOLE_PAST_BOUND_MS_MIN,
  walletHoldBoundMs,
} from '../../../harness/chaos/pg-blackhole.ts';
import {
  buildSchedule,
  describeFault,
  ETCD_DELETE_LOCKS_MS_MAX,
  ETCD_DELETE_LOCKS_MS_MIN,
  ETCD_MEMBER_DOWN_MS_MAX,
  ETCD_MEMBER_DOWN_MS_MIN,
  ETCD_QUORUM_LOSS_MS_MAX,
  ETCD_QUORUM_LOSS_MS_MIN,
  etcdQuorumLossKills,
  scheduledFaultCount,
} from '../../../harness/chaos/schedule.ts';
import { OPERATION_KINDS } from '../../../src/ledger/transfer-request.ts';

describe('buildSchedule', () => {
  it('gives the same schedule for the same seed', () => {
    const options = chaosOptions();
    const first = buildSchedule(1, options);
    const second = buildSchedule(1, chaosOptions());
    expect(first.length).toBeGreaterThan(0);
    expect(second).toEqual(first);
    expect(JSON.stringify(second)).toBe(JSON.stringify(first));
  });

  it('gives different schedules for different seeds', () => {
    const options = chaosOptions();
    const schedules = [1, 2, 3, 4, 5].map((seed) => JSON.stringify(buildSchedule(seed, options)));
    expect(new Set(schedules).size).toBe(schedules.length);
  });

  it('does not depend on how the fault list was written', () => {
    const a = parseChaosArgs(['--faults', 'link-cut,kill-worker', '--seed', '7']).options;
    const b = parseChaosArgs(['--faults', 'kill-worker,link-cut,kill-worker', '--seed', '7']).options;
    expect(buildSchedule(7, a)).toEqual(buildSchedule(7, b));
  });

  it('injects every enabled kind when there are enough faults, inside the fault phase', () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
      const options = chaosOptions({ seed });
      const schedule = buildSchedule(seed, options);
      expect(schedule.length).toBe(scheduledFaultCount(options));
      expect(new Set(schedule.map((e) => e.kind))).toEqual(new Set(FAULT_KINDS));
      for (const e of schedule) {
        expect(e.atMs).toBeGreaterThan(0);
        expect(e.atMs).toBeLessThan(options.durationS * 1000);
      }
      expect(schedule.map((e) => e.atMs)).toEqual([...schedule.map((e) => e.atMs)].sort((x, y) => x - y));
    }
  });

  it('freezes a worker for 2 to 5 lock TTLs and never takes the whole fleet down', () => {
    const options = chaosOptions({ durationS: 600, faultIntervalMs: 300 });
    const schedule = buildSchedule(3, options);
    const down = schedule.filter((e) => e.kind === 'kill-worker' || e.kind === 'pause-worker');
    for (const e of down.filter((x) => x.kind === 'pause-worker')) {
      expect(e.durationMs).toBeGreaterThanOrEqual(2 * options.lockTtlMs);
      expect(e.durationMs).toBeLessThanOrEqual(5 * options.lockTtlMs);
    }
    for (const e of down) {
      const overlapping = down.filter((x) => x.atMs <= e.atMs && x.atMs + x.durationMs > e.atMs);
      expect(overlapping.length).toBeLessThanOrEqual(options.workers - 1);
      expect(new Set(overlapping.map((x) => x.worker)).size).toBe(overlapping.length);
    }
  });

  it("blackholes a worker's PostgreSQL link for longer than the bound on the wallets it holds", () => {
    const options = chaosOptions({ faults: ['pg-blackhole'], durationS: 600, faultIntervalMs: 5_000 });
    const schedule = buildSchedule(2, options);
    expect(schedule.length).toBeGreaterThan(10);
    const boundMs = walletHoldBoundMs(options.lockTtlMs);
    // The default statement timeout (5 s), its 1 s margin, the 5 s connection wait, one TTL.
    expect(boundMs).toBe(12_000);
    for (const e of schedule) {
      expect(e).toMatchObject({ kind: 'pg-blackhole', link: 'postgres' });
      expect(e.durationMs).toBeGreaterThanOrEqual(boundMs + BLACKHOLE_PAST_BOUND_MS_MIN);
      expect(e.durationMs).toBeLessThanOrEqual(boundMs + BLACKHOLE_PAST_BOUND_MS_MAX);
    }
    for (const seed of [1, 2, 3]) {
      expect(buildSchedule(seed, chaosOptions({ seed })).some((e) => e.kind === 'pg-blackhole')).toBe(true);
    }
  });

  it('an intake run always holds a lossy failover aimed at a queue shard, and kills relays one at a time', () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
      const options = parseChaosArgs(['--seed', String(seed), '--redis', 'cluster', '--intake']).options;
      expect(options.faults).toContain('kill-relay');
      const schedule = buildSchedule(seed, options);
      const onQueue = schedule.filter((e) => e.onQueue === true);
      expect(onQueue).toHaveLength(1);
      expect(onQueue[0]?.kind).toBe('failover-lossy');
      for (const e of schedule.filter((x) => x.kind === 'kill-relay')) {
        expect(e.relay).toBeGreaterThanOrEqual(1);
        expect(e.relay).toBeLessThanOrEqual(options.relays);
      }
      // Even when the schedule is too short to hold every kind.
      const few = buildSchedule(seed, { ...options, faultsMax: 2 });
      expect(few.some((e) => e.kind === 'failover-lossy' && e.onQueue === true)).toBe(true);
      // The schedule of a run without --intake is what it was.
      const plain = parseChaosArgs(['--seed', String(seed), '--redis', 'cluster']).options;
      expect(buildSchedule(seed, plain).some((e) => e.onQueue !== undefined || e.kind === 'kill-relay')).toBe(false);
    }
    const direct = parseChaosArgs(['--seed', '1', '--redis', 'cluster', '--unsafe', 'direct-enqueue']).options;
    expect(direct).toMatchObject({ intake: true, relays: 0, unsafe: 'direct-enqueue' });
    expect(direct.faults).not.toContain('kill-relay');
    expect(() => parseChaosArgs(['--unsafe', 'direct-enqueue'])).toThrow(/--redis cluster/);
    expect(() => parseChaosArgs(['--faults', 'kill-relay'])).toThrow(/--intake/);
  });

  it('a run on the PostgreSQL lock service always terminates its lock sessions, and has no Redis lock faults', () => {
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
      const options = parseChaosArgs(['--seed', String(seed), '--lock', 'postgres']).options;
      expect(options.lock).toBe('postgres');
      expect(options.faults).toContain('terminate-lock-sessions');
      expect(options.faults).not.toContain('delete-locks');
      expect(options.faults).not.toContain('delete-fences');
      const schedule = buildSchedule(seed, options);
      expect(new Set(schedule.map((e) => e.kind))).toEqual(new Set(options.faults));
      for (const e of schedule.filter((x) => x.kind === 'terminate-lock-sessions')) {
        expect(e.durationMs).toBe(0);
        expect(e.target).toBeGreaterThanOrEqual(0);
      }
      // Even when the schedule is too short to hold every kind.
      for (const faultsMax of [1, 2, 4]) {
        const few = buildSchedule(seed, { ...options, faultsMax });
        expect(few.filter((e) => e.kind === 'terminate-lock-sessions').length).toBeGreaterThanOrEqual(1);
      }
    }
    // Redis stays the default, with the schedule it had.
    const plain = parseChaosArgs(['--seed', '1']).options;
    expect(plain.lock).toBe('redis');
    expect(plain.faults).toEqual([...FAULT_KINDS]);
    expect(buildSchedule(1, plain)).toEqual(buildSchedule(1, chaosOptions()));
    expect(() => parseChaosArgs(['--faults', 'terminate-lock-sessions'])).toThrow(/--lock postgres/);
    expect(() => parseChaosArgs(['--lock', 'postgres', '--faults', 'delete-fences'])).toThrow(/Redis lock/);
    expect(() => parseChaosArgs(['--lock', 'postgres', '--pgbouncer'])).toThrow(/PostgreSQL itself/);
    expect(() => parseChaosArgs(['--lock', 'zookeeper'])).toThrow(/--lock must be one of/);
  });

  it('a run on etcd holds faults of its cluster, every kind over seeds 1-5, and no Redis lock faults', () => {
    const etcdKinds: readonly string[] = ETCD_LOCK_FAULT_KINDS;
    const seen = new Set<string>();
    const quorumLosses = new Set<boolean>();
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
      const options = parseChaosArgs(['--seed', String(seed), '--lock', 'etcd']).options;
      expect(options.lock).toBe('etcd');
      expect(options.lockTtlMs).toBe(ETCD_CHAOS_LOCK_TTL_MS);
      expect(options.faults).toEqual(expect.arrayContaining([...ETCD_LOCK_FAULT_KINDS]));
      expect(options.faults).not.toContain('delete-locks');
      expect(options.faults).not.toContain('delete-fences');
      expect(options.faults).not.toContain('terminate-lock-sessions');
      const schedule = buildSchedule(seed, options);
      expect(schedule.some((e) => etcdKinds.includes(e.kind))).toBe(true);
      for (const e of schedule.filter((x) => etcdKinds.includes(x.kind))) {
        if (seed <= 5) seen.add(e.kind);
        const [min, max] =
          e.kind === 'etcd-quorum-loss'
            ? [ETCD_QUORUM_LOSS_MS_MIN, ETCD_QUORUM_LOSS_MS_MAX]
            : e.kind === 'etcd-delete-locks'
              ? [ETCD_DELETE_LOCKS_MS_MIN, ETCD_DELETE_LOCKS_MS_MAX]
              : [ETCD_MEMBER_DOWN_MS_MIN, ETCD_MEMBER_DOWN_MS_MAX];
        expect(e.durationMs).toBeGreaterThanOrEqual(min);
        expect(e.durationMs).toBeLessThanOrEqual(max);
        if (e.kind !== 'etcd-delete-locks') expect(e.target).toBeGreaterThanOrEqual(0);
        expect(describeFault(e)).toMatch(/^etcd-/);
        if (e.kind === 'etcd-quorum-loss' && seed <= 5) quorumLosses.add(etcdQuorumLossKills(e.target));
      }
      // Even when the schedule is too short to hold every kind.
      for (const faultsMax of [1, 2, 4]) {
        const few = buildSchedule(seed, { ...options, faultsMax });
        expect(few.some((e) => etcdKinds.includes(e.kind))).toBe(true);
      }
    }
    expect([...seen].sort()).toEqual([...ETCD_LOCK_FAULT_KINDS].sort());
    // Quorum lost both ways over seeds 1-5: members killed, members frozen.
    expect(quorumLosses).toEqual(new Set([true, false]));
    // The negative control's schedule freezes a worker past the TTL beside the etcd faults.
    const control = parseChaosArgs(['--seed', '1', '--lock', 'etcd', '--apply', 'naive', '--unsafe', 'no-fencing']);
    const kinds = buildSchedule(1, control.options).map((e) => e.kind);
    expect(kinds).toContain('pause-worker');
    expect(kinds.some((k) => etcdKinds.includes(k))).toBe(true);
    // Redis and postgres schedules are what they were.
    expect(buildSchedule(1, parseChaosArgs(['--seed', '1']).options)).toEqual(buildSchedule(1, chaosOptions()));
  });

  it('refuses etcd faults without --lock etcd, and an etcd TTL under its minimum', () => {
    expect(() => parseChaosArgs(['--faults', 'etcd-quorum-loss'])).toThrow(/--lock etcd/);
    expect(() => parseChaosArgs(['--lock', 'postgres', '--faults', 'etcd-kill-leader'])).toThrow(/--lock etcd/);
    expect(() => parseChaosArgs(['--lock', 'etcd', '--faults', 'terminate-lock-sessions'])).toThrow(/--lock postgres/);
    expect(() => parseChaosArgs(['--lock', 'etcd', '--faults', 'delete-locks'])).toThrow(/Redis lock/);
    expect(() => parseChaosArgs(['--lock', 'etcd', '--lock-ttl-ms', '1000'])).toThrow(/--lock-ttl-ms/);
    const options = parseChaosArgs([
      '--lock',
      'etcd',
      '--lock-ttl-ms',
      '3000',
      '--faults',
      'etcd-freeze-member',
    ]).options;
    expect(options.lockTtlMs).toBe(3_000);
    expect(options.faults).toEqual(['etcd-freeze-member']);
    expect(parseChaosArgs(['--lock', 'postgres']).options.lockTtlMs).toBe(1_000);
  });

  it('holds only the kinds asked for, and none with --faults none', () => {
    const options = chaosOptions({ faults: ['pause-worker'], workers: 2, faultIntervalMs: 500 });
    expect(new Set(buildSchedule(1, options).map((e) => e.kind))).toEqual(new Set(['pause-worker']));
    expect(buildSchedule(1, chaosOptions({ faults: [] }))).toEqual([]);
    expect(buildSchedule(1, chaosOptions({ faultsMax: 3 }))).toHaveLength(3);
  });
});

describe('buildWorkload', () => {
  it('is reproducible and makes every valid transfer affordable', () => {
    const options = chaosOptions({ transfers: 500, invalid: 30 });
    const a = buildWorkload(options);
    expect(JSON.stringify(buildWorkload(options).messages)).toBe(JSON.stringify(a.messages));
    expect(a.messages.filter((m) => m.kind === 'invalid')).toHaveLength(30);
    expect(a.messages.filter((m) => m.kind === 'duplicate')).toHaveLength(100);
    const outflow = new Map<string, bigint>();
    for (const op of a.operations.values()) {
      // A credit wallet's or a limit wallet's transfers are meant to meet its limit.
      if (op.kind !== 'transfer' || a.credit.openingLimits.has(op.from)) continue;
      // biome-ignore lint/complexity/useMathMinMax: the amounts are bigints, which Math.max does not take
      const largest = [...op.variants.values()].reduce((x, y) => (y > x ? y : x));
      outflow.set(op.from, (outflow.get(op.from) ?? 0n) + largest);
    }
    for (const total of outflow.values()) expect(total).toBeLessThanOrEqual(a.openingBalanceMinor);
  });

  it('mixes every payment kind by default, and none with --payments off', () => {
    const a = buildWorkload(chaosOptions({ transfers: 2_000 }));
    const kinds = new Set([...a.operations.values()].map((op) => op.kind));
    // Every kind: the payments', the credit stream's and the wallet stream's (chaos-wallets.ts).
    expect(kinds).toEqual(new Set(OPERATION_KINDS));
    const off = buildWorkload(chaosOptions({ transfers: 2_000, payments: false }));
    expect([...off.operations.values()].every((op) => op.kind === 'transfer')).toBe(true);
    expect(off.credit.creditWallets).toEqual([]);
    // The transfers are the same messages either way.
    const transfers = (w: typeof a) =>
      JSON.stringify(w.messages.filter((m) => m.kind !== 'payment').map((m) => m.data));
    expect(transfers(a)).toBe(transfers(off));
    expect(() => parseChaosArgs(['--payments', 'off', '--unsafe', 'double-capture'])).toThrow(/--payments on/);
  });

  it('sends each credit wallet more debits of its one amount than its limit covers, and limit changes', () => {
    const a = buildWorkload(chaosOptions({ transfers: 2_000 }));
    expect(a.credit.creditWallets.length).toBeGreaterThan(0);
    for (const c of a.credit.creditWallets) {
      const debits = [...a.operations.values()].filter((op) => op.from === c.id);
      expect(debits).toHaveLength(c.debits);
      expect(BigInt(c.debits) * c.debitMinor).toBeGreaterThan(c.creditLimitMinor);
      for (const op of debits) expect(op.kind === 'transfer' || op.kind === 'split').toBe(true);
    }
    const limits = [...a.operations.values()].filter((op) => op.kind === 'credit_limit');
    expect(new Set(limits.map((op) => op.from.replace(/\d+$/, '')))).toEqual(new Set(['lw', 'w']));
  });

  it('keeps senders and receivers apart for the naive apply', () => {
    const w = buildWorkload(chaosOptions({ transfers: 300, apply: 'naive' }));
    expect(w.sinkWallets.size).toBeGreaterThan(0);
    for (const op of w.operations.values()) {
      expect(w.sinkWallets.has(op.from)).toBe(false);
      expect(w.sinkWallets.has(op.to)).toBe(true);
    }
  });
});
