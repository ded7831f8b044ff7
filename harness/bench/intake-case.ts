// e2e-intake-1 and e2e-intake-100: the e2e case's transfers, requested through the transactional
// intake (requestTransfers() of src/intake/intake.ts) in producer transactions of 1 and of 100
// requests, moved to the queue by relay processes (`npm run relay`, src/cli/relay-cli.ts, which
// also publish the outcome feed), decided by the same real worker processes.
//
// Two phases, the way e2e has two (fill the queue, then start the workers):
//   1. the producer: the bench commits every request into the intake (INTAKE_PRODUCER_LANES
//      connections, each a loop of BEGIN; requestTransfers(chunk); COMMIT). Timed and accounted
//      on its own (producerRequestsPerS, producerCpu): its PostgreSQL CPU is part of the intake's
//      cost, but it is the producer's own transaction, not the pipeline's throughput.
//   2. the pipeline: relays and workers start together on a full intake and an empty queue; the
//      throughput is e2e's (first → last deciding transaction), so it holds the relaying, the
//      queue and the decision, and the relays' CPU is in the account (part `relays`).
// Verified like e2e (applied = expected, invariants, queue drained) and also: every request
// decided, none given up, and the outcome feed holds one `applied` event per request.

import { join } from 'node:path';
import { Queue } from 'bullmq';
import pg from 'pg';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { jobIdOf } from '../../src/intake/relay.ts';
import type { TransferWire } from '../../src/ledger/transfer-request.ts';
import { waitForDrain } from '../../src/queue/queue-drain.ts';
import { BenchFleet, logDirOf, type SlotTimes } from './bench-fleet.ts';
import { benchBalanceMinor, benchWorkload } from './bench-workload.ts';
import { bullmqLatencies, type Enqueued } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { type CpuSample, cpuAccount, phaseAccount, sampleIntervalMs, startCpuSampler } from './cpu-account.ts';
import { commitTimes, createdAtThroughput } from './measure.ts';
import type { ProcessPeak } from './process-memory.ts';
import { type Sandbox, sandboxNames, withSandbox } from './sandbox.ts';
import { bullmqState, verifyIntake, verifyLedger } from './verify.ts';
import { operationPrefixOf, workerEnv } from './worker-cases.ts';

/** Connections the bench's producer commits requests on, at once. */
export const INTAKE_PRODUCER_LANES = 4;
/** The relay process the cases start: `npm run relay` (compiled: dist/cli/relay-cli.js, as WORKER_ENTRY says). */
export const RELAY_SOURCE_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'relay-cli.ts');

/** The queue the case's relays publish the outcome feed to (removed after the case with the rest). */
export function outcomesQueueNameOf(sandbox: Sandbox): string {
  return `${sandbox.names.queue}-outcomes`;
}

/** Requests per producer transaction of each intake case. */
export function transactionSizeOf(caseName: string): number {
  if (caseName === 'e2e-intake-1') return 1;
  if (caseName === 'e2e-intake-100') return 100;
  throw new Error(`runIntakeCase cannot run ${caseName}`);
}

interface Produced {
  /** operationId → Date.now() just before its transaction began (the producer's moment of asking). */
  readonly requestedAtMs: Map<string, number>;
  readonly wallMs: number;
}

/** Commits every request into the intake, `size` per transaction, on `lanes` connections at once. */
async function produce(
  pool: pg.Pool,
  wires: readonly TransferWire[],
  size: number,
  amountMax: bigint,
  lanes: number,
  onProgress: (done: number) => void,
): Promise<Produced> {
  const requestedAtMs = new Map<string, number>();
  let committed = 0;
  const started = performance.now();
  let next = 0;
  const lane = async () => {
    const client = await pool.connect();
    try {
      for (;;) {
        const start = next;
        if (start >= wires.length) return;
        next += size;
        const chunk = wires.slice(start, start + size);
        const stamp = Date.now();
        await client.query('BEGIN');
        try {
          await requestTransfers(client, chunk, amountMax);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
        for (const w of chunk) requestedAtMs.set(w.operationId, stamp);
        committed += chunk.length;
        onProgress(committed);
      }
    } finally {
      client.release();
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return { requestedAtMs, wallMs: performance.now() - started };
}

async function undecidedCount(pool: pg.Pool, operationPrefix: string): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM transfer_requests WHERE decided_at IS NULL AND starts_with(operation_id, $1)',
    [operationPrefix],
  );
  return Number(rows[0]?.n ?? 0);
}

/** The environment of a relay process of a case. */
export function relayEnv(ctx: CaseContext, sandbox: Sandbox): Record<string, string> {
  return {
    DATABASE_URL: sandbox.requireDatabaseUrl(),
    REDIS_URL: ctx.config.redisUrl,
    QUEUE_NAME: sandbox.names.queue,
    LOG_LEVEL: 'warn',
    RELAY_BATCH_MAX: String(ctx.options.relayBatchMax),
    // Any free port, reported to the bench: several relays (and other benches) may run at once.
    RELAY_METRICS_PORT: '0',
    OUTCOMES_QUEUE_NAME: outcomesQueueNameOf(sandbox),
  };
}

interface PipelineRun {
  readonly workerPeaks: ProcessPeak[];
  readonly relayPeaks: ProcessPeak[];
  readonly wallMs: number;
  readonly cpuSamples: readonly CpuSample[];
  readonly slotTimes: SlotTimes | null;
}

/** Starts relays and workers together, waits until every request is decided and the queue drained. */
async function runPipeline(ctx: CaseContext, sandbox: Sandbox, operationPrefix: string): Promise<PipelineRun> {
  const { options, caseName, run } = ctx;
  const queue = sandbox.requireQueue();
  const pool = sandbox.requirePool();
  const workers = BenchFleet.create({
    count: options.workers,
    env: workerEnv(ctx, sandbox, 'default'),
    logDir: logDirOf(ctx.logRoot, caseName, run),
    cpuProfDir: options.cpuProfDir === null ? null : logDirOf(options.cpuProfDir, caseName, run),
    workerEntry: ctx.config.workerEntry,
  });
  const relays = BenchFleet.create({
    count: options.relays,
    entry: RELAY_SOURCE_ENTRY,
    env: relayEnv(ctx, sandbox),
    logDir: logDirOf(ctx.logRoot, `${caseName}-relay`, run),
    cpuProfDir: null,
    workerEntry: ctx.config.workerEntry,
    // As `npm run relay` and the relay's deployment start it: plain node, no worker flags.
    runtimeFlags: [],
  });
  const total = options.transfers;
  const started = performance.now();
  let cpuSamples: readonly CpuSample[] = [];
  let slotTimes: SlotTimes | null = null;
  let workerPeaks: ProcessPeak[] = [];
  let relayPeaks: ProcessPeak[] = [];
  let wallMs = 0;
  try {
    workers.startAll();
    relays.startAll();
    const sampler = await startCpuSampler({
      processPids: () => workers.pids(),
      relayPids: () => relays.pids(),
      ...sandbox.cpuServers(sampleIntervalMs(options.quick)),
    });
    try {
      const deadline = performance.now() + options.drainTimeoutS * 1000;
      const pollMs = sampleIntervalMs(options.quick);
      for (;;) {
        if (ctx.signal.aborted) throw new Error('interrupted');
        workers.sampleMemory();
        relays.sampleMemory();
        const dead = [...workers.exited().map((i) => `worker ${i}`), ...relays.exited().map((i) => `relay ${i}`)];
        if (dead.length > 0) throw new Error(`${dead.join(', ')} exited during ${caseName}; see its log`);
        const open = await undecidedCount(pool, operationPrefix);
        ctx.progress.tick(total - open, total, `(${open} requests undecided)`);
        if (open === 0) break;
        if (performance.now() > deadline)
          throw new Error(`${open} requests still undecided after ${options.drainTimeoutS} s`);
        await new Promise((resolve) => setTimeout(resolve, pollMs));
      }
      // Decided; the workers complete the jobs just after (their finishedOn is the answer time).
      await waitForDrain(queue, options.drainTimeoutS * 1000, undefined, ctx.signal);
      slotTimes = await workers.slotTimes();
    } finally {
      cpuSamples = await sampler.stop();
    }
  } finally {
    wallMs = performance.now() - started;
    workerPeaks = await workers.stopAll();
    relayPeaks = await relays.stopAll();
  }
  return { workerPeaks, relayPeaks, wallMs, cpuSamples, slotTimes };
}

export async function runIntakeCase(ctx: CaseContext): Promise<CaseRunResult> {
  const { options, config, caseName, run } = ctx;
  const size = transactionSizeOf(caseName);
  const operationPrefix = operationPrefixOf(run);
  const wires = benchWorkload({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    hot: false,
    operationPrefix,
  });
  const names = sandboxNames(ctx.runId, caseName, run);
  ctx.progress.begin(run, options.runs, caseName, `database ${names.database}, queue ${names.queue}`);
  return withSandbox(
    {
      config,
      names,
      wallets: options.wallets,
      balanceMinor: benchBalanceMinor(options.transfers),
      withQueue: true,
    },
    async (sandbox) => {
      const queue = sandbox.requireQueue();
      // Phase 1: the producer.
      const producerPool = trackConnections(
        new pg.Pool({
          connectionString: sandbox.requireDatabaseUrl(),
          max: INTAKE_PRODUCER_LANES,
          options: '-c TimeZone=UTC',
        }),
      );
      producerPool.on('error', () => undefined);
      let produced: Produced;
      let producerSamples: readonly CpuSample[] = [];
      try {
        const sampler = await startCpuSampler(sandbox.cpuServers(sampleIntervalMs(options.quick)));
        try {
          produced = await produce(producerPool, wires, size, config.transferAmountMax, INTAKE_PRODUCER_LANES, (n) =>
            ctx.progress.tick(n, wires.length, '(requested)'),
          );
        } finally {
          producerSamples = await sampler.stop();
        }
      } finally {
        await endPool(producerPool);
      }
      const producerCpu = phaseAccount(producerSamples, wires.length);
      ctx.progress.note(
        `${wires.length} transfers requested in transactions of ${size}; starting ${options.relays} relay(s) and ${options.workers} workers`,
      );

      // Phase 2: relays and workers.
      const outcomes = new Queue(outcomesQueueNameOf(sandbox), { connection: sandbox.connection });
      let pipeline: PipelineRun;
      let published: number;
      try {
        pipeline = await runPipeline(ctx, sandbox, operationPrefix);
        published = (await outcomes.getJobCounts('waiting')).waiting ?? 0;
      } finally {
        await outcomes.obliterate({ force: true }).catch(() => undefined);
        await outcomes.close();
      }

      const pool = sandbox.requirePool();
      const commits = await commitTimes(pool, operationPrefix);
      const enqueued: Enqueued = {
        enqueuedAtMs: produced.requestedAtMs,
        jobIds: new Map(wires.map((w) => [w.operationId, jobIdOf(w.operationId)])),
      };
      const latencyMs = await bullmqLatencies(sandbox.connection, queue, enqueued, commits);
      const ledger = await verifyLedger(sandbox, operationPrefix, wires.length, await bullmqState(queue));
      const intake = await verifyIntake(sandbox, operationPrefix, wires.length);
      const problems = [...ledger.problems, ...intake.problems];
      const sends = await pool.query<{ resent: string }>(
        'SELECT coalesce(sum(send_count - 1), 0) AS resent FROM transfer_requests WHERE starts_with(operation_id, $1)',
        [operationPrefix],
      );
      const slots = pipeline.slotTimes;
      const relayPeak = Math.max(0, ...pipeline.relayPeaks.map((p) => p.peakRssMb ?? 0));
      return {
        case: caseName,
        run,
        ...createdAtThroughput(commits),
        wallMs: pipeline.wallMs,
        latencyMs,
        processes: pipeline.workerPeaks,
        cpu: cpuAccount(pipeline.cpuSamples, [...commits.values()]),
        producerCpu,
        verification: { ...ledger, ok: problems.length === 0, problems },
        notes: {
          producerTransactionSize: size,
          producerLanes: INTAKE_PRODUCER_LANES,
          producerWallMs: Math.round(produced.wallMs),
          producerRequestsPerS:
            produced.wallMs > 0 ? Math.round((wires.length / produced.wallMs) * 1000 * 10) / 10 : null,
          relays: options.relays,
          relayBatchMax: options.relayBatchMax,
          relayPeakRssMb: relayPeak === 0 ? null : relayPeak,
          resends: Number(sends.rows[0]?.resent ?? 0),
          feedEvents: intake.feedEvents,
          // Outcome events the relays published to the outcomes queue during the case (no consumer there).
          outcomesPublished: published,
          transferBatchMax: options.batchMax,
          lockWaitShareOfSlotTime:
            slots === null || slots.slotSeconds === 0
              ? null
              : Math.round((slots.lockWaitSeconds / slots.slotSeconds) * 10_000) / 10_000,
        },
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}
