// The body of a worker process, shared by `npm run worker` and the chaos harness's naive
// worker: configuration, connections, the BullMQ worker, and a graceful stop on SIGTERM/SIGINT.
import { loadConfig, redactUrl, type Config } from '../config/config.ts';
import { createPrisma, type PrismaClient } from '../db/prisma.ts';
import { FencedLock } from '../lock/fenced-lock.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { consumedQueueShardsOf } from './queue-shards.ts';
import { bullmqConnection, describeRedisTarget, lockConnection } from './redis-connection.ts';
import { startTransferWorkers, type ApplyStrategy } from './transfer-worker.ts';

/** A worker that has not finished its jobs this long after SIGTERM exits anyway (the jobs stall and are re-run). */
export const SHUTDOWN_GRACE_MS = 20_000;

export type ApplyStrategyFactory = (ctx: { config: Config; prisma: PrismaClient; logger: Logger }) => ApplyStrategy;

export async function runWorkerProcess(name: string, makeApply?: ApplyStrategyFactory): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, name);
  if (config.unsafe.length > 0) {
    logger.warn({ unsafe: config.unsafe }, 'UNSAFE MODE: safety layers are switched off; never run this in production');
  }
  const prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
  const redis = lockConnection(config);
  redis.on('error', (err) => logger.warn({ err: err.message }, 'redis (lock) connection error'));
  const connection = bullmqConnection(config);
  connection.on('error', (err) => logger.warn({ err: err.message }, 'redis (queue) connection error'));
  const lock = new FencedLock({ redis, lockTtlMs: config.lockTtlMs, keyPrefix: config.lockKeyPrefix, logger });
  const apply = makeApply?.({ config, prisma, logger });
  const workers = startTransferWorkers({ config, prisma, lock, redis, connection, logger, ...(apply ? { apply } : {}) });
  logger.info({ queues: consumedQueueShardsOf(config).map((s) => s.name), concurrency: config.workerConcurrency,
    lockTtlMs: config.lockTtlMs, redis: describeRedisTarget(config), database: redactUrl(config.databaseUrl) }, 'worker started');

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'worker stopping');
      const force = setTimeout(() => {
        logger.error({ graceMs: SHUTDOWN_GRACE_MS }, 'jobs did not finish in time; exiting');
        process.exit(1);
      }, SHUTDOWN_GRACE_MS);
      force.unref();
      void Promise.all(workers.map((w) => w.close())).then(() => resolve(), () => resolve());
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await prisma.$disconnect();
  redis.disconnect();
  connection.disconnect();
  logger.info('worker stopped');
}
