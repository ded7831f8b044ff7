// A worker process for `--apply naive`: the same queue, lock, watchdog and metrics as
// src/cli/worker.ts, but the decision is the naive read-modify-write of naive-apply.ts.
// It runs as a process of its own so the harness can SIGSTOP it mid-transfer.
// Configuration comes from the same environment contract (src/config/config.ts).
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import { runCli } from '../cli/run-cli.ts';
import { loadConfig } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import type { TransferOutcome } from '../ledger/outcome.ts';
import { validateTransferRequest } from '../ledger/transfer-request.ts';
import { fullJitterDelayMs } from '../lock/backoff.ts';
import { FencedLock } from '../lock/fenced-lock.ts';
import { LockLostError } from '../lock/lock-errors.ts';
import { withLock } from '../lock/with-lock.ts';
import { createLogger } from '../log/logger.ts';
import { transferBackoffMs, TRANSFER_JOB_NAME } from '../queue/job-options.ts';
import { metricsKey, recordEvents, type MetricEvent } from '../queue/metrics.ts';
import { bullmqConnection, lockConnection } from '../queue/redis-connection.ts';
import {
  JOB_STALLED_COUNT_MAX, LOCK_BUSY_DELAY_BASE_MS, LOCK_BUSY_DELAY_CAP_MS, STALE_FENCE_ROUNDS_MAX,
} from '../queue/transfer-worker.ts';
import { naiveApply } from './naive-apply.ts';

const SHUTDOWN_GRACE_MS = 10_000;

await runCli(async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'naive-worker');
  const fence = !config.unsafe.includes('no-fencing');
  logger.warn({ fence }, 'NAIVE APPLY: read-modify-write of absolute balances; for the chaos harness only');
  const prisma = createPrisma(config, (err) => logger.warn({ err }, 'database connection error'));
  const redis = lockConnection(config.redisUrl);
  redis.on('error', (err) => logger.warn({ err: err.message }, 'redis (lock) connection error'));
  const connection = bullmqConnection(config.redisUrl);
  connection.on('error', (err) => logger.warn({ err: err.message }, 'redis (queue) connection error'));
  const lock = new FencedLock({ redis, lockTtlMs: config.lockTtlMs, keyPrefix: config.lockKeyPrefix, logger });
  const key = metricsKey(config.lockKeyPrefix, config.queueName);
  const count = async (...events: MetricEvent[]) => {
    try {
      await recordEvents(redis, key, events);
    } catch {
      // Counters are for the report; a lost one must not fail the transfer.
    }
  };

  const processJob = async (job: Job, bullToken: string | undefined): Promise<TransferOutcome> => {
    if (job.name !== TRANSFER_JOB_NAME) throw new UnrecoverableError(`invalid_request: unknown job name ${JSON.stringify(job.name.slice(0, 64))}`);
    const verdict = validateTransferRequest(job.data, config.transferAmountMax);
    if (!verdict.ok) {
      await count('invalid');
      throw new UnrecoverableError(`invalid_request: ${verdict.reason}`);
    }
    const request = verdict.request;
    for (let round = 1; ; round += 1) {
      let locked;
      try {
        locked = await withLock(lock, request.from, (_signal, token, lease) =>
          naiveApply(prisma, request, token, { fence, assertHeld: () => lease.assertHeld() }));
      } catch (err) {
        if (err instanceof LockLostError) {
          await count('lock_lost');
          throw new Error(`lock_lost: ${err.message}`);
        }
        await count('transient_error');
        throw err;
      }
      if (locked.kind === 'busy') {
        await count('lock_busy');
        const deferrals = Math.max(0, job.attemptsStarted - job.attemptsMade - 1);
        const capMs = Math.max(LOCK_BUSY_DELAY_BASE_MS, Math.min(LOCK_BUSY_DELAY_CAP_MS, locked.retryAfterMs));
        await job.moveToDelayed(Date.now() + fullJitterDelayMs(Math.min(deferrals, 16), LOCK_BUSY_DELAY_BASE_MS, capMs, Math.random) + 1, bullToken);
        throw new DelayedError();
      }
      const result = locked.value;
      if (result.outcome !== 'stale_fence') {
        await count(result.outcome);
        logger.info({ event: 'transfer_done', operationId: request.operationId, walletId: request.from,
          fence: locked.token.toString(), outcome: result.outcome }, 'transfer decided');
        return result;
      }
      await count('stale_fence');
      logger.warn({ event: 'transfer_stale_fence', operationId: request.operationId, walletId: request.from,
        fence: locked.token.toString(), walletFence: result.walletFence.toString() }, 'naive write refused: stale fence');
      const advanced = await lock.advanceFence(request.from, result.walletFence);
      if (advanced.kind === 'raised') await count('fence_advanced');
      if (round >= STALE_FENCE_ROUNDS_MAX) throw new Error(`stale_fence: refused ${round} times`);
    }
  };

  const worker = new Worker(config.queueName, processJob, {
    connection,
    concurrency: config.workerConcurrency,
    lockDuration: config.jobLockDurationMs,
    stalledInterval: config.jobStalledIntervalMs,
    maxStalledCount: JOB_STALLED_COUNT_MAX,
    settings: { backoffStrategy: (attemptsMade: number) => transferBackoffMs(attemptsMade) },
  });
  worker.on('error', (err) => logger.error({ err }, 'worker error'));
  logger.info({ queue: config.queueName, concurrency: config.workerConcurrency }, 'naive worker started');

  await new Promise<void>((resolve) => {
    const stop = () => {
      const force = setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS);
      force.unref();
      void worker.close().then(resolve, resolve);
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await prisma.$disconnect();
  redis.disconnect();
  connection.disconnect();
});
