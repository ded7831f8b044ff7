// The body of a worker process, shared by `npm run worker` and the chaos harness's naive
// worker: configuration, connections, the HTTP server (/healthz, /readyz, /metrics), the
// readiness gate, the BullMQ worker, and the shutdown on SIGTERM/SIGINT.
//
// Life of a worker:
//   starting  the HTTP server listens (/readyz 503); Redis, PostgreSQL and the migrations are
//             probed until they pass or STARTUP_TIMEOUT_MS is up (then: one error line, exit 1).
//   running   the BullMQ worker runs; the health monitor probes every HEALTH_PROBE_INTERVAL_MS,
//             pauses taking jobs while a server does not answer and resumes when it does.
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
import { createPrisma, type PrismaClient } from '../db/prisma.ts';
import { FencedLock } from '../lock/fenced-lock.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { aggregateKeys, CounterAggregatePublisher } from '../metrics/counter-aggregate.ts';
import { queueDepthSource } from '../metrics/queue-depth.ts';
import { WorkerMetrics } from '../metrics/worker-metrics.ts';
import { HealthMonitor, type HealthState } from '../ops/health-monitor.ts';
import { OpsServer, type Readiness, reportListeningPort } from '../ops/ops-server.ts';
import { PostgresProbe, probeRedis, withinMs } from '../ops/probes.ts';
import { StartupError } from '../ops/startup-error.ts';
import type { Admission } from './gated-worker.ts';
import { consumedQueueShardsOf } from './queue-shards.ts';
import { bullmqConnection, describeRedisTarget, lockConnection, type RedisClient } from './redis-connection.ts';
import { type ApplyStrategy, startTransferWorker, type TransferWorker } from './transfer-worker.ts';

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
  const config = loadConfig();
  const logger = createLogger(config.logLevel, name);
  exitOnCrash(logger);
  if (config.unsafe.length > 0) {
    logger.warn({ unsafe: config.unsafe }, 'UNSAFE MODE: safety layers are switched off; never run this in production');
  }
  const gated = !config.unsafe.includes('no-readiness');
  const instanceId = `${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const metrics = new WorkerMetrics({ instanceId, queueName: config.queueName, defaultMetrics: true });

  let phase: Phase = 'starting';
  let running: TransferWorker | null = null;

  // The first signal asks for a graceful stop; a second one forces the exit.
  const stop = new AbortController();
  let stopSignal = '';
  let firstSignalAtMs = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) {
      if (performance.now() - firstSignalAtMs < SIGNAL_REPEAT_WINDOW_MS) return;
      logger.error(
        { event: 'shutdown_forced', signal, jobsInHand: metrics.jobsInProgress },
        'second signal; exiting without waiting',
      );
      process.exit(1);
    }
    stopSignal = signal;
    firstSignalAtMs = performance.now();
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  const stopRequested = new Promise<void>((resolve) =>
    stop.signal.addEventListener('abort', () => resolve(), { once: true }),
  );

  const redis = lockConnection(config);
  const redisError = watchConnectionErrors(redis, logger, 'lock');
  const pgProbe = new PostgresProbe(config.databaseUrl, readMigrations(MIGRATIONS_DIR));
  const monitor = new HealthMonitor({
    probes: [
      (timeoutMs) => probeRedis(redis, config.redisUrl, timeoutMs, redisError),
      (timeoutMs) => pgProbe.probe(timeoutMs),
    ],
    logger,
    onCheck: (state) => gate(state),
  });

  const readiness = (): Readiness => {
    if (phase === 'stopping') return { ready: false, reason: 'shutting down' };
    const health = monitor.state;
    if (phase === 'starting')
      return { ready: false, reason: `starting${health.failures.length > 0 ? `: ${describeFailures(health)}` : ''}` };
    if (!health.healthy) return { ready: false, reason: describeFailures(health) };
    if (running === null || !running.isRunning() || running.isPaused())
      return { ready: false, reason: 'the queue worker is not running' };
    return { ready: true };
  };
  const admission: Admission | undefined = gated
    ? { admit: () => phase === 'running' && monitor.state.healthy }
    : undefined;

  /** After every probe round: pause while a server does not answer, resume when it does. */
  async function gate(state: HealthState): Promise<void> {
    const worker = running;
    if (phase === 'running' && worker !== null && gated) {
      if (!state.healthy && !worker.isPaused()) {
        logger.warn(
          { event: 'worker_paused', jobsInHand: metrics.jobsInProgress },
          'not taking new jobs until the servers answer',
        );
        await worker.pause();
      } else if (state.healthy && worker.isPaused()) {
        logger.info({ event: 'worker_resumed' }, 'taking jobs again');
        worker.resume();
      } else if (state.healthy && !worker.isRunning()) {
        // BullMQ's main loop ended on an error it could not handle; start it again.
        logger.warn({ event: 'worker_loop_restarted' }, 'the queue worker had stopped; starting it again');
        worker.run();
      }
    }
    metrics.setReady(readiness().ready);
  }

  // The HTTP server comes first: a port already taken is a start-up error before anything runs.
  const server =
    config.metricsPort === null
      ? null
      : await OpsServer.start({ host: config.metricsHost, port: config.metricsPort, metrics, readiness, logger }).catch(
          async (err: unknown) => {
            redis.disconnect();
            throw err;
          },
        );
  if (server !== null) reportListeningPort(server.port);

  let prisma: PrismaClient | null = null;
  let connection: RedisClient | null = null;
  let depthQueues: Queue[] = [];
  let publisher: CounterAggregatePublisher | null = null;
  let lock: FencedLock | null = null;
  const closeAll = async () => {
    await publisher?.stop();
    await Promise.all(depthQueues.map((q) => q.close().catch(() => undefined)));
    await server?.close();
    await prisma?.$disconnect().catch(() => undefined);
    await pgProbe.close(SHUTDOWN_CLOSE_TIMEOUT_MS);
    await withinMs(redis.quit(), SHUTDOWN_CLOSE_TIMEOUT_MS, 'Redis').catch(() => redis.disconnect());
    if (connection !== null)
      await withinMs(connection.quit(), SHUTDOWN_CLOSE_TIMEOUT_MS, 'Redis').catch(() => connection?.disconnect());
  };

  if (gated) {
    logger.info(
      {
        event: 'worker_starting',
        instanceId,
        metricsPort: server?.port ?? null,
        startupTimeoutMs: config.startupTimeoutMs,
        redis: describeRedisTarget(config),
        database: redactUrl(config.databaseUrl),
      },
      'waiting for Redis, PostgreSQL and the migrations',
    );
    const state = await monitor.waitUntilHealthy(config.startupTimeoutMs, stop.signal);
    if (stop.signal.aborted) {
      logger.info({ signal: stopSignal }, 'stopped before it was ready');
      await closeAll();
      return 0;
    }
    if (!state.healthy) {
      await closeAll();
      throw new StartupError(
        [...new Set(state.failures.map((f) => f.variable))],
        `${describeFailures(state)}; still not ready after STARTUP_TIMEOUT_MS=${config.startupTimeoutMs} ms`,
      );
    }
  }

  prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
  connection = bullmqConnection(config);
  watchConnectionErrors(connection, logger, 'queue');
  lock = new FencedLock({
    redis,
    lockTtlMs: config.lockTtlMs,
    keyPrefix: config.lockKeyPrefix,
    logger,
    ownerPrefix: `${instanceId}:`,
  });
  const apply = makeApply?.({ config, prisma, logger });
  running = startTransferWorker({
    config,
    prisma,
    lock,
    connection,
    logger,
    metrics,
    ...(apply ? { apply } : {}),
    ...(admission ? { admission } : {}),
  });
  // The queues this worker reports the depth of; one today, the shards of the queue later.
  // The queues this worker consumes: every shard it takes jobs from.
  depthQueues = consumedQueueShardsOf(config).map((shard) => {
    const queue = new Queue(shard.name, { connection: redis, prefix: shard.prefix });
    queue.on('error', (err) => logger.debug({ err: err.message, queue: shard.name }, 'queue depth connection error'));
    return queue;
  });
  metrics.setQueueDepthSource(queueDepthSource(depthQueues));
  publisher = new CounterAggregatePublisher({
    redis,
    keys: aggregateKeys(config.lockKeyPrefix, config.queueName),
    metrics,
    logger,
  });
  publisher.start();
  phase = 'running';
  if (gated) running.run();
  monitor.start();
  metrics.setReady(readiness().ready);
  logger.info(
    {
      event: 'worker_started',
      instanceId,
      queues: consumedQueueShardsOf(config).map((s) => s.name),
      concurrency: config.workerConcurrency,
      lockTtlMs: config.lockTtlMs,
      batchMax: config.transferBatchMax,
      batchWaitMs: config.transferBatchWaitMs,
      metricsPort: server?.port ?? null,
      redis: describeRedisTarget(config),
      database: redactUrl(config.databaseUrl),
    },
    'worker started',
  );

  await stopRequested;
  phase = 'stopping';
  metrics.setReady(false);
  logger.info(
    {
      event: 'worker_stopping',
      signal: stopSignal,
      jobsInHand: metrics.jobsInProgress,
      locksHeld: lock.heldCount,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
    },
    'worker stopping',
  );
  if (config.unsafe.includes('no-graceful-shutdown')) {
    logger.warn(
      { jobsInHand: metrics.jobsInProgress, locksHeld: lock.heldCount },
      'UNSAFE: exiting without finishing the jobs in hand',
    );
    return 0;
  }
  const force = setTimeout(() => {
    logger.error(
      { event: 'shutdown_timed_out', shutdownTimeoutMs: config.shutdownTimeoutMs, jobsInHand: metrics.jobsInProgress },
      'jobs did not finish within SHUTDOWN_TIMEOUT_MS; exiting',
    );
    process.exit(1);
  }, config.shutdownTimeoutMs);
  force.unref();

  await monitor.stop();
  // Takes no new job, lets the jobs in hand finish, then waits for their batches and the lock
  // releases they sent; releaseAll() then releases whatever lease is still held.
  await running.close();
  const released = await lock.releaseAll(SHUTDOWN_LOCK_RELEASE_TIMEOUT_MS);
  await closeAll();
  clearTimeout(force);
  logger.info({ event: 'worker_stopped', locksReleased: released }, 'worker stopped');
  return 0;
}
