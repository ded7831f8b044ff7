// peer-graphile-worker: the same transfers through Graphile Worker (graphile-worker-entry.ts),
// the same number of processes, --lanes jobs at once in each (one connection per job), its task
// calling the same apply_transfer().
// Jobs are added in bulk (addJobs, 1,000 a call like our producer) before the processes start;
// throughput comes from transfers.created_at exactly as for e2e.
import { join } from 'node:path';
import { Logger, makeWorkerUtils } from 'graphile-worker';
import type pg from 'pg';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { ENQUEUE_BATCH_MAX } from '../../src/queue/producer.ts';
import { DRAIN_POLL_INTERVAL_MS } from '../../src/queue/queue-drain.ts';
import { type BenchFleet, logDirOf } from './bench-fleet.ts';
import { benchBalanceMinor, benchWorkload } from './bench-workload.ts';
import { withFleet } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { cpuAccount, sampleIntervalMs } from './cpu-account.ts';
import { GRAPHILE_TASK } from './graphile-settings.ts';
import { commitTimes, createdAtThroughput, differences, percentiles } from './measure.ts';
import { sandboxNames, withSandbox } from './sandbox.ts';
import { type QueueState, verifyLedger } from './verify.ts';
import { operationPrefixOf } from './worker-cases.ts';

export const GRAPHILE_WORKER_ENTRY = join(PROJECT_ROOT, 'harness', 'bench', 'graphile-worker-entry.ts');

interface GraphileJobs {
  /** Jobs still in the table (Graphile Worker deletes a job when it completes). */
  readonly left: number;
  /** Of those, jobs that have failed at least once. */
  readonly errored: number;
  /** Of those, jobs out of attempts (permanently failed). */
  readonly failed: number;
}

async function graphileJobs(pool: pg.Pool): Promise<GraphileJobs> {
  const { rows } = await pool.query<{ left: string; errored: string; failed: string }>(
    `SELECT count(*) AS left,
            count(*) FILTER (WHERE last_error IS NOT NULL) AS errored,
            count(*) FILTER (WHERE attempts >= max_attempts) AS failed
       FROM graphile_worker.jobs`,
  );
  const row = rows[0];
  if (row === undefined) throw new Error('graphile jobs query returned no row');
  return { left: Number(row.left), errored: Number(row.errored), failed: Number(row.failed) };
}

async function waitForGraphileDrain(
  ctx: CaseContext,
  pool: pg.Pool,
  fleet: BenchFleet,
  total: number,
  onErrored: (n: number) => void,
): Promise<void> {
  const deadline = performance.now() + ctx.options.drainTimeoutS * 1000;
  for (;;) {
    const jobs = await graphileJobs(pool);
    onErrored(jobs.errored);
    fleet.sampleMemory();
    const dead = fleet.exited();
    if (dead.length > 0) throw new Error(`graphile worker process ${dead.join(', ')} exited; see its log`);
    ctx.progress.tick(total - jobs.left, total, `(${jobs.errored} with errors)`);
    if (jobs.left === 0) return;
    if (jobs.failed > 0) throw new Error(`${jobs.failed} Graphile Worker jobs failed for good`);
    if (performance.now() > deadline)
      throw new Error(`Graphile Worker jobs not done within ${ctx.options.drainTimeoutS} s: ${JSON.stringify(jobs)}`);
    if (ctx.signal.aborted) throw new Error('interrupted');
    await new Promise((r) => setTimeout(r, DRAIN_POLL_INTERVAL_MS));
  }
}

export async function runPeerGraphile(ctx: CaseContext): Promise<CaseRunResult> {
  const { options, config, run } = ctx;
  const operationPrefix = operationPrefixOf(run);
  const wires = benchWorkload({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    hot: false,
    operationPrefix,
  });
  const names = sandboxNames(ctx.runId, 'peer-graphile-worker', run);
  ctx.progress.begin(run, options.runs, 'peer-graphile-worker', `database ${names.database}`);
  const quiet = new Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') ctx.progress.note(`graphile-worker ${level}: ${message}`);
  });

  return withSandbox(
    {
      config,
      names,
      wallets: options.wallets,
      balanceMinor: benchBalanceMinor(options.transfers),
      withQueue: false,
    },
    async (sandbox) => {
      const databaseUrl = sandbox.requireDatabaseUrl();
      const pool = sandbox.requirePool();
      const enqueuedAtMs = new Map<string, number>();
      const utils = await makeWorkerUtils({ connectionString: databaseUrl, logger: quiet });
      try {
        await utils.migrate();
        for (let start = 0; start < wires.length; start += ENQUEUE_BATCH_MAX) {
          const chunk = wires.slice(start, start + ENQUEUE_BATCH_MAX);
          const stampMs = Date.now();
          await utils.addJobs(
            chunk.map((wire) => ({ identifier: GRAPHILE_TASK, payload: wire, maxAttempts: config.jobAttemptsMax })),
          );
          for (const wire of chunk) enqueuedAtMs.set(wire.operationId, stampMs);
        }
      } finally {
        await utils.release();
      }
      ctx.progress.note(`${wires.length} jobs added; starting ${options.workers} Graphile Worker processes`);

      let erroredMax = 0;
      const { processes, wallMs, cpuSamples } = await withFleet(
        {
          count: options.workers,
          entry: GRAPHILE_WORKER_ENTRY,
          env: { DATABASE_URL: databaseUrl, WORKER_CONCURRENCY: String(options.lanes), LOG_LEVEL: 'warn' },
          logDir: logDirOf(ctx.logRoot, 'peer-graphile-worker', run),
          cpuProfDir: null,
          workerEntry: ctx.config.workerEntry,
          // Graphile Worker as its documentation runs it: node's defaults, not our worker's flags.
          runtimeFlags: [],
        },
        sandbox.cpuServers(sampleIntervalMs(options.quick)),
        (fleet) =>
          waitForGraphileDrain(ctx, pool, fleet, wires.length, (n) => {
            erroredMax = Math.max(erroredMax, n);
          }),
      );

      const commits = await commitTimes(pool, operationPrefix);
      const jobs = await graphileJobs(pool);
      const state: QueueState = { failedJobs: jobs.failed, jobsLeft: jobs.left, completedJobs: null };
      return {
        case: 'peer-graphile-worker',
        run,
        ...createdAtThroughput(commits),
        wallMs,
        latencyMs: {
          enqueueToCommit: percentiles(differences(commits, enqueuedAtMs)),
          enqueueToAnswer: null,
          activeToCommit: null,
          call: null,
        },
        processes,
        cpu: cpuAccount(cpuSamples, [...commits.values()]),
        verification: await verifyLedger(sandbox, operationPrefix, wires.length, state),
        notes: { jobsWithErrorsSeenMax: erroredMax },
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}
