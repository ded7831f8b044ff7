// `npm run worker`: one worker process. Scale by running more of them; they share nothing but
// Redis and PostgreSQL. SIGTERM/SIGINT finish the jobs in hand, then exit.
import { loadConfig, redactUrl } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import { FencedLock } from '../lock/fenced-lock.ts';
import { createLogger } from '../log/logger.ts';
import { bullmqConnection, lockConnection } from '../queue/redis-connection.ts';
import { startTransferWorker } from '../queue/transfer-worker.ts';
import { runCli } from './run-cli.ts';

/** A worker that has not finished its jobs this long after SIGTERM exits anyway (the jobs stall and are re-run). */
const SHUTDOWN_GRACE_MS = 20_000;

await runCli(async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'worker');
  if (config.unsafe.length > 0) {
    logger.warn({ unsafe: config.unsafe }, 'UNSAFE MODE: safety layers are switched off; never run this in production');
  }
  const prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
  const redis = lockConnection(config.redisUrl);
  redis.on('error', (err) => logger.warn({ err: err.message }, 'redis (lock) connection error'));
  const connection = bullmqConnection(config.redisUrl);
  connection.on('error', (err) => logger.warn({ err: err.message }, 'redis (queue) connection error'));
  const lock = new FencedLock({ redis, lockTtlMs: config.lockTtlMs, keyPrefix: config.lockKeyPrefix, logger });
  const worker = startTransferWorker({ config, prisma, lock, redis, connection, logger });
  logger.info({ queue: config.queueName, concurrency: config.workerConcurrency, lockTtlMs: config.lockTtlMs,
    redis: redactUrl(config.redisUrl), database: redactUrl(config.databaseUrl) }, 'worker started');

  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      logger.info({ signal }, 'worker stopping');
      const force = setTimeout(() => {
        logger.error({ graceMs: SHUTDOWN_GRACE_MS }, 'jobs did not finish in time; exiting');
        process.exit(1);
      }, SHUTDOWN_GRACE_MS);
      force.unref();
      void worker.close().then(resolve, resolve);
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  await prisma.$disconnect();
  redis.disconnect();
  connection.disconnect();
  logger.info('worker stopped');
});
