// The body of a worker process, shared by `npm run worker` and the chaos harness's naive
// worker: configuration, connections, the HTTP server (/healthz, /readyz, /metrics), the
// readiness gate, the BullMQ worker, and what it owns in the order it closes. The signals, the
// crash handlers, the start-up wait, the bounded stop and the exit codes are those of every
// process of the product (src/ops/process-runtime.ts).
//
// Life of a worker:
//   starting  the HTTP server listens (/readyz 503); Redis, PostgreSQL and the migrations are
//             probed until they pass or STARTUP_TIMEOUT_MS is up (then: one error line, exit 1).
//   running   the BullMQ worker runs; the health monitor probes every HEALTH_PROBE_INTERVAL_MS,
//             pauses taking jobs while a server does not answer and resumes when it does. A
//             permanent failure of an attempt (src/queue/attempt-failure.ts) pauses it too, for
//             the hold of src/ops/fault-hold.ts.
//   stopping  first SIGTERM/SIGINT: take no new job, finish the jobs in hand, release every lock
//             still held, flush the counters, close BullMQ, Redis and Prisma (WorkerLife.closing,
//             in that order), exit 0. A second
//             signal, or SHUTDOWN_TIMEOUT_MS passing, exits 1 at once (BullMQ re-queues the jobs
//             as stalled; the database decision keeps them safe).

import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { type Config, loadConfig, redactUrl } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { readMigrations } from '../db/migrations.ts';
import { createPrisma, type PrismaClient, poolUseOf, rawQueryable } from '../db/prisma.ts';
import { FeedSequencer } from '../intake/feed-sequencer.ts';
import { HoldSweeper } from '../ledger/hold-sweeper.ts';
import type { PermanentKind } from '../ledger/vocabulary.ts';
import { currentLockEpoch, lockEpochFor, lockEpochProblem } from '../lock/lock-epochs.ts';
import type { LockService, ReleaseAllResult } from '../lock/lock-service.ts';
import { createLockService } from '../lock/lock-services.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { aggregateKeys, CounterAggregatePublisher } from '../metrics/counter-aggregate.ts';
import { queueDepthSource } from '../metrics/queue-depth.ts';
import { WorkerMetrics } from '../metrics/worker-metrics.ts';
import { FaultHold } from '../ops/fault-hold.ts';
import { HealthMonitor, type HealthState } from '../ops/health-monitor.ts';
import type { OpsServer, Readiness } from '../ops/ops-server.ts';
import { PostgresProbe, type ProbeResult, probeRedis, withinMs } from '../ops/probes.ts';
import { type ClosingStep, type ProcessLife, ProcessRuntime } from '../ops/process-runtime.ts';
import { coalesceWrites } from './coalesced-writes.ts';
import type { Admission } from './gated-worker.ts';
import { consumedQueueShardsOf } from './queue-shards.ts';
import {
  bullmqConnection,
  closeRedis,
  describeRedisTarget,
  lockConnection,
  type RedisClient,
} from './redis-connection.ts';
import { type ApplyStrategy, type FaultReporter, startTransferWorker, type TransferWorker } from './transfer-worker.ts';

/** Bound on each lock release at shutdown; a lease not released in time expires by its TTL. */
export const SHUTDOWN_LOCK_RELEASE_TIMEOUT_MS = 2_000;
/** Bound on closing each connection at shutdown. */
export const SHUTDOWN_CLOSE_TIMEOUT_MS = 2_000;

export type ApplyStrategyFactory = (ctx: { config: Config; prisma: PrismaClient; logger: Logger }) => ApplyStrategy;

/**
 * Logs the first error of an outage at warn and the repeats (one per reconnect attempt) at
 * debug; returns what the last one said while the connection is down (null once it is up).
 */
function watchConnectionErrors(redis: Redis, logger: Logger, connection: string): () => string | null {
  let lastError: string | null = null;
  redis.on('error', (err: Error) => {
    logger[lastError === null ? 'warn' : 'debug']({ connection, err: err.message }, 'redis connection error');
    lastError = err.message;
  });
  redis.on('ready', () => {
    if (lastError !== null) logger.info({ connection }, 'redis connection back');
    lastError = null;
  });
  return () => lastError;
}

/** Runs one worker process until it is told to stop; resolves with the exit code. */
export async function runWorkerProcess(name: string, makeApply?: ApplyStrategyFactory): Promise<number> {
  const worker = new WorkerLife(name, makeApply);
  return await worker.runtime.run(worker);
}

/** What the worker opens once the servers answer, and closes at shutdown. */
interface QueueSide {
  readonly prisma: PrismaClient;
  readonly connection: RedisClient;
  readonly lock: LockService;
  readonly worker: TransferWorker;
  /** The queues whose depth /metrics reports: every shard this worker consumes. */
  readonly depthQueues: readonly Queue[];
  readonly publisher: CounterAggregatePublisher;
  readonly sequencer: FeedSequencer;
  readonly sweeper: HoldSweeper;
}

/**
 * One worker process, as src/ops/process-runtime.ts runs it: opens the lock connection, the health
 * probes and monitor and the HTTP server at once, then Prisma, the BullMQ connection, the lock,
 * the BullMQ workers, the depth queues and the counter publisher once the servers answer, and
 * declares the order they close in.
 */
class WorkerLife implements ProcessLife {
  readonly runtime: ProcessRuntime;
  private readonly config: Config;
  private readonly logger: Logger;
  /** Off with UNSAFE_MODE=no-readiness: the worker takes jobs without waiting for the servers. */
  private readonly gated: boolean;
  private readonly instanceId: string;
  private readonly metrics: WorkerMetrics;

  // Opened at once: the probes use them before anything else runs.
  private readonly redis: Redis;
  private readonly pgProbe: PostgresProbe;
  /** LOCK_BACKEND's lock service; its tokens carry the epoch read in open(). */
  private readonly lock: LockService;
  private readonly monitor: HealthMonitor;
  /** A permanent failure keeps the worker out of work for a while (src/ops/fault-hold.ts). */
  private readonly faults = new FaultHold();
  private server: OpsServer | null = null;
  /** Set once, when the servers answer. */
  private queueSide: QueueSide | null = null;
  private locksReleased: ReleaseAllResult | null = null;

  /**
   * What the worker owns, in the order it closes (after the health monitor): the jobs in hand
   * finish first (BullMQ's close waits for their batches and the lock releases they sent), then
   * every lease still held is released, then the rest, each close bounded. What was never opened
   * (the queue side, when the start fails) is skipped.
   */
  readonly closing: readonly ClosingStep[] = [
    { name: 'queue worker', close: () => this.queueSide?.worker.close() },
    { name: 'leases', close: () => this.releaseLeases() },
    { name: 'counter publisher', close: () => this.queueSide?.publisher.stop() },
    { name: 'feed sequencer', close: () => this.queueSide?.sequencer.stop() },
    { name: 'hold sweeper', close: () => this.queueSide?.sweeper.stop() },
    {
      name: 'depth queues',
      close: () => Promise.all((this.queueSide?.depthQueues ?? []).map((q) => q.close().catch(() => undefined))),
    },
    { name: 'HTTP server', close: () => this.server?.close() },
    { name: 'Prisma', close: () => this.queueSide?.prisma.$disconnect().catch(() => undefined) },
    { name: 'PostgreSQL probe', close: () => this.pgProbe.close(SHUTDOWN_CLOSE_TIMEOUT_MS) },
    { name: 'lock service', close: () => this.lock.close() },
    { name: 'lock connection', close: () => closeRedis(this.redis, SHUTDOWN_CLOSE_TIMEOUT_MS) },
    {
      name: 'queue connection',
      close: () =>
        this.queueSide === null ? undefined : closeRedis(this.queueSide.connection, SHUTDOWN_CLOSE_TIMEOUT_MS),
    },
  ];

  constructor(
    name: string,
    private readonly makeApply: ApplyStrategyFactory | undefined,
  ) {
    this.config = loadConfig();
    const { config } = this;
    this.logger = createLogger(config.logLevel, name);
    if (config.unsafe.length > 0) {
      this.logger.warn(
        { unsafe: config.unsafe },
        'UNSAFE MODE: safety layers are switched off; never run this in production',
      );
    }
    this.gated = !config.unsafe.includes('no-readiness');
    this.instanceId = `${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.metrics = new WorkerMetrics({
      instanceId: this.instanceId,
      queueName: config.queueName,
      defaultMetrics: true,
      lockBackend: config.lock.backend,
    });

    this.redis = lockConnection(config);
    // A turn's lock calls (on a single server one release call and one acquire call) in one write.
    coalesceWrites(this.redis);
    const redisError = watchConnectionErrors(this.redis, this.logger, 'lock');
    this.pgProbe = new PostgresProbe(config.databaseUrl, readMigrations(MIGRATIONS_DIR), config);
    this.lock = createLockService(config, {
      redis: this.redis,
      logger: this.logger,
      ownerPrefix: `${this.instanceId}:`,
    });
    this.monitor = new HealthMonitor({
      probes: [
        (timeoutMs) => probeRedis(this.redis, config.redisUrl, timeoutMs, redisError),
        (timeoutMs) => this.pgProbe.probe(timeoutMs),
        ...(this.lock.backend === 'redis' ? [] : [(timeoutMs: number) => this.lock.probe(timeoutMs)]),
        (timeoutMs) => this.lockEpochProbe(timeoutMs),
      ],
      logger: this.logger,
      onCheck: (state) => this.gate(state),
    });
    this.runtime = new ProcessRuntime({
      logger: this.logger,
      monitor: this.monitor,
      startupTimeoutMs: config.startupTimeoutMs,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
      waitForHealth: this.gated,
      inHand: () => ({ jobsInHand: this.metrics.jobsInProgress }),
    });
  }

  /** The HTTP server comes first: a port already taken is a start-up error before anything runs. */
  async listen(): Promise<void> {
    const { config, logger } = this;
    if (config.metricsPort !== null) {
      this.server = await this.runtime
        .serve({ host: config.metricsHost, port: config.metricsPort, metrics: this.metrics })
        .catch(async (err: unknown) => {
          this.redis.disconnect();
          throw err;
        });
    }
    if (!this.gated) return;
    logger.info(
      {
        event: 'worker_starting',
        instanceId: this.instanceId,
        metricsPort: this.server?.port ?? null,
        startupTimeoutMs: config.startupTimeoutMs,
        redis: describeRedisTarget(config),
        database: redactUrl(config.databaseUrl),
      },
      'waiting for Redis, PostgreSQL and the migrations',
    );
  }

  /** Opens Prisma, the BullMQ side and the lock, and starts the periodic tasks. */
  async open(): Promise<void> {
    const side = this.openQueueSide();
    this.queueSide = side;
    // Before the first job: the tokens carry the epoch in force, and only its backend may run.
    // (Unsafe no-readiness starts without waiting for the database: its probes enter the epoch.)
    if (this.gated) await this.enterLockEpoch(side.prisma);
    side.publisher.start();
    side.sequencer.start();
    side.sweeper.start();
  }

  /** Starts taking jobs. */
  begin(): void {
    if (this.gated) this.queueSide?.worker.run();
    this.metrics.setReady(this.runtime.readiness().ready);
    this.logStarted();
  }

  private openQueueSide(): QueueSide {
    const { config, logger, metrics, redis } = this;
    const prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
    const connection = bullmqConnection(config);
    coalesceWrites(connection);
    watchConnectionErrors(connection, logger, 'queue');
    const lock = this.lock;
    const apply = this.makeApply?.({ config, prisma, logger });
    const admission: Admission | undefined = this.gated
      ? {
          admit: () => this.runtime.phase === 'running' && this.monitor.state.healthy && this.faults.current() === null,
        }
      : undefined;
    const faults: FaultReporter = {
      permanent: (kind, reason) => this.onPermanentFault(kind, reason),
      decided: () => this.faults.decided(),
    };
    const worker = startTransferWorker({
      config,
      prisma,
      lock,
      connection,
      logger,
      metrics,
      ...(apply ? { apply } : {}),
      ...(admission ? { admission, faults } : {}),
    });
    const depthQueues = consumedQueueShardsOf(config).map((shard) => {
      const queue = new Queue(shard.name, { connection: redis, prefix: shard.prefix });
      queue.on('error', (err) => logger.debug({ err: err.message, queue: shard.name }, 'queue depth connection error'));
      return queue;
    });
    metrics.setQueueDepthSource(queueDepthSource(depthQueues));
    metrics.setPoolUseSource(() => poolUseOf(prisma));
    const publisher = new CounterAggregatePublisher({
      redis,
      keys: aggregateKeys(config.lockKeyPrefix, config.queueName),
      metrics,
      logger,
    });
    const sequencer = new FeedSequencer(prisma, config.outcomeSequenceIntervalMs, logger);
    const sweeper = new HoldSweeper(prisma, config.holdSweepIntervalMs, logger, (n) => metrics.holdsReleased(n));
    return { prisma, connection, lock, worker, depthQueues, publisher, sequencer, sweeper };
  }

  private logStarted(): void {
    const { config } = this;
    this.logger.info(
      {
        event: 'worker_started',
        instanceId: this.instanceId,
        queues: consumedQueueShardsOf(config).map((s) => s.name),
        concurrency: config.workerConcurrency,
        lockTtlMs: config.lockTtlMs,
        batchMax: config.transferBatchMax,
        batchWaitMs: config.transferBatchWaitMs,
        metricsPort: this.server?.port ?? null,
        redis: describeRedisTarget(config),
        database: redactUrl(config.databaseUrl),
        lock: { backend: this.lock.backend, epoch: this.lock.epoch },
      },
      'worker started',
    );
  }

  /**
   * The start of the stop: not ready any more, and what is in hand logged. Unsafe mode
   * no-graceful-shutdown abandons the jobs in hand (BullMQ re-queues them as stalled).
   */
  stopping(signal: string): 'graceful' | 'abandon' {
    const { config, logger, metrics } = this;
    const locksHeld = this.queueSide?.lock.heldCount ?? 0;
    metrics.setReady(false);
    logger.info(
      {
        event: 'worker_stopping',
        signal,
        jobsInHand: metrics.jobsInProgress,
        locksHeld,
        shutdownTimeoutMs: config.shutdownTimeoutMs,
      },
      'worker stopping',
    );
    if (!config.unsafe.includes('no-graceful-shutdown')) return 'graceful';
    logger.warn(
      { jobsInHand: metrics.jobsInProgress, locksHeld },
      'UNSAFE: exiting without finishing the jobs in hand',
    );
    return 'abandon';
  }

  stopped(): void {
    this.logger.info({ event: 'worker_stopped', locksReleased: this.locksReleased }, 'worker stopped');
  }

  private async enterLockEpoch(prisma: PrismaClient): Promise<void> {
    const epoch = await lockEpochFor(rawQueryable(prisma), this.lock.backend);
    this.lock.enterEpoch(epoch.epoch);
    this.metrics.setLockEpoch(epoch.epoch);
  }

  /**
   * The lock epoch, every probe round once the queue side is open: an epoch opened for another
   * backend makes this worker not ready (the fleet has moved on), one opened for its own backend
   * (its lock service lost its data) is entered.
   */
  private async lockEpochProbe(timeoutMs: number): Promise<ProbeResult> {
    const side = this.queueSide;
    if (side === null) return { ok: true };
    try {
      const epoch = await withinMs(currentLockEpoch(rawQueryable(side.prisma)), timeoutMs, 'lock_epoch_current()');
      const problem = lockEpochProblem(epoch, this.lock.backend);
      if (problem !== null) return { ok: false, variable: 'LOCK_BACKEND', detail: problem };
      this.lock.enterEpoch(epoch.epoch);
      this.metrics.setLockEpoch(epoch.epoch);
      return { ok: true };
    } catch (err) {
      return { ok: false, variable: 'DATABASE_URL', detail: `lock epoch: ${(err as Error).message}` };
    }
  }

  /** Once the jobs in hand are done: releases whatever lease is still held. */
  private async releaseLeases(): Promise<void> {
    if (this.queueSide === null) return;
    this.locksReleased = await this.queueSide.lock.releaseAll(SHUTDOWN_LOCK_RELEASE_TIMEOUT_MS);
  }

  /** Why the worker may not take jobs: the failed probes, then the fault held (if any). */
  private reasonsAgainst(health: HealthState): string[] {
    const fault = this.faults.describe();
    return [...health.failures.map((f) => f.detail), ...(fault === null ? [] : [fault])];
  }

  /** A permanent failure of an attempt: stop taking jobs now, not at the next probe round. */
  private onPermanentFault(kind: PermanentKind, reason: string): void {
    const fault = this.faults.report(kind, reason);
    if (fault === null) return;
    this.logger.error(
      { event: 'worker_fault', kind, reason, holdMs: fault.holdMs, jobsInHand: this.metrics.jobsInProgress },
      'an attempt failed in a way no retry here can clear; not taking jobs',
    );
    void this.gate(this.monitor.state);
  }

  /** What /readyz answers while running: the servers, the fault held, the queue worker. */
  readiness(health: HealthState): Readiness {
    const against = this.reasonsAgainst(health);
    if (against.length > 0) return { ready: false, reason: against.join('; ') };
    const worker = this.queueSide?.worker ?? null;
    if (worker === null || !worker.isRunning() || worker.isPaused())
      return { ready: false, reason: 'the queue worker is not running' };
    return { ready: true };
  }

  /**
   * After every probe round (and a permanent failure): pause while a server does not answer or a
   * fault is held, resume when neither is the case.
   */
  private async gate(state: HealthState): Promise<void> {
    const worker = this.queueSide?.worker ?? null;
    const { logger, metrics } = this;
    const open = state.healthy && this.faults.current() === null;
    if (this.runtime.phase === 'running' && worker !== null && this.gated) {
      if (!open && !worker.isPaused()) {
        logger.warn(
          { event: 'worker_paused', jobsInHand: metrics.jobsInProgress, reason: this.reasonsAgainst(state).join('; ') },
          'not taking new jobs until the servers answer and no fault is held',
        );
        await worker.pause();
      } else if (open && worker.isPaused()) {
        logger.info({ event: 'worker_resumed' }, 'taking jobs again');
        worker.resume();
      } else if (open && !worker.isRunning()) {
        // BullMQ's main loop ended on an error it could not handle; start it again.
        logger.warn({ event: 'worker_loop_restarted' }, 'the queue worker had stopped; starting it again');
        worker.run();
      }
    }
    metrics.setReady(this.runtime.readiness().ready);
  }
}
