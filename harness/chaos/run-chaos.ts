// One chaos run, start to end: private services, seeded wallets, a fleet of worker processes
// behind fault proxies, the workload enqueued at a steady pace while the schedule's faults are
// injected, then heal, drain (bounded), check and report. Everything it started is stopped
// and removed at the end (chaos-resources.ts), also when it fails or is interrupted.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import pg from 'pg';
import { createPrisma } from '../../src/db/prisma.ts';
import { SEED_BALANCE_MAX, seedWallets } from '../../src/ledger/seed-wallets.ts';
import { keySlot } from '../../src/lock/key-slot.ts';
import { aggregateKeys, readCounterTotals, transferCounterSummary } from '../../src/metrics/counter-aggregate.ts';
import { TransferQueues } from '../../src/queue/producer.ts';
import { queueProgress, waitForDrain } from '../../src/queue/queue-drain.ts';
import { bullmqConnection, type RedisClient } from '../../src/queue/redis-connection.ts';
import { waitForWorkersConnected } from '../fleet/worker-processes.ts';
import { enqueuePaced, type Progress } from './chaos-enqueue.ts';
import { answerCounts, appliedPerSecond, latencyFigures, writeReportFiles } from './chaos-figures.ts';
import { CHAOS_JOB_ATTEMPTS_MAX, ChaosFleet, type FleetNames } from './chaos-fleet.ts';
import {
  type IntakeProducerFigures,
  intakeProducerFigures,
  type RefusedRequest,
  requestPaced,
  waitForIntakeDecided,
} from './chaos-intake.ts';
import {
  fenceIncrementsBehind,
  type LockMeasures,
  type LockServiceTargets,
  openRunLockEpoch,
  startHoldWatch,
} from './chaos-lock.ts';
import { ASYNC_STANDBY, type ChaosOptions, DIRECT_ENQUEUE, usesUnsafeDecisions } from './chaos-options.ts';
import { readFinalJobs, watchQueueEvents } from './chaos-queues.ts';
import { ChaosRelays } from './chaos-relays.ts';
import { ChaosResources } from './chaos-resources.ts';
import { ChaosServices, ProcessRegistry } from './chaos-services.ts';
import {
  buildWorkload,
  type ChaosMessage,
  type ChaosWorkload,
  CURRENCY,
  pairSafeEnd,
  WALLET_PREFIX,
} from './chaos-workload.ts';
import type { CheckResult } from './check-result.ts';
import { type CheckOutput, runChecks } from './checker.ts';
import { ClusterFaults } from './cluster-faults.ts';
import { etcdQuorumCheck } from './etcd-faults.ts';
import { attachFaultLoads, attachRecovery } from './fault-load.ts';
import { type ClusterTargets, FaultInjector, type FaultRecord } from './faults.ts';
import { type FeedReaderFigures, FeedReaders } from './feed-readers.ts';
import type { FinalJob } from './final-job.ts';
import { History } from './history.ts';
import { runIntakeChecks } from './intake-checks.ts';
import type { IntakeFigures } from './intake-figures.ts';
import { blackholeCheck } from './pg-blackhole.ts';
import { PgFaults } from './pg-faults.ts';
import { PgFleetWatch, pgFleetCheck } from './pg-fleet-watch.ts';
import { acknowledgedAnswersCheck, attachWriteOutages, formationFaultsCheck } from './pg-outage.ts';
import {
  answerOf,
  countWorkerLogEvents,
  faultFigures,
  jobFigures,
  judge,
  messageFigures,
  type RunFigures,
} from './report.ts';
import { buildSchedule, type FaultEvent } from './schedule.ts';

export const WORKERS_READY_TIMEOUT_MS = 60_000;
export const PROGRESS_INTERVAL_MS = 1_000;
/**
 * Messages sent before the clock starts, and waited for: the first transfer of a fresh worker
 * process is slow (module loading, first connections), and a cold fleet would otherwise open
 * the run with lock losses and a backlog that says nothing about faults.
 */
export const WARM_UP_MESSAGES = 40;
export const WARM_UP_TIMEOUT_MS = 60_000;
/** After the drain: how long the sweep may take to release every hold that expires within the run. */
export const HOLDS_WAIT_MS = 60_000;
const HOLDS_POLL_MS = 250;

export interface RunResult {
  readonly figures: RunFigures;
  readonly outDir: string;
  readonly pass: boolean;
}

type Log = (line: string) => void;

/** What the run is and where it writes, fixed before anything starts. */
interface RunPlan {
  readonly options: ChaosOptions;
  readonly argv: readonly string[];
  readonly log: Log;
  readonly startedAt: Date;
  readonly tStart: number;
  readonly outDir: string;
  readonly registry: ProcessRegistry;
  readonly history: History;
  readonly schedule: readonly FaultEvent[];
  readonly workload: ChaosWorkload;
  readonly names: FleetNames;
  readonly progress: Progress;
  /** The caller's stop signal (never aborted without one). */
  readonly interrupted: AbortSignal;
  /** jobId → the message sent under it. */
  readonly sent: Map<string, ChaosMessage>;
  /** Intake runs: the operations acknowledged to the producer, and what its intake transactions did. */
  readonly acknowledged: Set<string>;
  /** Intake runs: operations whose intake transaction committed (with their bodies' hashes), and the requests refused at once. */
  readonly requested: Map<string, Set<string>>;
  readonly refused: RefusedRequest[];
  readonly intakeProducer: IntakeProducerFigures;
}

/** What set-up started, for the later steps. */
interface Rig {
  readonly services: ChaosServices;
  readonly queues: TransferQueues;
  /** A harness connection straight to Redis (not through a proxy). */
  readonly directRedis: RedisClient;
  readonly fleet: ChaosFleet;
  /** Intake runs: the relays (none with direct-enqueue) and the producer's pool. */
  readonly relays: ChaosRelays | null;
  readonly producerPool: pg.Pool | null;
  /** Intake runs: the outcome feed's readers, reading while the run goes on. */
  readonly feedReaders: FeedReaders | null;
}

interface FaultPhase {
  readonly injector: FaultInjector;
  /** jobId → when the producer first tried to send it, for the fault phase's messages. */
  readonly firstTryMs: Map<string, number>;
  readonly faultPhaseMs: number;
}

interface Drain {
  readonly drained: { ok: boolean; detail: string };
  readonly drainMs: number;
  readonly lock: LockMeasures;
}

interface Checked extends CheckOutput {
  readonly proxies: RunFigures['proxies'];
  readonly metrics: RunFigures['metrics'];
  readonly jobs: FinalJob[];
  readonly checkMs: number;
  readonly intake: IntakeFigures | null;
  readonly feedReaders: FeedReaderFigures | null;
}

function dbConfig(databaseUrl: string) {
  return {
    databaseUrl,
    databasePooler: 'none' as const,
    dbPoolMax: 4,
    dbStatementTimeoutMs: 60_000,
    dbLockTimeoutMs: 10_000,
    dbIdleInTransactionTimeoutMs: 60_000,
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
  const plan = planRun(options, argv, log, stop);
  const owned = new ChaosResources(plan.registry, plan.history, plan.names, log);
  // Ends the fault phase: its timer, or the caller's stop.
  const phaseAbort = new AbortController();
  const onStop = () => phaseAbort.abort();
  stop?.addEventListener('abort', onStop, { once: true });
  try {
    log(
      `chaos seed ${options.seed}: ${plan.workload.messages.length} messages (${plan.workload.operations.size} operations), ` +
        `${plan.schedule.length} faults scheduled, ${options.workers} workers, out ${plan.outDir}`,
    );
    const rig = await setUp(plan, owned);
    const warmUpCount = await warmUp(plan, rig);
    const setupMs = performance.now() - plan.tStart;
    const faults = await runFaultPhase(plan, rig, owned, warmUpCount, phaseAbort);
    const drain = await drainQueues(plan, rig, owned);
    const checked = await check(plan, rig, owned, faults, drain);
    return await report(plan, setupMs, faults, drain, checked);
  } finally {
    stop?.removeEventListener('abort', onStop);
    await owned.close();
  }
}

/** Creates the output folder, the history, the schedule and the workload; starts nothing. */
function planRun(options: ChaosOptions, argv: readonly string[], log: Log, stop: AbortSignal | undefined): RunPlan {
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
  const progress: Progress = {
    phase: 'set-up',
    enqueued: 0,
    producerRetries: 0,
    queue: null,
    faults: 0,
    lastFault: '',
  };
  const interrupted = stop ?? new AbortController().signal;
  return {
    options,
    argv,
    log,
    startedAt,
    tStart,
    outDir,
    registry,
    history,
    schedule,
    workload,
    names,
    progress,
    interrupted,
    sent: new Map(),
    acknowledged: new Set(),
    requested: new Map(),
    refused: [],
    intakeProducer: intakeProducerFigures(),
  };
}

/** Services, seeded wallets, the queues and their events, and the fleet, connected. */
async function setUp(plan: RunPlan, owned: ChaosResources): Promise<Rig> {
  const { options, outDir, registry, history, names } = plan;
  const services = await ChaosServices.start(
    {
      redis: options.redis,
      redisUrl: options.redisUrl,
      databaseUrl: options.databaseUrl,
      seed: options.seed,
      runDir: outDir,
      pgbouncer: options.pgbouncer,
      postgres: options.postgres,
      asyncStandby: options.unsafe === ASYNC_STANDBY,
      unsafeDecisions: usesUnsafeDecisions(options),
      withoutLimitCheck: options.unsafe === 'no-credit-limit',
      withoutClosedCheck: options.unsafe === 'no-wallet-status',
      lock: options.lock,
    },
    registry,
  );
  owned.services = services;
  history.write({
    type: 'phase',
    phase: 'services',
    detail: { ownsRedis: services.ownsRedis, ownsPostgres: services.ownsPostgres },
  });
  await seed(plan, services, owned);
  const queues = await openQueues(plan, services, owned);
  const directRedis = services.redisClient();
  owned.connections.push(directRedis);
  const fleet = await ChaosFleet.create(options, services, names, join(outDir, 'workers'));
  owned.fleet = fleet;
  fleet.startAll();
  registry.update({ workerPids: fleet.pids() });
  await waitForWorkers(queues.queues[0] as Queue, fleet, WORKERS_READY_TIMEOUT_MS, plan.interrupted);
  let relays: ChaosRelays | null = null;
  let producerPool: pg.Pool | null = null;
  let feedReaders: FeedReaders | null = null;
  if (options.intake) {
    feedReaders = await FeedReaders.start(services.databaseUrl, options.seed);
    owned.feedReaders = feedReaders;
    producerPool = new pg.Pool({ connectionString: services.databaseUrl, max: 2, application_name: 'chaos-producer' });
    producerPool.on('error', () => undefined);
    owned.producerPool = producerPool;
    if (options.relays > 0) {
      relays = await ChaosRelays.create(options, services, names, join(outDir, 'relays'));
      owned.relays = relays;
      relays.startAll();
      registry.update({ workerPids: [...fleet.pids(), ...relays.pids()] });
    }
  }
  return { services, queues, directRedis, fleet, relays, producerPool, feedReaders };
}

async function seed(plan: RunPlan, services: ChaosServices, owned: ChaosResources): Promise<void> {
  owned.prisma = createPrisma(dbConfig(services.databaseUrl));
  await seedWallets(owned.prisma, {
    wallets: plan.options.wallets,
    balanceMinor: plan.workload.openingBalanceMinor,
    prefix: WALLET_PREFIX,
    currency: CURRENCY,
  });
  // The credit wallets and the limit wallets: a balance of 0 and their group's limit.
  for (const group of plan.workload.credit.groups) {
    await seedWallets(owned.prisma, {
      wallets: group.count,
      balanceMinor: 0n,
      creditLimitMinor: group.creditLimitMinor,
      prefix: group.prefix,
      currency: CURRENCY,
    });
  }
  // The harness's own sessions must not be among those terminate-backends ends: close them now.
  await owned.prisma.$disconnect();
  owned.prisma = null;
  // A worker refuses to start in an epoch of another backend: a postgres or etcd run opens its own first.
  const epoch = await openRunLockEpoch(services.databaseUrl, plan.options.lock);
  plan.history.write({ type: 'phase', phase: 'lock', detail: { backend: plan.options.lock, epoch } });
}

/** The run's queues on one connection, and their events (into the history) on another. */
async function openQueues(plan: RunPlan, services: ChaosServices, owned: ChaosResources): Promise<TransferQueues> {
  const redisTarget = services.redisTarget;
  const sharding = { queueName: plan.names.queueName, queueShards: plan.options.queueShards };
  const shardingConfig = { ...sharding, redisCluster: redisTarget.redisCluster };
  const queueConnection = bullmqConnection(redisTarget);
  queueConnection.on('error', () => undefined);
  owned.connections.push(queueConnection);
  const queues = TransferQueues.open(queueConnection, shardingConfig, CHAOS_JOB_ATTEMPTS_MAX);
  owned.queues = queues;
  for (const q of queues.queues) q.on('error', () => undefined);
  const eventsConnection = bullmqConnection(redisTarget);
  eventsConnection.on('error', () => undefined);
  owned.connections.push(eventsConnection);
  await watchQueueEvents(queues, eventsConnection, plan.history, owned.queueEvents);
  return queues;
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

/** Sends the first messages and waits for them; resolves with how many it sent. */
async function warmUp(plan: RunPlan, rig: Rig): Promise<number> {
  const { workload, history, sent, progress, interrupted } = plan;
  if (plan.options.intake) return warmUpIntake(plan, rig);
  const messages = workload.messages.slice(0, Math.min(WARM_UP_MESSAGES, Math.floor(workload.messages.length / 10)));
  await enqueuePaced(rig.queues, messages, 0, { history, sent, progress }, interrupted);
  await waitForDrain(rig.queues.queues, WARM_UP_TIMEOUT_MS, undefined, interrupted);
  history.write({ type: 'phase', phase: 'warmed-up', detail: { messages: messages.length } });
  return messages.length;
}

/** The valid messages an intake run sends in its warm-up (the rest go in the fault phase). */
function intakeWarmUpCount(workload: ChaosWorkload): number {
  const valid = workload.messages.filter((m) => m.kind !== 'invalid');
  return pairSafeEnd(valid, Math.min(WARM_UP_MESSAGES, Math.floor(valid.length / 10)));
}

/**
 * An intake run's warm-up: every hostile message straight onto the queue (they never go through
 * the intake, and a lossy failover of a queue shard later must not take their failed jobs with
 * it: they are answered before the faults), and the first valid ones through the producer.
 */
async function warmUpIntake(plan: RunPlan, rig: Rig): Promise<number> {
  const { workload, history, sent, progress, interrupted, acknowledged } = plan;
  const invalid = workload.messages.filter((m) => m.kind === 'invalid');
  const valid = workload.messages.filter((m) => m.kind !== 'invalid').slice(0, intakeWarmUpCount(workload));
  await enqueuePaced(rig.queues, invalid, 0, { history, sent, progress }, interrupted);
  await sendValid(plan, rig, valid, 0, undefined);
  if (rig.producerPool !== null && plan.options.unsafe !== DIRECT_ENQUEUE) {
    await waitForIntakeDecided(rig.producerPool, WARM_UP_TIMEOUT_MS, interrupted);
  }
  await waitForDrain(rig.queues.queues, WARM_UP_TIMEOUT_MS, undefined, interrupted);
  history.write({
    type: 'phase',
    phase: 'warmed-up',
    detail: { messages: invalid.length + valid.length, acknowledged: acknowledged.size },
  });
  return valid.length;
}

/** An intake run's valid messages: through the intake, or (direct-enqueue) straight to BullMQ. */
function sendValid(
  plan: RunPlan,
  rig: Rig,
  messages: readonly ChaosMessage[],
  windowMs: number,
  firstTryMs: Map<string, number> | undefined,
): Promise<void> {
  const { history, sent, progress, interrupted, acknowledged, requested, refused } = plan;
  const to = { history, sent, progress, acknowledged, ...(firstTryMs === undefined ? {} : { firstTryMs }) };
  if (plan.options.unsafe === DIRECT_ENQUEUE || rig.producerPool === null) {
    return enqueuePaced(rig.queues, messages, windowMs, to, interrupted);
  }
  return requestPaced(
    rig.producerPool,
    rig.queues,
    messages,
    windowMs,
    { ...to, requested, refused, intake: plan.intakeProducer },
    interrupted,
  );
}

/**
 * The schedule's faults while the rest of the workload is enqueued over the whole phase (so that
 * every fault window meets transfers in flight: the report counts them per fault); then heal.
 */
async function runFaultPhase(
  plan: RunPlan,
  rig: Rig,
  owned: ChaosResources,
  warmUpCount: number,
  phaseAbort: AbortController,
): Promise<FaultPhase> {
  const { options, history, sent, progress, interrupted } = plan;
  history.setOrigin(performance.now(), Date.now());
  history.write({ type: 'phase', phase: 'faults', detail: { durationS: options.durationS } });
  progress.phase = 'faults';
  const injector = faultInjector(plan, rig);
  owned.ticker = startProgressTicker(plan, rig.queues);
  const { lock, lockTtlMs } = options;
  owned.holdWatch = await startHoldWatch(lock, lockTargets(plan, rig), lockTtlMs);

  const phaseMs = options.durationS * 1000;
  const phaseTimer = setTimeout(() => phaseAbort.abort(), phaseMs);
  const firstTryMs = new Map<string, number>();
  const enqueueing = options.intake
    ? sendValid(
        plan,
        rig,
        plan.workload.messages.filter((m) => m.kind !== 'invalid').slice(warmUpCount),
        phaseMs,
        firstTryMs,
      )
    : enqueuePaced(
        rig.queues,
        plan.workload.messages.slice(warmUpCount),
        phaseMs,
        { history, sent, progress, firstTryMs },
        interrupted,
      );
  // Awaited after the fault phase; until then a failure must not count as unhandled.
  enqueueing.catch(() => undefined);
  await injector.run(plan.schedule, phaseAbort.signal);
  if (!phaseAbort.signal.aborted) {
    await new Promise<void>((resolve) => phaseAbort.signal.addEventListener('abort', () => resolve(), { once: true }));
  }
  clearTimeout(phaseTimer);
  await injector.healAll();
  await enqueueing;
  if (interrupted.aborted) throw new Error('interrupted');
  return { injector, firstTryMs, faultPhaseMs: history.nowMs() };
}

function faultInjector(plan: RunPlan, rig: Rig): FaultInjector {
  const { fleet, services, queues, directRedis } = rig;
  const { names, history, progress, registry, options } = plan;
  const injector: FaultInjector = new FaultInjector(
    fleet,
    services,
    directRedis,
    names.lockKeyPrefix,
    history,
    () => {
      progress.faults = injector.records.length;
      const last = injector.records.at(-1);
      progress.lastFault = last === undefined ? '' : last.detail;
      registry.update({ workerPids: [...fleet.pids(), ...(rig.relays?.pids() ?? [])] });
    },
    clusterTargets(services, queues, names.lockKeyPrefix, options.intake),
    options.lockTtlMs,
    rig.relays,
    services.ha === null
      ? null
      : new PgFaults(services.ha.formation, services.ha.endpoint, options.unsafe === ASYNC_STANDBY, () =>
          PgFleetWatch.start(
            fleet.workers.map((w) => ({ index: w.index, readyStatus: () => w.process.readyStatus() })),
            directRedis,
            names.lockKeyPrefix,
            options.lockTtlMs,
          ),
        ),
  );
  return injector;
}

/**
 * The failovers' targets on a cluster run: a lossy failover only hits slot groups holding no
 * queue shard (BullMQ's own acknowledged writes would be lost with the lock's: see
 * docs/verification/chaos.md), a killed master any group. In an intake run a lossy failover may
 * hit any group, and the schedule aims the first at a queue shard's.
 */
function clusterTargets(
  services: ChaosServices,
  queues: TransferQueues,
  lockKeyPrefix: string,
  intake: boolean,
): ClusterTargets | null {
  const cluster = services.cluster;
  if (cluster === null) return null;
  const fronts = services.fronts;
  const bases = queues.shards.map(({ shard }) => `${shard.prefix}:${shard.name}`);
  const queueSlots = bases.map((base) => keySlot(`${base}:meta`));
  const inGroup = (slot: number, g: { fromSlot: number; toSlot: number }) => slot >= g.fromSlot && slot <= g.toSlot;
  const queueGroups = cluster.groups.filter((g) => queueSlots.some((slot) => inGroup(slot, g)));
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
    lossyGroups: intake ? cluster.groups : cluster.groups.filter((g) => !queueGroups.includes(g)),
    allGroups: cluster.groups,
    queueGroups,
    queueKeyBasesOf: (g) => bases.filter((_, i) => inGroup(queueSlots[i] as number, g)),
  };
}

/** Every PROGRESS_INTERVAL_MS: refresh the queue counts; on a terminal redraw the line, else print every 5th. */
function startProgressTicker(plan: RunPlan, queues: TransferQueues): NodeJS.Timeout {
  const { options, progress } = plan;
  const statusQueue = queues.queues;
  const tty = process.stderr.isTTY === true;
  let ticks = 0;
  return setInterval(() => {
    ticks += 1;
    void queueProgress(statusQueue).then(
      (p) => {
        progress.queue = p;
      },
      () => undefined,
    );
    if (options.quiet || (!tty && ticks % 5 !== 0)) return;
    const line = progressLine(plan);
    process.stderr.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
  }, PROGRESS_INTERVAL_MS);
}

function progressLine(plan: RunPlan): string {
  const { options, progress, history, workload, schedule } = plan;
  const q = progress.queue;
  return (
    `[chaos ${options.seed}] ${progress.phase} t=${Math.round(history.nowMs() / 1000)}s sent ${progress.enqueued}/${workload.messages.length}` +
    (q === null
      ? ''
      : ` done ${q.completed} failed ${q.failed} active ${q.active} waiting ${q.waiting + q.prioritized} delayed ${q.delayed}`) +
    ` faults ${progress.faults}/${schedule.length}${progress.lastFault === '' ? '' : ` (last: ${progress.lastFault.slice(0, 60)})`}`
  );
}

/** Drain, bounded: a queue that does not drain is itself a failure (a check), not an error. */
async function drainQueues(plan: RunPlan, rig: Rig, owned: ChaosResources): Promise<Drain> {
  const { options, history, progress, interrupted } = plan;
  history.write({ type: 'phase', phase: 'drain' });
  progress.phase = 'drain';
  const tDrain = performance.now();
  let drained = { ok: true, detail: '' };
  try {
    // An intake run waits for every request to be decided first: a lost add comes back only
    // when a relay sends it again, INTAKE_RESEND_AFTER_MS after its last send.
    if (rig.producerPool !== null && rig.relays !== null) {
      await waitForIntakeDecided(rig.producerPool, options.drainTimeoutS * 1000, interrupted);
    }
    await waitForDrain(
      rig.queues.queues,
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
  // Holds left to expire are released by the workers' sweep: wait for it (bounded; one still
  // active past its expiry then fails a check), while the workers still run.
  if (options.payments) {
    progress.phase = 'holds';
    await waitForHoldsEnded(rig.services.databaseUrl, HOLDS_WAIT_MS, interrupted);
  }
  const drainMs = performance.now() - tDrain;
  owned.stopTicker();
  if (process.stderr.isTTY === true && !options.quiet) process.stderr.write('\n');
  return { drained, drainMs, lock: await measureLock(plan, rig, owned) };
}

/** Where the run's lock service is read from (chaos-lock.ts). */
function lockTargets(plan: RunPlan, rig: Rig): LockServiceTargets {
  const { services, directRedis } = rig;
  return {
    databaseUrl: services.databaseUrl,
    redis: directRedis,
    lockKeyPrefix: plan.names.lockKeyPrefix,
    etcd: services.etcd,
  };
}

/** The lock service's own figures, once the queue has drained: the longest hold, the fence increments it lost. */
async function measureLock(plan: RunPlan, rig: Rig, owned: ChaosResources): Promise<LockMeasures> {
  const { lock } = plan.options;
  const longestHoldMs = (await owned.holdWatch?.stop().catch(() => null)) ?? null;
  // While the workers still run: the etcd faults' measures of their readiness end first.
  await rig.services.etcd?.settled();
  owned.holdWatch = null;
  const behind = await fenceIncrementsBehind(lock, lockTargets(plan, rig)).catch((err: unknown) => {
    plan.log(`fence increments not measured: ${err instanceof Error ? err.message : String(err)}`);
    return null;
  });
  return {
    backend: lock,
    longestHoldMs,
    fenceIncrementsBehind: behind?.increments ?? null,
    fenceWalletsBehind: behind?.wallets ?? null,
  };
}

/**
 * Waits until no hold but the long ones (the anchors: chaos-payments.ts) is active: those
 * expiring within HOLDS_WAIT_MS are waited for, then their release by a worker's sweep.
 */
async function waitForHoldsEnded(databaseUrl: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'chaos-harness' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    while (!signal.aborted && performance.now() < deadline) {
      const { rows } = await client.query<{ open: string }>(
        `SELECT count(*) AS open FROM holds
          WHERE state = 'active' AND expires_at < clock_timestamp() + make_interval(secs => $1::double precision / 1000)`,
        [timeoutMs],
      );
      if (Number(rows[0]?.open ?? 0) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, HOLDS_POLL_MS));
    }
  } finally {
    await client.end();
  }
}

/** Stops the fleet, reads back the counters and every job, and runs the checks. */
async function check(
  plan: RunPlan,
  rig: Rig,
  owned: ChaosResources,
  faults: FaultPhase,
  drain: Drain,
): Promise<Checked> {
  const { outDir, history, names, progress, sent, workload } = plan;
  const { injector, firstTryMs } = faults;
  progress.phase = 'check';
  history.write({ type: 'phase', phase: 'check', detail: drain.drained });
  const proxies = rig.fleet.proxyStats();
  await Promise.all([rig.fleet.stopAll(), rig.relays?.stopAll()]);

  const tCheck = performance.now();
  // The workers' counters as they flushed them (a worker copies them as it stops; one killed
  // by a fault lost at most its last second of counts).
  const metrics = transferCounterSummary(
    await readCounterTotals(rig.directRedis, aggregateKeys(names.lockKeyPrefix, names.queueName)),
  );
  const jobs = await readFinalJobs(rig.queues);
  writeFinalJobs(history, jobs, sent);
  owned.prisma = createPrisma(dbConfig(rig.services.databaseUrl));
  const ran = await runChecks(owned.prisma, {
    workload,
    sent,
    jobs,
    drained: drain.drained,
    intakeRun: plan.options.intake,
  });
  const checks = [...ran.checks, blackholeCheck(injector.records), ...lockChecks(plan, injector.records)];
  let intake: IntakeFigures | null = null;
  let feedReaders: FeedReaderFigures | null = null;
  if (plan.options.intake) {
    await rig.feedReaders?.stop();
    feedReaders = rig.feedReaders?.figures() ?? null;
  }
  if (plan.options.intake || rig.services.ha !== null) {
    // One harness session for the intake run's checks and the HA run's.
    const client = new pg.Client({ connectionString: rig.services.databaseUrl, application_name: 'chaos-harness' });
    client.on('error', () => undefined);
    await client.connect();
    try {
      if (plan.options.intake) {
        const out = await runIntakeChecks(
          client,
          {
            direct: plan.options.unsafe === DIRECT_ENQUEUE,
            acknowledged: plan.acknowledged,
            requested: plan.requested,
            refused: plan.refused,
            observations: rig.feedReaders?.observations() ?? [],
          },
          injector.records,
        );
        checks.push(...out.checks);
        intake = out.figures;
      }
      if (rig.services.ha !== null) {
        await attachWriteOutages(client, injector.records, history.origin.t0WallMs);
        checks.push(
          await acknowledgedAnswersCheck(client, jobs, sent),
          pgFleetCheck(injector.records),
          formationFaultsCheck(injector.records),
        );
      }
    } finally {
      await client.end();
    }
  }
  const { totals, payments } = ran;
  attachFaultLoads(injector.records, jobs, sent, history, firstTryMs);
  await attachRecovery(
    injector.records,
    join(outDir, 'workers'),
    history.origin.t0WallMs,
    rig.directRedis,
    names.lockKeyPrefix,
  );
  for (const c of checks)
    history.write({ type: 'check', name: c.name, ok: c.ok, counterexamples: [...c.counterexamples] });
  return {
    proxies,
    metrics,
    jobs,
    checks,
    totals,
    payments,
    checkMs: performance.now() - tCheck,
    intake,
    feedReaders,
  };
}

/** The lock service's own checks: an etcd run's quorum losses (etcd-faults.ts). */
function lockChecks(plan: RunPlan, records: readonly FaultRecord[]): CheckResult[] {
  return plan.options.lock === 'etcd' ? [etcdQuorumCheck(records)] : [];
}

function writeFinalJobs(history: History, jobs: readonly FinalJob[], sent: ReadonlyMap<string, ChaosMessage>): void {
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
}

/** The verdict and the figures, written to report.json, report.md and timeline.svg. */
async function report(
  plan: RunPlan,
  setupMs: number,
  faults: FaultPhase,
  drain: Drain,
  checked: Checked,
): Promise<RunResult> {
  const { options, argv, outDir, history, sent, progress, workload, schedule, tStart } = plan;
  const { jobs, checks } = checked;
  const invalidIds = new Set([...sent].filter(([, m]) => m.kind === 'invalid').map(([id]) => id));
  const verdict = judge(options, checks);
  const figures: RunFigures = {
    seed: options.seed,
    startedAt: plan.startedAt.toISOString(),
    command: commandLine(argv),
    mode: {
      unsafe: options.unsafe,
      apply: options.apply,
      redis: options.redis,
      queueShards: options.queueShards,
      pgbouncer: options.pgbouncer,
      postgres: options.postgres,
    },
    options: { ...options },
    verdict,
    durationMs: {
      total: Math.round(performance.now() - tStart),
      setup: Math.round(setupMs),
      faultPhase: faults.faultPhaseMs,
      drain: Math.round(drain.drainMs),
      check: Math.round(checked.checkMs),
    },
    messages: messageFigures(workload),
    jobs: jobFigures(jobs, new Set(sent.keys()), invalidIds),
    ledger: checked.totals,
    ...(options.payments ? { payments: checked.payments } : {}),
    answers: answerCounts(jobs),
    metrics: checked.metrics,
    producerRetries: progress.producerRetries,
    workerLogEvents: countWorkerLogEvents(join(outDir, 'workers')),
    faults: faultFigures(schedule.length, faults.injector.records),
    latencyMs: latencyFigures(jobs),
    appliedPerSecond: appliedPerSecond(jobs, history),
    lockBackend: drain.lock,
    checks,
    proxies: checked.proxies,
    ...(checked.intake === null
      ? {}
      : {
          intake: {
            ...checked.intake,
            producerFigures: options.unsafe === DIRECT_ENQUEUE ? null : plan.intakeProducer,
            relayKills: faults.injector.records.filter((r) => r.kind === 'kill-relay' && r.error === null).length,
            resendAfterMs: options.resendAfterMs,
            relays: options.relays,
            relayPoolMax: options.relayPoolMax,
            feedReaders: checked.feedReaders,
          },
        }),
  };
  const chart = {
    jobs,
    faults: faults.injector.records,
    t0WallMs: history.origin.t0WallMs,
    faultPhaseEndS: faults.faultPhaseMs / 1000,
  };
  await writeReportFiles(options, figures, chart, plan.log);
  history.write({ type: 'run_end', verdict: verdict.pass ? 'pass' : 'fail', durationMs: figures.durationMs.total });
  return { figures, outDir, pass: verdict.pass };
}
