// The bench run: preflight() checks the servers and the connection budget before anything is
// measured; runBench() then does R runs of every selected case, interleaved (run 1 of every
// case, then run 2, ...) so a change in the machine's load falls on all cases alike, and in
// the listed order in odd runs and the reverse in even ones (caseOrder; e2e-payments' three
// parts move as one group, always in their order: caseGroupsOf). Each case verifies itself; the
// first failed verification stops the bench. Whatever happened, the report holds what was measured.
import { join } from 'node:path';
import pg from 'pg';
import { type Config, withDatabase } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';
import { UsageError } from '../../src/errors.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
import { withinMs } from '../../src/ops/probes.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { ensureServices } from '../services/ensure-services.ts';
import { BenchLocks, lockProblem } from './bench-locks.ts';
import {
  type BenchOptions,
  type CaseName,
  caseGroupsOf,
  casesOf,
  LOCK_MODES,
  lockedGroupsOf,
  type Mode,
  PAYMENT_PARTS,
  SPLIT_LEGS,
} from './bench-options.ts';
import {
  BENCH_AMOUNT_MAX_MINOR,
  BENCH_HOLD_EXPIRES_IN_MS,
  benchBalanceMinor,
  HOT_WALLET_RATE,
  SPLIT_LEG_AMOUNT_MAX_MINOR,
} from './bench-workload.ts';
import { type CaseContext, type CaseRunResult, VerificationFailedError } from './case-result.ts';
import { runDbCeiling, runDbCeilingFirst, runDbCeilingPaired } from './db-ceiling.ts';
import { GRAPHILE_COMPLETE_BATCH_DELAY_MS, GRAPHILE_LOCAL_QUEUE_SIZE, graphilePoolMax } from './graphile-settings.ts';
import { INTAKE_PRODUCER_LANES, runIntakeCase } from './intake-case.ts';
import { runLowRate, WARMUP_PER_SLOT } from './low-rate.ts';
import {
  currentLoadAverage1m,
  type MachineInfo,
  machineInfo,
  redisRoundTripUs,
  type Versions,
  versions,
} from './machine.ts';
import { runPaymentsCase } from './payments-case.ts';
import { runPeerGraphile } from './peer-graphile.ts';
import { Progress } from './progress.ts';
import { runQueueCeiling } from './queue-ceiling.ts';
import { benchRunId } from './sandbox.ts';
import { runSeedDesign } from './seed-design.ts';
import {
  type CaseSummary,
  e2ePeakRssMb,
  type LockToRedisRatio,
  type Ratios,
  ratios,
  SYSTEM_PARTS,
  summarize,
} from './summary.ts';
import { runWorkerCase } from './worker-cases.ts';

/** Connections left free for everyone else on the server when the bench checks its budget. */
export const CONNECTIONS_RESERVE = 10;

/**
 * What measures each case. e2e-payments' runner measures its three parts in one call (the
 * group of caseGroupsOf()); it is called with the group's first case.
 */
const RUNNERS: Readonly<Record<CaseName, (ctx: CaseContext) => Promise<CaseRunResult | CaseRunResult[]>>> = {
  'db-ceiling': runDbCeiling,
  'db-ceiling-first': runDbCeilingFirst,
  'db-ceiling-paired': runDbCeilingPaired,
  'seed-design': runSeedDesign,
  'queue-ceiling': runQueueCeiling,
  e2e: runWorkerCase,
  'e2e-payments-hold': runPaymentsCase,
  'e2e-payments-capture': runPaymentsCase,
  'e2e-payments-split': runPaymentsCase,
  'e2e-intake-1': runIntakeCase,
  'e2e-intake-100': runIntakeCase,
  'e2e-unbatched': runWorkerCase,
  'e2e-traced': runWorkerCase,
  'peer-graphile-worker': runPeerGraphile,
  hot: runWorkerCase,
  'low-rate': runLowRate,
  'low-rate-unbatched': runLowRate,
};

/** What each figure means, written into every results file so it can be read on its own. */
export const DEFINITIONS = Object.freeze({
  throughputPerS:
    'count / (last − first) of transfers.created_at, the start time of the transaction that decided each transfer ' +
    '(PostgreSQL CURRENT_TIMESTAMP; for a batch, the batch transaction). Process start-up is outside this span. ' +
    'queue-ceiling has no database: its span is BullMQ finishedOn, first → last job.',
  enqueueToCommit:
    'Date.now() in the bench just before the addBulk/add call that enqueued the transfer → its transfers.created_at ' +
    '(same machine clock). In e2e, e2e-unbatched, hot and peer-graphile-worker the queue is filled before the workers ' +
    'start, so this is mostly time spent waiting in the queue; the paced low-rate cases show the latency of a quiet system.',
  enqueueToAnswer:
    'bench enqueue time → BullMQ finishedOn (the worker had the answer and completed the job; worker clock).',
  activeToCommit:
    'BullMQ processedOn (a worker took the job, last attempt) → transfers.created_at: the time inside the worker before the decision started.',
  call: 'db-ceiling, db-ceiling-first, db-ceiling-paired and seed-design: one transfer’s call (round trips and commit) as the bench process saw it.',
  wallMs:
    'bench clock from starting the processes (or the first call) until everything was done; includes process start-up.',
  peakRssMb:
    'per process, the larger of VmHWM (/proc/<pid>/status, read just before the process was told to stop) and every ' +
    'VmRSS sampled during the case (each drain poll, 250 ms): VmHWM alone can lag a sampled VmRSS (vmHwmCoversSamples).',
  cpu:
    'per case run, CPU milliseconds per transfer of each part inside the throughput span (samples every 250 ms; from ' +
    'the first sample after the first commit to the last before the last, over the transfers committed between them): ' +
    "processes = the case's worker processes (/proc/<pid>/stat, all threads); relays = the relay processes of the " +
    'intake cases; postgres = the whole local server ' +
    '(postmaster, its live children and the ones it reaped); redis = INFO cpu of the server; bench = this process; ' +
    'etcd = the members of the bench etcd cluster, in the cases locking through it; ' +
    'machine = all busy CPU (/proc/stat); other = machine minus the parts. Null where a part cannot be read ' +
    '(a remote server, no /proc). Summaries hold the medians over the runs.',
  intake:
    'e2e-intake-1 and e2e-intake-100: the e2e transfers requested through the intake (request_transfer) in producer ' +
    'transactions of 1 and of 100, committed before the relays and workers start (as e2e fills the queue before its ' +
    'workers start); throughputPerS is then measured exactly as e2e (first → last deciding transaction), so it holds ' +
    "the relaying. enqueueToCommit starts at the producer's BEGIN. producerCpu is the producer phase's own account, " +
    'per request (bench = the producer); intake*ExtraPostgresMsPerTransfer = (pipeline postgres + producer postgres) − ' +
    "e2e's postgres, per transfer. Verified as e2e, and every request decided, none given up, one feed event each.",
  payments:
    'e2e-payments: three parts in one database, each measured exactly as e2e (queue filled first through ' +
    'enqueueOperations, then the same worker fleet; throughput and CPU account over the first → last deciding ' +
    "transaction of the part, per operation): e2e-payments-hold (e2e's transfers of the run as holds), " +
    'e2e-payments-capture (the whole capture of each hold, enqueued once every hold was decided), ' +
    `e2e-payments-split (a split of ${SPLIT_LEGS} legs from each of e2e's payers). A payment is a hold and its ` +
    'capture: notes.paymentsPerS = payments / (hold span + capture span), notes.machineMsPerPayment = hold + ' +
    'capture machine CPU ms per operation. Verified: every operation applied, every hold active after its part ' +
    'and captured whole after the captures, every split leg recorded, every wallet at the balance and the held ' +
    'amount the operations give, the invariants hold.',
  ratios:
    'median transfers/s of one case over the median of the other (e2eToFasterCeilingRatio: e2e over the faster of ' +
    'db-ceiling and db-ceiling-first); lowRateBatchingAdded*: low-rate minus low-rate-unbatched enqueue→commit percentile (medians of the runs). ' +
    'paymentCostToTransferRatio: machine CPU ms per payment (hold + capture) over e2e machine CPU ms per transfer, ' +
    'splitCostToTransferRatio: machine CPU ms per split over the same, paymentsToE2eRatio: payments/s over e2e ' +
    "transfers/s, splitsToE2eRatio: splits/s over e2e transfers/s; each of these taken per run against that run's " +
    'e2e, then the median over the runs. With several --lock services they all read the cases on redis.',
  lock:
    `--lock: each case of ${LOCK_MODES.join(', ')} runs once per lock service listed, side by side in every run ` +
    '(workers with LOCK_BACKEND=<lock>; etcd: a private cluster on loopback, started once for the bench; ' +
    "postgres: advisory locks on the case's own database, directly; a lock epoch opened for etcd or postgres before " +
    'the workers start). Its runs and summaries carry `lock`. lockToRedisRatios / e2eToRedisRatio: per run, the ' +
    'case on that service over the same case on redis in the same run, then the median: throughputRatio (transfers/s), ' +
    `machineCpuRatio (machine CPU ms per transfer), systemCpuRatio (${SYSTEM_PARTS.join(' + ')} CPU ms per transfer).`,
});

export interface BenchReport {
  readonly kind: 'fenced-transfers-bench';
  readonly version: 1;
  readonly startedAt: string;
  finishedAt: string | null;
  ok: boolean;
  failure: string | null;
  readonly command: string;
  readonly parameters: Record<string, unknown>;
  readonly machine: MachineInfo;
  versions: Versions | null;
  readonly definitions: typeof DEFINITIONS;
  e2eToDbCeilingRatio: number | null;
  e2eToFasterCeilingRatio: number | null;
  singleToFirstDecisionRatio: number | null;
  singleToFirstPairedRatio: number | null;
  e2eUnbatchedToDbCeilingRatio: number | null;
  e2eToSeedDesignRatio: number | null;
  e2eToPeerRatio: number | null;
  hotToUniformRatio: number | null;
  e2eToQueueCeilingRatio: number | null;
  lowRateBatchingAddedP50Ms: number | null;
  lowRateBatchingAddedP95Ms: number | null;
  hotLockWaitShareOfSlotTime: number | null;
  e2eLockWaitShareOfSlotTime: number | null;
  /** Largest peak RSS of a worker process in the e2e case, MiB. */
  e2ePeakRssMbPerWorker: number | null;
  e2eIntake1ToE2eRatio: number | null;
  e2eIntake100ToE2eRatio: number | null;
  e2eTracedToE2eRatio: number | null;
  intake1ExtraPostgresMsPerTransfer: number | null;
  intake100ExtraPostgresMsPerTransfer: number | null;
  paymentsPerS: number | null;
  machineMsPerPayment: number | null;
  paymentCostToTransferRatio: number | null;
  splitCostToTransferRatio: number | null;
  paymentsToE2eRatio: number | null;
  splitsToE2eRatio: number | null;
  lockToRedisRatios: readonly LockToRedisRatio[];
  e2eToRedisRatio: Readonly<Partial<Record<LockBackendName, LockToRedisRatio>>> | null;
  summary: CaseSummary[];
  readonly runs: CaseRunResult[];
}

function parameters(options: BenchOptions, config: Config): Record<string, unknown> {
  return {
    workers: options.workers,
    concurrency: options.concurrency,
    totalConcurrency: options.workers * options.concurrency,
    lanes: options.lanes,
    totalLanes: options.workers * options.lanes,
    transfers: options.transfers,
    wallets: options.wallets,
    runs: options.runs,
    modes: options.modes,
    cases: casesOf(options.modes),
    quick: options.quick,
    amountMaxMinor: BENCH_AMOUNT_MAX_MINOR,
    openingBalanceMinor: benchBalanceMinor(options.transfers).toString(),
    hotWalletRate: HOT_WALLET_RATE,
    lowRatePerS: options.lowRatePerS,
    lowRateS: options.lowRateS,
    lowRateWarmupTransfers: options.workers * options.concurrency * WARMUP_PER_SLOT,
    transferBatchMax: options.batchMax ?? 'worker default',
    transferBatchWaitMs: options.batchWaitMs ?? 'worker default',
    workerLogLevel: 'warn',
    runtime: config.workerEntry.endsWith('.js')
      ? 'compiled JavaScript (dist/, plain node)'
      : 'TypeScript sources through tsx',
    workerEntry: config.workerEntry,
    workerNodeFlags: WORKER_NODE_FLAGS,
    workerDbPoolMax: config.dbPoolMax,
    jobAttemptsMax: config.jobAttemptsMax,
    unlockedFence: 'db-ceiling, seed-design and the Graphile task pass fence 1 (no lock issues tokens there)',
    graphileWorker: {
      processes: options.workers,
      concurrentJobs: options.lanes,
      maxPoolSize: graphilePoolMax(options.lanes),
      localQueueSize: GRAPHILE_LOCAL_QUEUE_SIZE,
      completeJobBatchDelay: GRAPHILE_COMPLETE_BATCH_DELAY_MS,
      failJobBatchDelay: GRAPHILE_COMPLETE_BATCH_DELAY_MS,
    },
    intake: {
      producerTransactionSizes: [1, 100],
      producerLanes: INTAKE_PRODUCER_LANES,
      relays: options.relays,
      relayBatchMax: options.relayBatchMax,
      relayEntry: config.workerEntry.endsWith('.js') ? 'dist/cli/relay-cli.js' : 'src/cli/relay-cli.ts',
    },
    payments: {
      parts: [...PAYMENT_PARTS],
      operationsPerPart: options.transfers,
      holdExpiresInMs: Math.min(BENCH_HOLD_EXPIRES_IN_MS, config.holdExpiryMaxMs),
      capture: 'whole hold (no amount)',
      splitLegs: SPLIT_LEGS,
      splitLegAmountMaxMinor: SPLIT_LEG_AMOUNT_MAX_MINOR,
    },
    cpuProfDir: options.cpuProfDir,
    drainTimeoutS: options.drainTimeoutS,
    locks: options.locks,
    lockModes: [...LOCK_MODES],
    lockTtlMs: config.lockTtlMs,
  };
}

/** Before anything is measured: the servers answer and have the connections the cases need. */
export async function preflight(options: BenchOptions, config: Config): Promise<void> {
  const problem = lockProblem(options.locks, config);
  if (problem !== null) throw new UsageError(problem);
  await ensureServices(config);
  await checkConnectionBudget(options, config);
}

/** Connections the largest selected case opens at once, against what the server has free. */
async function checkConnectionBudget(options: BenchOptions, config: Config): Promise<void> {
  // What needs the connections, how many, and the flags that set them.
  const needs: [string, number, string][] = [];
  const lanes = options.workers * options.lanes;
  const lanesFlags = `--workers ${options.workers} × --lanes ${options.lanes}`;
  if (
    (['db-ceiling', 'db-ceiling-first', 'db-ceiling-paired', 'seed-design'] as const).some((m: Mode) =>
      options.modes.includes(m),
    )
  )
    needs.push(['db-ceiling/seed-design', lanes, lanesFlags]);
  if (options.modes.includes('peer-graphile-worker'))
    needs.push(['peer-graphile-worker', options.workers * graphilePoolMax(options.lanes), lanesFlags]);
  if (
    options.modes.some(
      (m) =>
        m === 'e2e' ||
        m === 'e2e-payments' ||
        m === 'e2e-unbatched' ||
        m === 'e2e-traced' ||
        m === 'hot' ||
        m === 'low-rate',
    )
  ) {
    // LOCK_BACKEND=postgres: one more connection per worker, its lock session.
    const lockSession = options.locks.includes('postgres') ? 1 : 0;
    needs.push([
      'worker processes',
      options.workers * (config.dbPoolMax + lockSession),
      `--workers ${options.workers} × DB_POOL_MAX${lockSession === 0 ? '' : ' + 1 (--lock postgres)'}`,
    ]);
  }
  if (options.modes.includes('e2e-intake')) {
    // The workers, the relays (DB_POOL_MAX each, like a worker) and the bench's producer connections.
    needs.push([
      'e2e-intake',
      (options.workers + options.relays) * config.dbPoolMax + INTAKE_PRODUCER_LANES,
      `--workers ${options.workers} and --relays ${options.relays} × DB_POOL_MAX`,
    ]);
  }
  const client = new pg.Client({ connectionString: withDatabase(config.databaseUrl, 'postgres') });
  await client.connect();
  let max: number;
  let used: number;
  try {
    max = Number((await client.query<{ max_connections: string }>('SHOW max_connections')).rows[0]?.max_connections);
    used = Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity')).rows[0]?.n);
  } finally {
    await client.end();
  }
  const free = max - used - CONNECTIONS_RESERVE;
  for (const [what, n, flags] of needs) {
    if (n > free) {
      throw new UsageError(
        `${what} needs ${n} PostgreSQL connections (${flags}), ` +
          `but the server allows ${max} and ${used} are in use (${CONNECTIONS_RESERVE} kept free); lower them`,
      );
    }
  }
}

export interface BenchRunOutcome {
  readonly report: BenchReport;
  readonly error: unknown;
}

/**
 * The order of the cases in run `run` (from 1): as listed in odd runs, reversed in even ones,
 * so that no case always runs first, or always after the same case. (It was suspected of the
 * gap between db-ceiling and db-ceiling-first; it explained at most part of it:
 * docs/verification/results/performance-history.md.)
 */
export function caseOrder<T>(cases: readonly T[], run: number): T[] {
  if (!Number.isInteger(run) || run < 1) throw new RangeError(`run must be a positive integer, got ${run}`);
  return run % 2 === 1 ? [...cases] : [...cases].reverse();
}

/** How long the closing round-trip probe may take before it is given up (a Redis gone away). */
const CLOSING_PROBE_TIMEOUT_MS = 10_000;

/**
 * The Redis round trip at the end of a run; null when the run was interrupted, or Redis did not
 * answer within CLOSING_PROBE_TIMEOUT_MS (the queue's connection retries without end).
 */
async function probeRoundTrip(config: Config, signal: AbortSignal): Promise<number | null> {
  if (signal.aborted) return null;
  const redis = bullmqConnection(config);
  try {
    return await withinMs(redisRoundTripUs(redis), CLOSING_PROBE_TIMEOUT_MS, 'Redis');
  } catch {
    return null;
  } finally {
    redis.disconnect();
  }
}

/** An empty report of this invocation: every figure null until runBench fills it. */
function newReport(options: BenchOptions, config: Config, argv: readonly string[]): BenchReport {
  return {
    kind: 'fenced-transfers-bench',
    version: 1,
    startedAt: new Date().toISOString(),
    finishedAt: null,
    ok: false,
    failure: null,
    command: ['npm run bench --', ...argv].join(' '),
    parameters: parameters(options, config),
    machine: machineInfo(),
    versions: null,
    definitions: DEFINITIONS,
    e2eToDbCeilingRatio: null,
    e2eToFasterCeilingRatio: null,
    singleToFirstDecisionRatio: null,
    singleToFirstPairedRatio: null,
    e2eUnbatchedToDbCeilingRatio: null,
    e2eToSeedDesignRatio: null,
    e2eToPeerRatio: null,
    hotToUniformRatio: null,
    e2eToQueueCeilingRatio: null,
    lowRateBatchingAddedP50Ms: null,
    lowRateBatchingAddedP95Ms: null,
    hotLockWaitShareOfSlotTime: null,
    e2eLockWaitShareOfSlotTime: null,
    e2ePeakRssMbPerWorker: null,
    e2eIntake1ToE2eRatio: null,
    e2eIntake100ToE2eRatio: null,
    e2eTracedToE2eRatio: null,
    intake1ExtraPostgresMsPerTransfer: null,
    intake100ExtraPostgresMsPerTransfer: null,
    paymentsPerS: null,
    machineMsPerPayment: null,
    paymentCostToTransferRatio: null,
    splitCostToTransferRatio: null,
    paymentsToE2eRatio: null,
    splitsToE2eRatio: null,
    lockToRedisRatios: [],
    e2eToRedisRatio: null,
    summary: [],
    runs: [],
  };
}

/** What every case of this invocation shares in its context. */
type BenchScope = Omit<CaseContext, 'caseName' | 'run' | 'lock'>;

/** Every run of every case group, interleaved; each result into the report, the first failure thrown. */
async function runCases(scope: BenchScope, cases: readonly CaseName[], report: BenchReport): Promise<void> {
  const { options, progress } = scope;
  const groups = lockedGroupsOf(caseGroupsOf(cases), options.locks);
  for (let run = 1; run <= options.runs; run++) {
    for (const group of caseOrder(groups, run)) {
      const caseName = group.cases[0] as CaseName;
      const measured = await RUNNERS[caseName]({ ...scope, caseName, run, lock: group.lock });
      // A group of several cases notes each of its parts itself, as it measures it.
      const results = Array.isArray(measured) ? measured : [measured];
      for (const result of results) {
        report.runs.push(result);
        const t = result.throughputPerS;
        if (!Array.isArray(measured)) {
          progress.note(
            `${t === null ? '' : `${Math.round(t)} transfers/s, `}verified: ${result.verification.ok ? 'yes' : result.verification.problems.join('; ')}`,
          );
        }
        if (!result.verification.ok) throw new VerificationFailedError(result);
        const unread = result.processes.filter((p) => p.peakRssMb === null);
        if (unread.length > 0) {
          throw new Error(
            `${result.case} run ${run}: the memory of process ${unread.map((p) => p.index).join(', ')} could not be read`,
          );
        }
      }
      if (results.length !== group.cases.length)
        throw new Error(
          `${group.cases.join(', ')} run ${run}: ${results.length} of ${group.cases.length} parts measured`,
        );
    }
  }
}

export async function runBench(
  options: BenchOptions,
  config: Config,
  argv: readonly string[],
  write: (line: string) => void,
  signal: AbortSignal,
): Promise<BenchRunOutcome> {
  const report = newReport(options, config, argv);
  const cases = casesOf(options.modes);
  let error: unknown = null;
  let locks: BenchLocks | null = null;
  try {
    const redis = bullmqConnection(config);
    try {
      report.versions = await versions(config.databaseUrl, redis);
      report.machine.redisRoundTripUsStart = await redisRoundTripUs(redis);
    } finally {
      redis.disconnect();
    }
    const runId = benchRunId();
    const logRoot = join(PROJECT_ROOT, '.runs', `bench-${runId}`);
    const onLocks = options.locks.length > 1 || options.locks[0] !== 'redis' ? ` on ${options.locks.join(', ')}` : '';
    write(`bench ${runId}: ${cases.join(', ')} × ${options.runs} runs${onLocks}; worker logs in ${logRoot}`);
    locks = await BenchLocks.start(options.locks);
    report.parameters.lockServices = locks.describe();
    await runCases({ options, config, runId, logRoot, progress: new Progress(write), signal, locks }, cases, report);
    report.ok = true;
  } catch (err) {
    error = err;
    report.failure = signal.aborted ? 'interrupted' : err instanceof Error ? err.message : String(err);
  }
  await locks?.stop().catch((err: unknown) => write(`stopping the etcd cluster failed: ${String(err)}`));
  report.summary = summarize(report.runs, cases);
  const r: Ratios = ratios(report.summary, report.runs);
  Object.assign(report, r);
  report.e2ePeakRssMbPerWorker = e2ePeakRssMb(report.summary);
  report.machine.loadAverage1mEnd = currentLoadAverage1m();
  report.machine.redisRoundTripUsEnd = await probeRoundTrip(config, signal);
  report.finishedAt = new Date().toISOString();
  return { report, error };
}
