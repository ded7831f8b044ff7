// `npm run bench -- --quick` as CI runs it: the real CLI as a child process, every mode once on
// small sizes against the configured Redis and PostgreSQL. Checks that it works, that every
// transfer of every case ended applied with the invariants holding, that the results file has
// every field the issue names (the intake cases' too: every request decided, one feed event each;
// e2e-payments' three parts and their ratios to e2e), and that it left no database, queue or key behind. No speed is
// asserted: the figures of a quick run on a shared machine mean nothing. Then `--lock` on the
// smallest sizes: e2e once per lock service, every case verified and labelled, each service set
// against Redis, and nothing left behind (databases, the etcd cluster).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { BENCH_DEFAULTS, CASES, PAYMENT_PARTS } from '../../../harness/bench/bench-options.ts';
import type { BenchReport } from '../../../harness/bench/run-bench.ts';
import { loadConfig, withDatabase } from '../../../src/config/config.ts';
import { bullmqConnection } from '../../../src/queue/redis-connection.ts';
import { describeRun, runCommand } from '../../support/cli-process.ts';

/** About 15 s alone on the 2-core machine: three e2e cases of 100 transfers and a 3-member etcd cluster. */
const LOCK_BENCH_TIMEOUT_MS = 180_000;

/** About 60 s alone on the 2-core machine before e2e-payments (three more worker fleets); more while other test files run beside it. */
const BENCH_TIMEOUT_MS = 360_000;

const RATIO_FIELDS = [
  'e2eToDbCeilingRatio',
  'e2eToFasterCeilingRatio',
  'e2eUnbatchedToDbCeilingRatio',
  'e2eToSeedDesignRatio',
  'e2eToPeerRatio',
  'hotToUniformRatio',
  'lowRateBatchingAddedP50Ms',
  'e2eIntake1ToE2eRatio',
  'e2eIntake100ToE2eRatio',
  'e2eTracedToE2eRatio',
  'intake1ExtraPostgresMsPerTransfer',
  'intake100ExtraPostgresMsPerTransfer',
  'paymentsPerS',
  'paymentsToE2eRatio',
  'splitsToE2eRatio',
] as const;
const INTAKE_CASES = ['e2e-intake-1', 'e2e-intake-100'];
const PROCESS_CASES = [
  'queue-ceiling',
  'e2e',
  ...PAYMENT_PARTS,
  'e2e-intake-1',
  'e2e-intake-100',
  'e2e-unbatched',
  'e2e-traced',
  'peer-graphile-worker',
  'hot',
  'low-rate',
  'low-rate-unbatched',
];

describe('npm run bench -- --quick', () => {
  const out = mkdtempSync(join(tmpdir(), 'bench-test-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it(
    'runs every mode, verifies every case and writes the results with every field',
    async () => {
      const result = await runCommand(
        'npm',
        ['run', '--silent', 'bench', '--', '--quick', '--out', out],
        {},
        BENCH_TIMEOUT_MS,
      );
      const context = describeRun(result);
      expect(result.code, context).toBe(0);

      const files = readdirSync(out);
      const jsonFile = files.find((f) => f.endsWith('.json'));
      expect(jsonFile, context).toBeDefined();
      expect(
        files.filter((f) => f.endsWith('.svg')),
        context,
      ).toHaveLength(1);
      const report = JSON.parse(readFileSync(join(out, jsonFile as string), 'utf8')) as BenchReport;

      expect(report.ok, report.failure ?? '').toBe(true);
      for (const field of RATIO_FIELDS) expect(typeof report[field], field).toBe('number');
      expect(typeof report.e2ePeakRssMbPerWorker).toBe('number');
      expect(report.machine.cores).toBeGreaterThan(0);
      expect(report.machine.memoryGiB).toBeGreaterThan(0);
      expect(report.machine.cpuModel).not.toBe('');
      // The round-trip probes ran at both ends (their size is the machine's, not asserted).
      expect(report.machine.redisRoundTripUsStart).toBeGreaterThan(0);
      expect(report.machine.redisRoundTripUsEnd).toBeGreaterThan(0);
      for (const key of ['node', 'postgres', 'redis', 'bullmq', 'graphileWorker', 'projectCommit'] as const) {
        expect(typeof report.versions?.[key], key).toBe('string');
      }
      expect(report.parameters).toMatchObject({
        workers: BENCH_DEFAULTS.workers,
        concurrency: BENCH_DEFAULTS.concurrency,
        runs: 1,
        quick: true,
      });

      // Every case ran once, every transfer ended applied, the ledger reconciled.
      expect(report.runs.map((r) => r.case)).toEqual([...CASES]);
      for (const run of report.runs) {
        const v = run.verification;
        expect(v.ok, `${run.case}: ${v.problems.join('; ')}`).toBe(true);
        expect(v.applied, run.case).toBe(v.expected);
        expect(v.expected, run.case).toBeGreaterThan(0);
        if (run.case !== 'queue-ceiling') expect(v.invariantsHeld, run.case).toBe(true);
        if (PROCESS_CASES.includes(run.case)) {
          expect(run.processes, run.case).toHaveLength(BENCH_DEFAULTS.workers);
          for (const p of run.processes) expect(p.peakRssMb, run.case).toBeGreaterThan(0);
        }
      }
      // The paced cases measure latency on every paced transfer.
      for (const name of ['low-rate', 'low-rate-unbatched']) {
        const low = report.runs.find((r) => r.case === name);
        expect(low?.transfers, name).toBeGreaterThan(0);
        expect(low?.latencyMs.enqueueToCommit?.n, name).toBe(low?.transfers);
      }
      // The intake cases: every request decided with one feed event, and the producer phase accounted.
      for (const name of INTAKE_CASES) {
        const intake = report.runs.find((r) => r.case === name);
        expect(intake?.notes.feedEvents, name).toBe(intake?.verification.expected);
        expect(intake?.producerCpu?.msPerTransfer.postgres, name).toBeGreaterThan(0);
        expect(intake?.latencyMs.enqueueToCommit?.n, name).toBe(intake?.transfers);
      }
      expect(result.stdout).toContain('| intake case | producer phase CPU ms per request: postgres |');
      // e2e-payments: each part as many operations as e2e has transfers, all applied (and verified
      // as held, captured and split); a payment's rate and, where both have an account, its cost.
      for (const name of PAYMENT_PARTS) {
        const part = report.runs.find((r) => r.case === name);
        expect(part?.transfers, name).toBe(report.parameters.transfers);
        expect(part?.latencyMs.enqueueToCommit?.n, name).toBe(part?.transfers);
      }
      const capture = report.runs.find((r) => r.case === 'e2e-payments-capture');
      expect(capture?.notes.paymentsPerS).toBe(report.paymentsPerS);
      const e2eRun = report.runs.find((r) => r.case === 'e2e');
      if (e2eRun?.cpu && capture?.cpu && report.runs.find((r) => r.case === 'e2e-payments-hold')?.cpu) {
        expect(report.paymentCostToTransferRatio).toBeGreaterThan(0);
      }
      expect(result.stdout).toContain('| e2e-payments | operations/s | payments/s |');
      // The paired case ran both functions, each in at least one block, and gave their ratio.
      const paired = report.runs.find((r) => r.case === 'db-ceiling-paired');
      expect(paired?.notes.blocks).toBeGreaterThanOrEqual(2);
      expect(paired?.notes.todayToFirstRatio).toBeGreaterThan(0);
      expect(report.singleToFirstPairedRatio).toBe(paired?.notes.todayToFirstRatio);
      expect(report.summary.map((s) => s.case)).toEqual([...CASES]);
      expect(result.stdout).toContain('| e2e |');

      // The CPU account: the two cases of the unbatched ratio always have one (both servers are
      // local here), the paced cases never; every account splits a busy machine into its parts.
      for (const name of ['db-ceiling', 'e2e-unbatched'])
        expect(report.runs.find((r) => r.case === name)?.cpu, name).not.toBeNull();
      for (const run of report.runs) {
        if (run.case === 'low-rate' || run.case === 'low-rate-unbatched') {
          expect(run.cpu, run.case).toBeNull();
          continue;
        }
        if (run.cpu === null) continue;
        const c = run.cpu.msPerTransfer;
        expect(run.cpu.transfers, run.case).toBeGreaterThan(0);
        expect(c.machine, run.case).toBeGreaterThan(0);
        if (run.case !== 'queue-ceiling') expect(c.postgres, run.case).toBeGreaterThan(0);
        if (PROCESS_CASES.includes(run.case)) expect(c.processes, run.case).toBeGreaterThan(0);
        else expect(c.processes, run.case).toBeNull();
        if (INTAKE_CASES.includes(run.case)) expect(c.relays, run.case).toBeGreaterThan(0);
        else expect(c.relays, run.case).toBeNull();
      }
      expect(result.stdout).toContain('| case | CPU ms per transfer: processes |');

      // Nothing left behind on the shared servers under this run's names.
      const runId = /bench (\w+):/.exec(result.stderr)?.[1];
      expect(runId, context).toBeDefined();
      const config = loadConfig();
      const admin = new pg.Client({ connectionString: withDatabase(config.databaseUrl, 'postgres') });
      await admin.connect();
      try {
        const dbs = await admin.query('SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [
          `bench_${runId}`,
        ]);
        expect(dbs.rows).toEqual([]);
      } finally {
        await admin.end();
      }
      const redis = bullmqConnection(config);
      try {
        const left: string[] = [];
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `*${runId}*`, 'COUNT', 10_000);
          cursor = next;
          left.push(...keys);
        } while (cursor !== '0');
        expect(left).toEqual([]);
      } finally {
        redis.disconnect();
      }
    },
    BENCH_TIMEOUT_MS + 30_000,
  );
});

/** Processes whose command line names a folder of the bench's etcd cluster (`etcd-bench-…`). */
function benchEtcdProcesses(): string[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`${tmpdir()}/etcd-bench-`);
      } catch {
        return false;
      }
    });
}

describe('npm run bench -- --lock redis,etcd,postgres', () => {
  const out = mkdtempSync(join(tmpdir(), 'bench-lock-test-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it(
    'runs e2e once per lock service, verified and labelled, and sets each against Redis',
    async () => {
      const argv = ['--quick', '--modes', 'e2e', '--transfers', '100', '--lock', 'redis,etcd,postgres', '--out', out];
      const result = await runCommand('npm', ['run', '--silent', 'bench', '--', ...argv], {}, LOCK_BENCH_TIMEOUT_MS);
      const context = describeRun(result);
      expect(result.code, context).toBe(0);
      const jsonFile = readdirSync(out).find((f) => f.endsWith('.json'));
      const report = JSON.parse(readFileSync(join(out, jsonFile as string), 'utf8')) as BenchReport;
      expect(report.ok, report.failure ?? '').toBe(true);
      expect(report.runs.map((r) => [r.case, r.lock, r.verification.ok])).toEqual([
        ['e2e', 'redis', true],
        ['e2e', 'etcd', true],
        ['e2e', 'postgres', true],
      ]);
      expect(Object.keys(report.e2eToRedisRatio ?? {})).toEqual(['etcd', 'postgres']);
      expect(typeof report.e2eToRedisRatio?.etcd?.throughputRatio).toBe('number');
      expect(result.stdout).toContain('| case | lock | transfers/s |');
      expect(result.stdout).toMatch(/\| e2e \| etcd \| [\d,]+ \| [\d.]+ \|/);

      // Nothing left: the cases' databases, the etcd members.
      const runId = /bench (\w+):/.exec(result.stderr)?.[1];
      expect(runId, context).toBeDefined();
      const admin = new pg.Client({ connectionString: withDatabase(loadConfig().databaseUrl, 'postgres') });
      await admin.connect();
      try {
        const dbs = await admin.query('SELECT datname FROM pg_database WHERE starts_with(datname, $1)', [
          `bench_${runId}`,
        ]);
        expect(dbs.rows).toEqual([]);
      } finally {
        await admin.end();
      }
      expect(benchEtcdProcesses()).toEqual([]);
    },
    LOCK_BENCH_TIMEOUT_MS + 30_000,
  );
});
