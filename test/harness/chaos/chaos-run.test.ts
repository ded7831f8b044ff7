// A short chaos run as CI runs it on every submission: private Redis and PostgreSQL, four real
// worker processes behind fault proxies, every fault kind once, and every invariant must hold.
import { afterAll, describe, expect, it } from 'vitest';
import { FAULT_KINDS } from '../../../harness/chaos/chaos-options.ts';
import { ChaosCliRun, expectVerdictAsExpected } from './chaos-child.ts';

/** Set-up ~10 s + 30 s of faults + drain (a killed worker's jobs wait out BullMQ's 30 s job lock) + checks. */
const RUN_TIMEOUT_MS = 170_000;

describe('chaos run (short)', () => {
  const run = new ChaosCliRun();
  afterAll(() => run.cleanup(), 60_000);

  it(
    'keeps every invariant under every fault kind',
    async () => {
      const result = await run.run(
        // A fault every 2 s: 11 in the window, so each of the 10 kinds comes once.
        ['--seed', '11', '--duration-s', '30', '--fault-interval-ms', '2000', '--transfers', '1500', '--quiet'],
        RUN_TIMEOUT_MS,
      );
      const { report, context } = expectVerdictAsExpected(result);
      expect(
        report.checks.filter((c) => !c.ok),
        context,
      ).toEqual([]);
      expect(Object.keys(report.faults.byKind).sort()).toEqual([...FAULT_KINDS].sort());
      // Every record applied counts in the ledger's total: the 1500 sent and the credit, limit and
      // wallet streams' transfers, each refused by a limit or a status only.
      expect(report.payments?.byKind.transfer?.applied).toBeGreaterThan(1500);
      const refused = Object.keys(report.payments?.byKind.transfer ?? {}).filter((k) => k !== 'applied');
      // Refused by a limit, or by a status: the wallet stream freezes wallets and closes some
      // (chaos-wallets.ts), and the checker proves each such refusal is what its reason says.
      const allowed = ['insufficient_funds', 'wallet_frozen', 'wallet_closed'];
      expect(refused.filter((reason) => !allowed.includes(reason))).toEqual([]);
      expect(report.payments?.byKind.hold?.applied ?? 0).toBeGreaterThan(0);
      // The blackhole was measured, and its worker's wallets were free within the bound.
      const blackholes = report.faults.list.filter((r) => r.blackhole !== undefined);
      expect(blackholes.length).toBeGreaterThan(0);
      expect(report.checks.some((c) => c.name.startsWith('wallets held by a worker whose database path'))).toBe(true);
      expect(report.jobs.failedValid).toBe(0);
      expect(report.answers.duplicate).toBeGreaterThan(0);
    },
    RUN_TIMEOUT_MS + 10_000,
  );
});
