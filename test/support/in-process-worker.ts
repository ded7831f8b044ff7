// A transfer worker inside the test process, built of the parts src/queue/run-worker.ts opens
// (Prisma, the lock and BullMQ connections, the fenced lock, the metrics), for the test support
// that drives one: the pipeline's in-process workers, the observed worker, a gated worker.
import type { Redis } from 'ioredis';
import type { Config } from '../../src/config/config.ts';
import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { createLockService } from '../../src/lock/lock-services.ts';
import type { Logger } from '../../src/log/logger.ts';
import { WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import { bullmqConnection, lockConnection } from '../../src/queue/redis-connection.ts';
import { startTransferWorker, type TransferWorker, type TransferWorkerDeps } from '../../src/queue/transfer-worker.ts';
import { uniqueName } from './test-db.ts';

export interface InProcessWorker {
  readonly running: TransferWorker;
  readonly prisma: PrismaClient;
  readonly metrics: WorkerMetrics;
  /** The lock's connection (the counters' publisher shares it in the pipeline). */
  readonly lockRedis: Redis;
  /**
   * Closes the worker (force: the jobs in hand are not waited for), then runs `beforeConnections`
   * (what still uses its connections: a last flush of counters), then closes the connections.
   */
  close(beforeConnections?: () => Promise<void>): Promise<void>;
}

/** Starts the worker; `instance` names it in the metrics (made unique here). */
export function startInProcessWorker(
  config: Config,
  logger: Logger,
  instance: string,
  extra: Partial<Pick<TransferWorkerDeps, 'hooks' | 'admission' | 'faults'>> = {},
  /** The lock epoch in force in the worker's database (lock-epochs.ts); 0 is Redis before epochs. */
  lockEpoch = 0,
): InProcessWorker {
  const prisma = createPrisma(config);
  const lockRedis = lockConnection(config);
  const connection = bullmqConnection(config);
  // LOCK_BACKEND's lock service, as run-worker.ts builds it (Redis unless the test says otherwise).
  const lock = createLockService(config, { redis: lockRedis, logger, epoch: lockEpoch });
  const metrics = new WorkerMetrics({ instanceId: uniqueName(instance), queueName: config.queueName });
  const running = startTransferWorker({ config, prisma, lock, connection, logger, metrics, ...extra });
  return {
    running,
    prisma,
    metrics,
    lockRedis,
    async close(beforeConnections) {
      await running.close(true);
      await beforeConnections?.();
      await closePrisma(prisma);
      await lock.close();
      lockRedis.disconnect();
      connection.disconnect();
    },
  };
}
