// A worker process for the queue-ceiling case: the same BullMQ Worker settings as the real
// worker (src/queue/transfer-worker.ts), but each job does nothing, so what is measured is
// BullMQ and Redis alone. Configuration comes from the same environment (src/config/config.ts).
import { Worker } from 'bullmq';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { JOB_STALLED_COUNT_MAX } from '../../src/queue/transfer-worker.ts';

await runCli(async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'noop-worker');
  const connection = bullmqConnection(config);
  connection.on('error', (err) => logger.warn({ err: err.message }, 'redis (queue) connection error'));
  const worker = new Worker(config.queueName, async () => null, {
    connection,
    concurrency: config.workerConcurrency,
    lockDuration: config.jobLockDurationMs,
    stalledInterval: config.jobStalledIntervalMs,
    maxStalledCount: JOB_STALLED_COUNT_MAX,
  });
  worker.on('error', (err) => logger.error({ err }, 'worker error'));
  logger.info({ queue: config.queueName, concurrency: config.workerConcurrency }, 'no-op worker started');
  await new Promise<void>((resolve) => {
    const stop = () => void worker.close().then(resolve, resolve);
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  connection.disconnect();
});
