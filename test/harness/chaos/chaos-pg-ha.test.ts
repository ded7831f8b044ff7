// A short chaos run on the HA PostgreSQL formation (a pg_auto_failover monitor, a primary and two
// synchronous standbys behind one endpoint), as CI runs it: the primary is SIGKILLed under load
// and a standby promoted, a switchover follows, every answer a job gave is still in the database
// afterwards, and every invariant holds. Its negative control runs the same faults with the
// commits waiting for no standby and the primary's WAL senders frozen before the kill: the
// failover loses acknowledged decisions, and the checker names them.
import { afterAll, describe, expect, it } from 'vitest';
import { ChaosCliRun, expectVerdictAsExpected } from './chaos-child.ts';

/** Set-up (the formation's three nodes, Redis, four workers) + 30 s of faults + drain + checks, on a loaded machine. */
const RUN_TIMEOUT_MS = 300_000;

/** A short run on the formation: each of `faults` once, one every 4 s. */
function shortHaRun(durationS: number, transfers: number, faults: readonly string[]): string[] {
  return [
    '--postgres',
    'ha',
    '--duration-s',
    String(durationS),
    '--transfers',
    String(transfers),
    '--faults',
    faults.join(','),
    '--faults-max',
    String(faults.length),
    '--fault-interval-ms',
    '4000',
    '--quiet',
  ];
}

const SHORT_HA_RUN = shortHaRun(30, 1500, ['pg-failover', 'pg-switchover']);
/**
 * The negative control's run: one failover is all it needs (the primary killed with its WAL
 * senders frozen loses what it acknowledged since), so one fault, half the window and half the
 * transfers, at the same rate.
 */
const SHORT_HA_CONTROL_RUN = shortHaRun(15, 750, ['pg-failover']);

const ANSWERS_SURVIVED = /^every decision a job answered survived the failovers \((\d+) answers/;

describe('chaos run on the HA PostgreSQL formation (short)', () => {
  const run = new ChaosCliRun();
  afterAll(() => run.cleanup(), 60_000);

  it(
    'rides out a failover and a switchover, and loses no acknowledged answer',
    async () => {
      const result = await run.run(['--seed', '21', ...SHORT_HA_RUN], RUN_TIMEOUT_MS);
      const { report, context } = expectVerdictAsExpected(result);
      expect(
        report.checks.filter((c) => !c.ok),
        context,
      ).toEqual([]);
      const answers = report.checks.find((c) => ANSWERS_SURVIVED.test(c.name));
      expect(answers?.ok, context).toBe(true);
      expect(Number(ANSWERS_SURVIVED.exec(answers?.name ?? '')?.[1]), 'answers checked').toBeGreaterThan(1500);
      const pg = report.faults.list.filter((r) => r.pg !== undefined);
      expect(pg.map((r) => r.kind).sort(), context).toEqual(['pg-failover', 'pg-switchover']);
      for (const r of pg) {
        expect(r.pg?.primaryAfter, r.detail).not.toBe(r.pg?.primaryBefore);
        // Writes did stop, and resumed: the outage was measured from the decisions.
        expect(r.pg?.writeOutageMs ?? 0, r.detail).toBeGreaterThan(0);
        // The workers were seen through it from outside: ready again after, no lease past the bound.
        expect(r.pg?.fleet?.readyAgainAfterMs, r.detail).not.toBeNull();
        expect(r.pg?.fleet?.leases.ok, r.detail).toBe(true);
      }
      // Without a primary for seconds, every worker that answered said not ready.
      const failover = pg.find((r) => r.kind === 'pg-failover');
      expect(failover?.pg?.fleet?.workersNotReady, failover?.detail).toBe(failover?.pg?.fleet?.workersAnswering);
      expect(failover?.pg?.fleet?.workersAnswering ?? 0, failover?.detail).toBeGreaterThan(0);
      // No transfer was given up because the database was away.
      expect(report.jobs.failedValid, context).toBe(0);
      expect(report.faults.errors, context).toBe(0);
    },
    RUN_TIMEOUT_MS + 30_000,
  );

  it(
    'negative control: asynchronous standbys held back lose acknowledged decisions, and the checker names them',
    async () => {
      const result = await run.run(
        ['--seed', '21', ...SHORT_HA_CONTROL_RUN, '--unsafe', 'async-standby'],
        RUN_TIMEOUT_MS,
      );
      const { report, context } = expectVerdictAsExpected(result);
      const answers = report.checks.find((c) => ANSWERS_SURVIVED.test(c.name));
      expect(answers?.ok, context).toBe(false);
      expect(answers?.violations ?? 0, context).toBeGreaterThan(0);
      expect(JSON.stringify(answers?.counterexamples[0]), context).toContain('lost: no record');
    },
    RUN_TIMEOUT_MS + 30_000,
  );
});
