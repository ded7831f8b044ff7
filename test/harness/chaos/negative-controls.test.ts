// The harness must be able to fail: with a safety layer switched off it has to see the damage.
// Short versions of the negative controls of docs/verification/chaos.md, run one after the other.
import { afterAll, describe, expect, it } from 'vitest';
import { ChaosCliRun, expectVerdictAsExpected } from './chaos-child.ts';

/**
 * A control's run takes about 20 s alone (seed 21: 17 s of chaos); under the whole suite's load,
 * with the other chaos files' private services starting beside it, one took more than 120 s.
 */
const CONTROL_TIMEOUT_MS = 240_000;
/** Pauses only (no kills, whose jobs would wait out BullMQ's 30 s job lock), one every 1.2 s. */
const NAIVE_ARGS = [
  '--apply',
  'naive',
  '--duration-s',
  '15',
  '--transfers',
  '1000',
  '--faults',
  'pause-worker',
  '--fault-interval-ms',
  '1200',
  '--quiet',
];

function failedChecks(report: { checks: readonly { name: string; ok: boolean }[] }): string[] {
  return report.checks.filter((c) => !c.ok).map((c) => c.name);
}

describe('negative controls', () => {
  const runs: ChaosCliRun[] = [];
  const fresh = () => {
    const r = new ChaosCliRun();
    runs.push(r);
    return r;
  };
  afterAll(async () => {
    for (const r of runs) await r.cleanup();
  }, 120_000);

  it(
    'catches the double applies when idempotency is off',
    async () => {
      const result = await fresh().run(
        [
          '--seed',
          '21',
          '--unsafe',
          'no-idempotency',
          '--duration-s',
          '10',
          '--transfers',
          '600',
          '--faults',
          'delete-fences,terminate-backends,link-delay,link-cut,delete-locks',
          '--fault-interval-ms',
          '1500',
          '--quiet',
        ],
        CONTROL_TIMEOUT_MS,
      );
      const { report, context } = expectVerdictAsExpected(result);
      const failed = failedChecks(report);
      expect(failed, context).toContain('at most one debit per operation');
      expect(failed).toContain('final balances equal the expected ones (opening ± every applied operation, once)');
    },
    CONTROL_TIMEOUT_MS + 10_000,
  );

  it(
    'catches the lost updates of a naive read-modify-write without the fence',
    async () => {
      const result = await fresh().run(['--seed', '22', '--unsafe', 'no-fencing', ...NAIVE_ARGS], CONTROL_TIMEOUT_MS);
      const { report, context } = expectVerdictAsExpected(result);
      expect(failedChecks(report), context).toContain('every wallet balance equals the sum of its entries');
    },
    CONTROL_TIMEOUT_MS + 10_000,
  );

  it(
    'keeps every invariant with the same naive read-modify-write behind the fence',
    async () => {
      const result = await fresh().run(['--seed', '22', ...NAIVE_ARGS], CONTROL_TIMEOUT_MS);
      const { report, context } = expectVerdictAsExpected(result);
      expect(failedChecks(report), context).toEqual([]);
      // The freezes did bite: the database refused stale holders.
      expect(report.metrics.stale_fence ?? 0).toBeGreaterThan(0);
    },
    CONTROL_TIMEOUT_MS + 10_000,
  );
});
