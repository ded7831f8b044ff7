// One chaos run, start to end: private services, seeded wallets, a fleet of worker processes
// behind fault proxies, the workload enqueued at a steady pace while the schedule's faults are
// injected, then heal, drain (bounded), check and report. Everything it started is stopped
// and removed in `finally`, also when it fails or is interrupted.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Queue, QueueEvents } from 'bullmq';
import { CONFIG_DEFAULTS } from '../../config/config.ts';
import { createPrisma, type PrismaClient } from '../../db/prisma.ts';
import { SEED_BALANCE_MAX, seedWallets } from '../../ledger/seed-wallets.ts';
import type { TransferWire } from '../../ledger/transfer-request.ts';
import { keySlot } from '../../lock/key-slot.ts';
import { aggregateKeys, readCounterTotals, transferCounterSummary } from '../../metrics/counter-aggregate.ts';
import { enqueueTransfers, TransferQueues } from '../../queue/producer.ts';
import { type QueueProgress, queueProgress, waitForDrain } from '../../queue/queue-drain.ts';
import type { QueueShard } from '../../queue/queue-shards.ts';
import { bullmqConnection, type RedisClient } from '../../queue/redis-connection.ts';
import { deleteMatching } from '../../queue/redis-scan.ts';
import { waitForWorkersConnected } from '../fleet/worker-processes.ts';
import { renderTimelineSvg } from './chaos-chart.ts';
import { CHAOS_JOB_ATTEMPTS_MAX, ChaosFleet } from './chaos-fleet.ts';
import type { ChaosOptions } from './chaos-options.ts';
import { ChaosServices, ProcessRegistry } from './chaos-services.ts';
import { buildWorkload, type ChaosMessage, CURRENCY, WALLET_PREFIX } from './chaos-workload.ts';
import { type FinalJob, runChecks } from './checker.ts';
import { ClusterFaults } from './cluster-faults.ts';
import { attachFaultLoads, attachRecovery } from './fault-load.ts';
import { type ClusterTargets, FaultInjector } from './faults.ts';
import { History } from './history.ts';
import {
  answerOf,
  countWorkerLogEvents,
  faultFigures,
  jobFigures,
  judge,
  messageFigures,
  quantile,
  type RunFigures,
  renderMarkdown,
} from './report.ts';
import { buildSchedule } from './schedule.ts';

/**
 * The workload is enqueued over this share of the fault phase: all of it, so that every fault
 * window meets transfers in flight (the report counts them per fault).
 */
export const ENQUEUE_SHARE = 1;
export const ENQUEUE_TICK_MS = 100;
export const WORKERS_READY_TIMEOUT_MS = 60_000;
export const PROGRESS_INTERVAL_MS = 1_000;
/**
 * Messages sent before the clock starts, and waited for: the first transfer of a fresh worker
 * process is slow (module loading, first connections), and a cold fleet would otherwise open
 * the run with lock losses and a backlog that says nothing about faults.
 */
export const WARM_UP_MESSAGES = 40;
export const WARM_UP_TIMEOUT_MS = 60_000;
/** Jobs read per page after the drain. */
const JOBS_PAGE_SIZE = 1_000;
const AMOUNT_MAX = BigInt(CONFIG_DEFAULTS.TRANSFER_AMOUNT_MAX);

export interface RunResult {
  readonly figures: RunFigures;
  readonly outDir: string;
  readonly pass: boolean;
}

type Log = (line: string) => void;

interface Progress {
  phase: string;
  enqueued: number;
  /** Enqueue calls the producer repeated after an error. */
  producerRetries: number;
  queue: QueueProgress | null;
  faults: number;
  lastFault: string;
}

function dbConfig(databaseUrl: string) {
  return {
    databaseUrl,
    dbPoolMax: 4,
    dbStatementTimeoutMs: 60_000,
    dbLockTimeoutMs: 10_000,
    dbIdleInTransactionTimeoutMs: 60_000,
  };
}

/**
 * How the run names a job: its BullMQ id with one queue; `<shard>:<id>` with several (ids are
 * unique per queue only).
 */
export function jobRef(shard: Pick<QueueShard, 'index'>, jobId: string, shardCount: number): string {
  return shardCount === 1 ? jobId : `${shard.index}:${jobId}`;
}

async function readFinalJobs(queues: TransferQueues): Promise<FinalJob[]> {
  const out: FinalJob[] = [];
  for (const { shard, queue } of queues.shards) {
    for (const job of await readShardJobs(queue))
      out.push({ ...job, jobId: jobRef(shard, job.jobId, queues.shards.length) });
  }
  return out;
}

async function readShardJobs(queue: Queue): Promise<FinalJob[]> {
  const out: FinalJob[] = [];
  const states = ['completed', 'failed', 'active', 'waiting', 'delayed', 'prioritized', 'waiting-children'] as const;
  for (const state of states) {
    for (let start = 0; ; start += JOBS_PAGE_SIZE) {
      const page = await queue.getJobs([state], start, start + JOBS_PAGE_SIZE - 1, true);
      for (const job of page) {
        if (job === undefined || job === null || job.id === undefined) continue;
        out.push({
          jobId: job.id,
          name: job.name,
          state,
          returnvalue: job.returnvalue,
          failedReason: job.failedReason === undefined || job.failedReason === null ? null : String(job.failedReason),
          attemptsMade: job.attemptsMade ?? 0,
          attemptsStarted: job.attemptsStarted ?? 0,
          timestamp: job.timestamp,
          processedOn: job.processedOn ?? null,
          finishedOn: job.finishedOn ?? null,
          data: job.data,
        });
      }
      if (page.length < JOBS_PAGE_SIZE) break;
    }
  }
  return out;
}

/**
 * A producer retries what Redis did not acknowledge (a master failing over, a restart): for this
 * long at most, every PRODUCER_RETRY_DELAY_MS. A retried add whose first try did land leaves a
 * job the harness has no record of (counted in the report, answered from the idempotency record).
 */
export const PRODUCER_RETRY_TIMEOUT_MS = 60_000;
export const PRODUCER_RETRY_DELAY_MS = 250;

async function producerRetry<T>(send: () => Promise<T>, progress: Progress): Promise<T> {
  const deadline = performance.now() + PRODUCER_RETRY_TIMEOUT_MS;
  for (;;) {
    try {
      return await send();
    } catch (err) {
      if (performance.now() > deadline) throw err;
      progress.producerRetries += 1;
      await sleep(PRODUCER_RETRY_DELAY_MS);
    }
  }
}

/** Sends the messages in order, a slice every tick, so they spread over `windowMs`. */
async function enqueuePaced(
  queues: TransferQueues,
  messages: readonly ChaosMessage[],
  windowMs: number,
  history: History,
  sent: Map<string, ChaosMessage>,
  progress: Progress,
  signal: AbortSignal,
  firstTryMs?: Map<string, number>,
): Promise<void> {
  const shardCount = queues.shards.length;
  const shardOfName = new Map(queues.shards.map(({ shard }) => [shard.name, shard]));
  const ticks = Math.max(1, Math.floor(windowMs / ENQUEUE_TICK_MS));
  const record = (message: ChaosMessage, jobId: string, triedAtMs: number) => {
    sent.set(jobId, message);
    firstTryMs?.set(jobId, triedAtMs);
    progress.enqueued = sent.size;
    const wire = message.kind === 'invalid' ? null : (message.data as TransferWire);
    history.write({
      type: 'enqueue',
      jobId,
      seq: message.seq,
      kind: message.kind,
      operationId: message.operationId,
      ...(message.defect === null ? {} : { defect: message.defect }),
      ...(wire === null ? {} : { effect: { from: wire.from, to: wire.to, amount: wire.amount } }),
    });
  };
  for (let tick = 0, next = 0; next < messages.length; tick++) {
    const dueMs = tick * ENQUEUE_TICK_MS - history.nowMs();
    if (dueMs > 0) await sleep(dueMs);
    if (signal.aborted) return;
    // Tick k sends up to message ceil((k + 1) · n / ticks): the last one goes at the end of the window, not before.
    const slice = messages.slice(next, Math.ceil(((tick + 1) * messages.length) / ticks));
    next += slice.length;
    // Valid messages go through the producer (validated, addBulk); hostile ones straight onto the queue.
    let run: ChaosMessage[] = [];
    const flush = async () => {
      if (run.length === 0) return;
      const batch = run;
      const triedAtMs = history.nowMs();
      const done = await producerRetry(
        () =>
          enqueueTransfers(
            queues,
            batch.map((m) => m.data as TransferWire),
            AMOUNT_MAX,
          ),
        progress,
      );
      done.forEach((d, i) => {
        record(
          run[i] as ChaosMessage,
          jobRef(shardOfName.get(d.queueName) as QueueShard, d.jobId, shardCount),
          triedAtMs,
        );
      });
      run = [];
    };
    for (const message of slice) {
      if (message.kind !== 'invalid') {
        run.push(message);
        continue;
      }
      await flush();
      // Hostile messages have no trustworthy source wallet: spread them over the shards by position.
      const target = queues.shards[message.seq % shardCount] as (typeof queues.shards)[number];
      const triedAtMs = history.nowMs();
      const job = await producerRetry(() => target.queue.add(message.jobName, message.data as object), progress);
      if (job.id !== undefined) record(message, jobRef(target.shard, job.id, shardCount), triedAtMs);
    }
    await flush();
  }
}

/** Every worker process consumes every shard: the first shard's worker count says who is up. */
function waitForWorkers(queue: Queue, fleet: ChaosFleet, timeoutMs: number, signal: AbortSignal): Promise<void> {
  return waitForWorkersConnected(
    fleet.workers.map((w) => w.process),
    () => queue.getWorkersCount(),
    timeoutMs,
    signal,
  );
}

/**
 * The failovers' targets on a cluster run: a lossy failover only hits slot groups holding no
 * queue shard (BullMQ's own acknowledged writes would be lost with the lock's: see
 * docs/verification/chaos.md), a killed master any group.
 */
function clusterTargets(services: ChaosServices, queues: TransferQueues, lockKeyPrefix: string): ClusterTargets | null {
  const cluster = services.cluster;
  if (cluster === null) return null;
  const fronts = services.fronts;
  const queueSlots = queues.shards.map(({ shard }) => keySlot(`${shard.prefix}:${shard.name}:meta`));
  return {
    faults: new ClusterFaults(
      cluster,
      (i) => {
        const front = fronts[i];
        if (front === undefined) throw new RangeError(`no proxy in front of node ${i}`);
        return front;
      },
      lockKeyPrefix,
    ),
    lossyGroups: cluster.groups.filter((g) => !queueSlots.some((slot) => slot >= g.fromSlot && slot <= g.toSlot)),
    allGroups: cluster.groups,
  };
}

export function commandLine(argv: readonly string[]): string {
  return ['npm run chaos --', ...argv].join(' ');
}

export async function runChaos(
  options: ChaosOptions,
  argv: readonly string[],
  log: Log,
  stop?: AbortSignal,
): Promise<RunResult> {
  const startedAt = new Date();
  const tStart = performance.now();
  const outDir = options.out;
  mkdirSync(outDir, { recursive: true });
  const registry = new ProcessRegistry(join(outDir, 'processes.json'));
  registry.update({});
  const history = new History(join(outDir, 'history.ndjson'), tStart, Date.now());
  history.write({ type: 'run_start', seed: options.seed, options });

  const schedule = buildSchedule(options.seed, options);
  const workload = buildWorkload(options);
  if (workload.openingBalanceMinor > SEED_BALANCE_MAX)
    throw new RangeError(
      'the workload needs opening balances above the seed maximum; lower --transfers or --amount-max',
    );
  writeFileSync(join(outDir, 'schedule.json'), `${JSON.stringify(schedule, null, 2)}\n`);

  const suffix = options.redisUrl === null ? '' : `-${Math.random().toString(16).slice(2, 10)}`;
  const names = { queueName: `chaos-${options.seed}${suffix}`, lockKeyPrefix: `chaos${suffix.replace('-', '.')}:` };
  const sharding = { queueName: names.queueName, queueShards: options.queueShards };
  const progress: Progress = {
    phase: 'set-up',
    enqueued: 0,
    producerRetries: 0,
    queue: null,
    faults: 0,
    lastFault: '',
  };

  let services: ChaosServices | null = null;
  let fleet: ChaosFleet | null = null;
  let queues: TransferQueues | null = null;
  const queueEvents: QueueEvents[] = [];
  const connections: RedisClient[] = [];
  let prisma: PrismaClient | null = null;
  let ticker: NodeJS.Timeout | null = null;
  const phaseAbort = new AbortController();
  const onStop = () => phaseAbort.abort();
  stop?.addEventListener('abort', onStop, { once: true });

  try {
    log(
      `chaos seed ${options.seed}: ${workload.messages.length} messages (${workload.operations.size} operations), ` +
        `${schedule.length} faults scheduled, ${options.workers} workers, out ${outDir}`,
    );
    services = await ChaosServices.start(
      {
        redis: options.redis,
        redisUrl: options.redisUrl,
        databaseUrl: options.databaseUrl,
        seed: options.seed,
        runDir: outDir,
      },
      registry,
    );
    history.write({
      type: 'phase',
      phase: 'services',
      detail: { ownsRedis: services.ownsRedis, ownsPostgres: services.ownsPostgres },
    });

    prisma = createPrisma(dbConfig(services.databaseUrl));
    await seedWallets(prisma, {
      wallets: options.wallets,
      balanceMinor: workload.openingBalanceMinor,
      prefix: WALLET_PREFIX,
      currency: CURRENCY,
    });
    // The harness's own sessions must not be among those terminate-backends ends: close them now.
    await prisma.$disconnect();
    prisma = null;

    const redisTarget = services.redisTarget;
    const shardingConfig = { ...sharding, redisCluster: redisTarget.redisCluster };
    const queueConnection = bullmqConnection(redisTarget);
    queueConnection.on('error', () => undefined);
    connections.push(queueConnection);
    queues = TransferQueues.open(queueConnection, shardingConfig, CHAOS_JOB_ATTEMPTS_MAX);
    for (const q of queues.queues) q.on('error', () => undefined);
    const eventsConnection = bullmqConnection(redisTarget);
    eventsConnection.on('error', () => undefined);
    connections.push(eventsConnection);
    const shardCount = queues.shards.length;
    for (const { shard } of queues.shards) {
      const events = new QueueEvents(shard.name, { connection: eventsConnection, prefix: shard.prefix });
      queueEvents.push(events);
      const ref = (jobId: string) => jobRef(shard, jobId, shardCount);
      events.on('error', () => undefined);
      events.on('active', ({ jobId, prev }) =>
        history.write({ type: 'job_active', jobId: ref(jobId), ...(prev === undefined ? {} : { prev }) }),
      );
      events.on('completed', ({ jobId, returnvalue }) => {
        const v = returnvalue as unknown;
        const outcome =
          typeof v === 'object' && v !== null && 'outcome' in v
            ? String((v as { outcome: unknown }).outcome)
            : typeof v === 'string'
              ? (/"outcome":"(\w+)"/.exec(v)?.[1] ?? v.slice(0, 40))
              : 'unknown';
        history.write({ type: 'job_completed', jobId: ref(jobId), outcome });
      });
      events.on('failed', ({ jobId, failedReason }) =>
        history.write({ type: 'job_failed', jobId: ref(jobId), reason: failedReason }),
      );
      events.on('stalled', ({ jobId }) => history.write({ type: 'job_stalled', jobId: ref(jobId) }));
      await events.waitUntilReady();
    }

    const directRedis = services.redisClient();
    connections.push(directRedis);
    fleet = await ChaosFleet.create(options, services, names, join(outDir, 'workers'));
    fleet.startAll();
    registry.update({ workerPids: fleet.pids() });
    const interrupted = stop ?? new AbortController().signal;
    await waitForWorkers(queues.queues[0] as Queue, fleet, WORKERS_READY_TIMEOUT_MS, interrupted);
    const sent = new Map<string, ChaosMessage>();
    const warmUp = workload.messages.slice(0, Math.min(WARM_UP_MESSAGES, Math.floor(workload.messages.length / 10)));
    await enqueuePaced(queues, warmUp, 0, history, sent, progress, interrupted);
    await waitForDrain(queues.queues, WARM_UP_TIMEOUT_MS, undefined, interrupted);
    history.write({ type: 'phase', phase: 'warmed-up', detail: { messages: warmUp.length } });
    const setupMs = performance.now() - tStart;

    // The fault phase.
    history.setOrigin(performance.now(), Date.now());
    history.write({ type: 'phase', phase: 'faults', detail: { durationS: options.durationS } });
    progress.phase = 'faults';
    const currentFleet = fleet;
    const injector = new FaultInjector(
      fleet,
      services,
      directRedis,
      names.lockKeyPrefix,
      history,
      () => {
        progress.faults = injector.records.length;
        const last = injector.records.at(-1);
        progress.lastFault = last === undefined ? '' : last.detail;
        registry.update({ workerPids: currentFleet.pids() });
      },
      clusterTargets(services, queues, names.lockKeyPrefix),
    );
    const statusQueue = queues.queues;
    const tty = process.stderr.isTTY === true;
    let ticks = 0;
    ticker = setInterval(() => {
      ticks += 1;
      void queueProgress(statusQueue).then(
        (p) => {
          progress.queue = p;
        },
        () => undefined,
      );
      if (options.quiet || (!tty && ticks % 5 !== 0)) return;
      const q = progress.queue;
      const line =
        `[chaos ${options.seed}] ${progress.phase} t=${Math.round(history.nowMs() / 1000)}s sent ${progress.enqueued}/${workload.messages.length}` +
        (q === null
          ? ''
          : ` done ${q.completed} failed ${q.failed} active ${q.active} waiting ${q.waiting + q.prioritized} delayed ${q.delayed}`) +
        ` faults ${progress.faults}/${schedule.length}${progress.lastFault === '' ? '' : ` (last: ${progress.lastFault.slice(0, 60)})`}`;
      process.stderr.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
    }, PROGRESS_INTERVAL_MS);

    const phaseMs = options.durationS * 1000;
    const phaseTimer = setTimeout(() => phaseAbort.abort(), phaseMs);
    const firstTryMs = new Map<string, number>();
    const enqueueing = enqueuePaced(
      queues,
      workload.messages.slice(warmUp.length),
      phaseMs * ENQUEUE_SHARE,
      history,
      sent,
      progress,
      interrupted,
      firstTryMs,
    );
    // Awaited after the fault phase; until then a failure must not count as unhandled.
    enqueueing.catch(() => undefined);
    await injector.run(schedule, phaseAbort.signal);
    if (!phaseAbort.signal.aborted) {
      await new Promise<void>((resolve) =>
        phaseAbort.signal.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
    clearTimeout(phaseTimer);
    await injector.healAll();
    await enqueueing;
    if (interrupted.aborted) throw new Error('interrupted');
    const faultPhaseMs = history.nowMs();
    history.write({ type: 'phase', phase: 'drain' });
    progress.phase = 'drain';

    // Drain, bounded: a queue that does not drain is itself a failure.
    const tDrain = performance.now();
    let drained = { ok: true, detail: '' };
    try {
      await waitForDrain(
        queues.queues,
        options.drainTimeoutS * 1000,
        (p) => {
          progress.queue = p;
        },
        interrupted,
      );
    } catch (err) {
      if (interrupted.aborted) throw err;
      drained = { ok: false, detail: err instanceof Error ? err.message : String(err) };
    }
    const drainMs = performance.now() - tDrain;
    clearInterval(ticker);
    ticker = null;
    if (tty && !options.quiet) process.stderr.write('\n');
    progress.phase = 'check';
    history.write({ type: 'phase', phase: 'check', detail: drained });
    const proxies = fleet.proxyStats();
    await fleet.stopAll();

    const tCheck = performance.now();
    // The workers' counters as they flushed them (a worker copies them as it stops; one killed
    // by a fault lost at most its last second of counts).
    const metrics = transferCounterSummary(
      await readCounterTotals(directRedis, aggregateKeys(names.lockKeyPrefix, names.queueName)),
    );
    const jobs = await readFinalJobs(queues);
    for (const j of jobs) {
      const message = sent.get(j.jobId);
      history.write({
        type: 'final',
        jobId: j.jobId,
        state: j.state,
        operationId: message?.operationId ?? null,
        outcome: answerOf(j),
        ...(j.failedReason === null ? {} : { reason: j.failedReason.slice(0, 200) }),
        attemptsMade: j.attemptsMade,
        attemptsStarted: j.attemptsStarted,
        enqueuedAtMs: history.offsetOfWallMs(j.timestamp),
        finishedAtMs: j.finishedOn === null ? null : history.offsetOfWallMs(j.finishedOn),
      });
    }
    prisma = createPrisma(dbConfig(services.databaseUrl));
    const { checks, totals } = await runChecks(prisma, { workload, sent, jobs, drained });
    attachFaultLoads(injector.records, jobs, sent, history, firstTryMs);
    await attachRecovery(
      injector.records,
      join(outDir, 'workers'),
      history.origin.t0WallMs,
      directRedis,
      names.lockKeyPrefix,
    );
    for (const c of checks)
      history.write({ type: 'check', name: c.name, ok: c.ok, counterexamples: [...c.counterexamples] });
    const checkMs = performance.now() - tCheck;

    const answers: Record<string, number> = {};
    for (const j of jobs) answers[answerOf(j)] = (answers[answerOf(j)] ?? 0) + 1;
    const latencies = jobs
      .filter((j) => j.finishedOn !== null && j.state === 'completed')
      .map((j) => (j.finishedOn as number) - j.timestamp)
      .sort((a, b) => a - b);
    const perSecond = new Map<number, number>();
    for (const j of jobs) {
      if (answerOf(j) === 'applied' && j.finishedOn !== null) {
        const s = Math.floor(history.offsetOfWallMs(j.finishedOn) / 1000);
        perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
      }
    }
    const appliedTotal = [...perSecond.values()].reduce((a, b) => a + b, 0);
    const activeSeconds = Math.max(
      1,
      perSecond.size === 0 ? 1 : Math.max(...perSecond.keys()) - Math.min(...perSecond.keys()) + 1,
    );
    const invalidIds = new Set([...sent].filter(([, m]) => m.kind === 'invalid').map(([id]) => id));
    const verdict = judge(options, checks);
    const figures: RunFigures = {
      seed: options.seed,
      startedAt: startedAt.toISOString(),
      command: commandLine(argv),
      mode: { unsafe: options.unsafe, apply: options.apply, redis: options.redis, queueShards: options.queueShards },
      options: { ...options },
      verdict,
      durationMs: {
        total: Math.round(performance.now() - tStart),
        setup: Math.round(setupMs),
        faultPhase: faultPhaseMs,
        drain: Math.round(drainMs),
        check: Math.round(checkMs),
      },
      messages: messageFigures(workload),
      jobs: jobFigures(jobs, new Set(sent.keys()), invalidIds),
      ledger: totals,
      answers,
      metrics,
      producerRetries: progress.producerRetries,
      workerLogEvents: countWorkerLogEvents(join(outDir, 'workers')),
      faults: faultFigures(schedule.length, injector.records),
      latencyMs: {
        p50: quantile(latencies, 0.5),
        p95: quantile(latencies, 0.95),
        p99: quantile(latencies, 0.99),
        max: latencies.at(-1) ?? 0,
      },
      appliedPerSecond: { mean: appliedTotal / activeSeconds, peak: Math.max(0, ...perSecond.values()) },
      checks,
      proxies,
    };

    let chartFile: string | null = 'timeline.svg';
    try {
      const svg = await renderTimelineSvg({
        title:
          `chaos seed ${options.seed} — ${options.redis === 'cluster' ? 'Redis Cluster, ' : ''}apply ${options.apply}, ` +
          `unsafe ${options.unsafe ?? 'none'}: ${verdict.pass ? 'PASS' : 'FAIL'}`,
        jobs,
        faults: injector.records,
        t0WallMs: history.origin.t0WallMs,
        faultPhaseEndS: faultPhaseMs / 1000,
      });
      writeFileSync(join(outDir, chartFile), svg);
    } catch (err) {
      log(`chart not drawn: ${err instanceof Error ? err.message : String(err)}`);
      chartFile = null;
    }
    writeFileSync(join(outDir, 'report.json'), `${JSON.stringify(figures, null, 2)}\n`);
    writeFileSync(join(outDir, 'report.md'), renderMarkdown(figures, chartFile));
    history.write({ type: 'run_end', verdict: verdict.pass ? 'pass' : 'fail', durationMs: figures.durationMs.total });
    return { figures, outDir, pass: verdict.pass };
  } finally {
    stop?.removeEventListener('abort', onStop);
    if (ticker !== null) clearInterval(ticker);
    await prisma?.$disconnect().catch(() => undefined);
    await fleet?.stopAll().catch(() => undefined);
    await fleet?.closeProxies().catch(() => undefined);
    registry.update({ workerPids: [] });
    if (services !== null && !services.ownsRedis && queues !== null) {
      // A server we do not own keeps nothing of ours: the queues and every key under our prefix go.
      for (const q of queues.queues)
        await q
          .obliterate({ force: true })
          .catch((err: unknown) => log(`could not remove queue ${q.name}: ${String(err)}`));
      const cleaner = services.redisClient();
      await deleteMatching(cleaner, `${names.lockKeyPrefix}*`).catch((err: unknown) =>
        log(`could not remove keys ${names.lockKeyPrefix}*: ${String(err)}`),
      );
      cleaner.disconnect();
    }
    for (const events of queueEvents) await events.close().catch(() => undefined);
    await queues?.close().catch(() => undefined);
    for (const c of connections) c.disconnect();
    await services?.stop().catch(() => undefined);
    await history.close();
  }
}
