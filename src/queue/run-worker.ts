// The body of a worker process, shared by `npm run worker` and the chaos harness's naive
// worker: configuration, connections, the HTTP server (/healthz, /readyz, /metrics), the
// readiness gate, the BullMQ worker, and the shutdown on SIGTERM/SIGINT.
//
// Life of a worker:
//   starting  the HTTP server listens (/readyz 503); Redis, PostgreSQL and the migrations are
//             probed until they pass or STARTUP_TIMEOUT_MS is up (then: one error line, exit 1).
//   running   the BullMQ worker runs; the health monitor probes every HEALTH_PROBE_INTERVAL_MS,
//             pauses taking jobs while a server does not answer and resumes when it does. A
//             permanent failure of an attempt (src/queue/attempt-failure.ts) pauses it too, for
//             the hold of src/ops/fault-hold.ts.
//   stopping  first SIGTERM/SIGINT: take no new job, finish the jobs in hand, release every lock
//             still held, flush the counters, close BullMQ, Redis and Prisma, exit 0. A second
//             signal, or SHUTDOWN_TIMEOUT_MS passing, exits 1 at once (BullMQ re-queues the jobs
//             as stalled; the database decision keeps them safe).
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { type Config, loadConfig, redactUrl } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { readMigrations } from '../db/migrations.ts';
import { createPrisma, type PrismaClient, poolUseOf } from '../db/prisma.ts';
import { StartupError } from '../errors.ts';
import { FeedSequencer } from '../intake/feed-sequencer.ts';
import { HoldSweeper } from '../ledger/hold-sweeper.ts';
import type { PermanentKind } from '../ledger/vocabulary.ts';
import { FencedLock } from '../lock/fenced-lock.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { aggregateKeys, CounterAggregatePublisher } from '../metrics/counter-aggregate.ts';
import { queueDepthSource } from '../metrics/queue-depth.ts';
import { WorkerMetrics } from '../metrics/worker-metrics.ts';
import { FaultHold } from '../ops/fault-hold.ts';
import { HealthMonitor, type HealthState } from '../ops/health-monitor.ts';
import { OpsServer, type Readiness, reportListeningPort } from '../ops/ops-server.ts';
import { PostgresProbe, probeRedis, withinMs } from '../ops/probes.ts';
import { coalesceWrites } from './coalesced-writes.ts';
import type { Admission } from './gated-worker.ts';
import { consumedQueueShardsOf } from './queue-shards.ts';
import { bullmqConnection, describeRedisTarget, lockConnection, type RedisClient } from './redis-connection.ts';
import { type ApplyStrategy, type FaultReporter, startTransferWorker, type TransferWorker } from './transfer-worker.ts';

/** Bound on each lock release at shutdown; a lease not released in time expires by its TTL. */
export const SHUTDOWN_LOCK_RELEASE_TIMEOUT_MS = 2_000;
/** Bound on closing each connection at shutdown. */
export const SHUTDOWN_CLOSE_TIMEOUT_MS = 2_000;
/**
 * A repeated signal this soon after the first is the same request, not a second one: Ctrl-C on
 * `npm run worker` reaches the worker twice at once (from the terminal and forwarded by npm).
 */
export const SIGNAL_REPEAT_WINDOW_MS = 1_000;

export type ApplyStrategyFactory = (ctx: { config: Config; prisma: PrismaClient; logger: Logger }) => ApplyStrategy;

type Phase = 'starting' | 'running' | 'stopping';

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

/** An unexpected error leaves the process in an unknown state: log it and exit non-zero. */
function exitOnCrash(logger: Logger): void {
  process.on('unhandledRejection', (reason) => {
    logger.fatal({ event: 'unhandled_rejection', err: reason }, 'unhandled rejection; exiting');
    process.exit(1);
  });
  process.on('uncaughtException', (err) => {
    logger.fatal({ event: 'uncaught_exception', err }, 'uncaught exception; exiting');
    process.exit(1);
  });
}

function describeFailures(state: HealthState): string {
  return state.failures.map((f) => f.detail).join('; ');
}

/** Runs one worker process until it is told to stop; resolves with the exit code. */
export async function runWorkerProcess(name: string, makeApply?: ApplyStrategyFactory): Promise<number> {
  return await new WorkerRuntime(name, makeApply).run();
}

/** What the worker opens once the servers answer, and closes at shutdown. */
interface QueueSide {
  readonly prisma: PrismaClient;
  readonly connection: RedisClient;
  readonly lock: FencedLock;
  readonly worker: TransferWorker;
  /** The queues whose depth /metrics reports: every shard this worker consumes. */
  readonly depthQueues: readonly Queue[];
  readonly publisher: CounterAggregatePublisher;
  readonly sequencer: FeedSequencer;
  readonly sweeper: HoldSweeper;
}

/**
 * One worker process: owns every resource it opens (the lock connection, the health probes and
 * monitor, the HTTP server, then Prisma, the BullMQ connection, the lock, the BullMQ workers, the
 * depth queues and the counter publisher) and takes them through starting, running, stopping.
 */
class WorkerRuntime {
  private readonly config: Config;
  private readonly logger: Logger;
  /** Off with UNSAFE_MODE=no-readiness: the worker takes jobs without waiting for the servers. */
  private readonly gated: boolean;
  private readonly instanceId: string;
  private readonly metrics: WorkerMetrics;
  private phase: Phase = 'starting';

  // The first signal asks for a graceful stop; a second one forces the exit.
  private readonly stop = new AbortController();
  private readonly stopRequested: Promise<void>;
  private stopSignal = '';
  private firstSignalAtMs = 0;

  // Opened at once: the probes use them before anything else runs.
  private readonly redis: Redis;
  private readonly pgProbe: PostgresProbe;
  private readonly monitor: HealthMonitor;
  /** A permanent failure keeps the worker out of work for a while (src/ops/fault-hold.ts). */
  private readonly faults = new FaultHold();
  private server: OpsServer | null = null;
  /** Set once, when the servers answer. */
  private queueSide: QueueSide | null = null;

  constructor(
    name: string,
    private readonly makeApply: ApplyStrategyFactory | undefined,
  ) {
    this.config = loadConfig();
    this.logger = createLogger(this.config.logLevel, name);
    exitOnCrash(this.logger);
    if (this.config.unsafe.length > 0) {
      this.logger.warn(
        { unsafe: this.config.unsafe },
        'UNSAFE MODE: safety layers are switched off; never run this in production',
      );
    }
    this.gated = !this.config.unsafe.includes('no-readiness');
    this.instanceId = `${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.metrics = new WorkerMetrics({
      instanceId: this.instanceId,
      queueName: this.config.queueName,
      defaultMetrics: true,
    });

    process.on('SIGTERM', this.onSignal);
    process.on('SIGINT', this.onSignal);
    this.stopRequested = new Promise<void>((resolve) =>
      this.stop.signal.addEventListener('abort', () => resolve(), { once: true }),
    );

    this.redis = lockConnection(this.config);
    // A turn's lock calls (on a single server one release call and one acquire call) in one write.
    coalesceWrites(this.redis);
    const redisError = watchConnectionErrors(this.redis, this.logger, 'lock');
    this.pgProbe = new PostgresProbe(this.config.databaseUrl, readMigrations(MIGRATIONS_DIR), this.config);
    this.monitor = new HealthMonitor({
      probes: [
        (timeoutMs) => probeRedis(this.redis, this.config.redisUrl, timeoutMs, redisError),
        (timeoutMs) => this.pgProbe.probe(timeoutMs),
      ],
      logger: this.logger,
      onCheck: (state) => this.gate(state),
    });
  }

  /** The life of the process, in order; resolves with the exit code. */
  async run(): Promise<number> {
    await this.startOpsServer();
    if (this.gated && !(await this.waitForServers())) return 0;
    const side = this.startQueueSide();
    await this.stopRequested;
    return await this.shutDown(side);
  }

  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.stop.signal.aborted) {
      if (performance.now() - this.firstSignalAtMs < SIGNAL_REPEAT_WINDOW_MS) return;
      this.logger.error(
        { event: 'shutdown_forced', signal, jobsInHand: this.metrics.jobsInProgress },
        'second signal; exiting without waiting',
      );
      process.exit(1);
    }
    this.stopSignal = signal;
    this.firstSignalAtMs = performance.now();
    this.stop.abort();
  };

  /** The HTTP server comes first: a port already taken is a start-up error before anything runs. */
  private async startOpsServer(): Promise<void> {
    const { config, metrics, logger } = this;
    if (config.metricsPort === null) return;
    this.server = await OpsServer.start({
      host: config.metricsHost,
      port: config.metricsPort,
      metrics,
      readiness: () => this.readiness(),
      logger,
    }).catch(async (err: unknown) => {
      this.redis.disconnect();
      throw err;
    });
    reportListeningPort(this.server.port);
  }

  /**
   * Probes until Redis, PostgreSQL and the migrations pass. False when a signal came first (the
   * connections are closed); throws a StartupError when STARTUP_TIMEOUT_MS passes.
   */
  private async waitForServers(): Promise<boolean> {
    const { config, logger } = this;
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
    const state = await this.monitor.waitUntilHealthy(config.startupTimeoutMs, this.stop.signal);
    if (this.stop.signal.aborted) {
      logger.info({ signal: this.stopSignal }, 'stopped before it was ready');
      await this.closeConnections();
      return false;
    }
    if (!state.healthy) {
      await this.closeConnections();
      throw new StartupError(
        [...new Set(state.failures.map((f) => f.variable))],
        `${describeFailures(state)}; still not ready after STARTUP_TIMEOUT_MS=${config.startupTimeoutMs} ms`,
      );
    }
    return true;
  }

  /** Opens Prisma, the BullMQ side and the lock, starts taking jobs and the health monitor. */
  private startQueueSide(): QueueSide {
    const side = this.openQueueSide();
    this.queueSide = side;
    side.publisher.start();
    side.sequencer.start();
    side.sweeper.start();
    this.phase = 'running';
    if (this.gated) side.worker.run();
    this.monitor.start();
    this.metrics.setReady(this.readiness().ready);
    this.logStarted();
    return side;
  }

  private openQueueSide(): QueueSide {
    const { config, logger, metrics, redis } = this;
    const prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
    const connection = bullmqConnection(config);
    coalesceWrites(connection);
    watchConnectionErrors(connection, logger, 'queue');
    const lock = new FencedLock({
      redis,
      lockTtlMs: config.lockTtlMs,
      keyPrefix: config.lockKeyPrefix,
      logger,
      ownerPrefix: `${this.instanceId}:`,
    });
    const apply = this.makeApply?.({ config, prisma, logger });
    const admission: Admission | undefined = this.gated
      ? { admit: () => this.phase === 'running' && this.monitor.state.healthy && this.faults.current() === null }
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
      },
      'worker started',
    );
  }

  /** The graceful stop: finish the jobs in hand, release the leases, close everything, in order. */
  private async shutDown(side: QueueSide): Promise<number> {
    const { config, logger, metrics } = this;
    this.phase = 'stopping';
    metrics.setReady(false);
    logger.info(
      {
        event: 'worker_stopping',
        signal: this.stopSignal,
        jobsInHand: metrics.jobsInProgress,
        locksHeld: side.lock.heldCount,
        shutdownTimeoutMs: config.shutdownTimeoutMs,
      },
      'worker stopping',
    );
    if (config.unsafe.includes('no-graceful-shutdown')) {
      logger.warn(
        { jobsInHand: metrics.jobsInProgress, locksHeld: side.lock.heldCount },
        'UNSAFE: exiting without finishing the jobs in hand',
      );
      return 0;
    }
    const force = this.exitAfterShutdownTimeout();
    await this.monitor.stop();
    // Takes no new job, lets the jobs in hand finish, then waits for their batches and the lock
    // releases they sent; releaseAll() then releases whatever lease is still held.
    await side.worker.close();
    const released = await side.lock.releaseAll(SHUTDOWN_LOCK_RELEASE_TIMEOUT_MS);
    await this.closeConnections();
    clearTimeout(force);
    logger.info({ event: 'worker_stopped', locksReleased: released }, 'worker stopped');
    return 0;
  }

  /** SHUTDOWN_TIMEOUT_MS bounds the graceful stop: past it the process exits 1 at once. */
  private exitAfterShutdownTimeout(): NodeJS.Timeout {
    const { config, logger, metrics } = this;
    const force = setTimeout(() => {
      logger.error(
        {
          event: 'shutdown_timed_out',
          shutdownTimeoutMs: config.shutdownTimeoutMs,
          jobsInHand: metrics.jobsInProgress,
        },
        'jobs did not finish within SHUTDOWN_TIMEOUT_MS; exiting',
      );
      process.exit(1);
    }, config.shutdownTimeoutMs);
    force.unref();
    return force;
  }

  /** Closes what is open, each close bounded; the queue side only if it was started. */
  private async closeConnections(): Promise<void> {
    const side = this.queueSide;
    const { redis } = this;
    await side?.publisher.stop();
    await side?.sequencer.stop();
    await side?.sweeper.stop();
    await Promise.all((side?.depthQueues ?? []).map((q) => q.close().catch(() => undefined)));
    await this.server?.close();
    await side?.prisma.$disconnect().catch(() => undefined);
    await this.pgProbe.close(SHUTDOWN_CLOSE_TIMEOUT_MS);
    await withinMs(redis.quit(), SHUTDOWN_CLOSE_TIMEOUT_MS, 'Redis').catch(() => redis.disconnect());
    if (side !== null) {
      const { connection } = side;
      await withinMs(connection.quit(), SHUTDOWN_CLOSE_TIMEOUT_MS, 'Redis').catch(() => connection.disconnect());
    }
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

  /** What /readyz answers, and the ready gauge. */
  private readiness(): Readiness {
    if (this.phase === 'stopping') return { ready: false, reason: 'shutting down' };
    const health = this.monitor.state;
    if (this.phase === 'starting')
      return { ready: false, reason: `starting${health.failures.length > 0 ? `: ${describeFailures(health)}` : ''}` };
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
    if (this.phase === 'running' && worker !== null && this.gated) {
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
    metrics.setReady(this.readiness().ready);
  }
}
