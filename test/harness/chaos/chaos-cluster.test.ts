// A short chaos run on a private Redis Cluster (3 masters, 1 replica each), as CI runs it: the
// two failovers happen for real, the lossy one loses fence increments (the report says how
// many), every fault meets transfers in flight, and every invariant holds.
import { afterAll, describe, expect, it } from 'vitest';
import { ChaosCliRun, expectVerdictAsExpected } from './chaos-child.ts';

/** Set-up (six redis-server, PostgreSQL, four workers) + 30 s of faults + drain + checks, on a loaded machine. */
const RUN_TIMEOUT_MS = 300_000;

describe('chaos run on Redis Cluster (short)', () => {
  const run = new ChaosCliRun();
  afterAll(() => run.cleanup(), 60_000);

  it(
    'survives a lossy failover and a killed master with every invariant holding',
    async () => {
      const result = await run.run(
        [
          '--seed',
          '12',
          '--redis',
          'cluster',
          '--duration-s',
          '30',
          '--transfers',
          '1500',
          '--faults',
          'failover-lossy,kill-master,pause-worker,delete-locks',
          '--fault-interval-ms',
          '4000',
          '--quiet',
        ],
        RUN_TIMEOUT_MS,
      );
      const { report, context } = expectVerdictAsExpected(result);
      expect(
        report.checks.filter((c) => !c.ok),
        context,
      ).toEqual([]);
      // Every record applied counts in the ledger's total: the 1500 sent and the credit, limit and
      // wallet streams' transfers, each refused by a limit or a status only.
      expect(report.payments?.byKind.transfer?.applied).toBeGreaterThan(1500);
      const refused = Object.keys(report.payments?.byKind.transfer ?? {}).filter((k) => k !== 'applied');
      // Refused by a limit, or by a status: the wallet stream freezes wallets and closes some
      // (chaos-wallets.ts), and the checker proves each such refusal is what its reason says.
      const allowed = ['insufficient_funds', 'wallet_frozen', 'wallet_closed'];
      expect(refused.filter((reason) => !allowed.includes(reason))).toEqual([]);
      expect(report.payments?.byKind.hold?.applied ?? 0).toBeGreaterThan(0);

      const lossy = report.faults.list.filter((r) => r.failover?.kind === 'lossy');
      const killed = report.faults.list.filter((r) => r.failover?.kind === 'kill');
      expect(lossy.length, context).toBeGreaterThanOrEqual(1);
      expect(killed.length, context).toBeGreaterThanOrEqual(1);
      for (const r of lossy) {
        if (r.failover?.kind !== 'lossy') continue;
        // The replica really fell behind, and the new master really lacked increments.
        expect(r.failover.replicationLagBytes, r.detail).toBeGreaterThan(0);
        expect(r.failover.fenceIncrementsLost, r.detail).toBeGreaterThan(0);
      }
      expect(report.faults.idle, context).toBe(0);
      expect(report.faults.errors, context).toBe(0);
    },
    RUN_TIMEOUT_MS + 30_000,
  );
});
