// An isolated pipeline for one test file: its own database, queue name and lock key prefix on
// the configured Redis and PostgreSQL, in-process workers built exactly as src/cli/worker.ts
// builds them, and helpers to enqueue raw messages and wait for their results.
import { Queue, QueueEvents, type Job, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../src/config/config.ts';
import { createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { defaultJobOptions, TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { aggregateKeys, CounterAggregatePublisher, readCounterTotals, transferCounterSummary } from '../../src/metrics/counter-aggregate.ts';
import { WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import { bullmqConnection, lockConnection } from '../../src/queue/redis-connection.ts';
import { startTransferWorker, type TransferWorkerHooks } from '../../src/queue/transfer-worker.ts';
import { createTestDatabase, uniqueName, type TestDatabase } from './test-db.ts';

export interface PipelineWorker {
  worker: Worker;
  lock: FencedLock;
  metrics: WorkerMetrics;
  /** Copies this worker's counters to the queue's aggregate in Redis (what a worker process does every second). */
  flushCounters(): Promise<boolean>;
  close(): Promise<void>;
}

export interface Pipeline {
  db: TestDatabase;
  config: Config;
  queue: Queue;
  events: QueueEvents;
  redis: Redis;
  startWorker(hooks?: TransferWorkerHooks, env?: Record<string, string>): Promise<PipelineWorker>;
  /** Adds a job with exactly this data (no producer validation), as a foreign producer could. */
  addRaw(data: unknown, name?: string): Promise<Job>;
  /** Resolves with the return value, or rejects with the failure reason. */
  result(job: Job, timeoutMs?: number): Promise<unknown>;
  settle(job: Job, timeoutMs?: number): Promise<{ ok: true; value: unknown } | { ok: false; reason: string }>;
  balances(): Promise<Record<string, bigint>>;
  debitsOf(operationId: string): Promise<number>;
  /** The workers' counters summed over the queue's aggregate (in-process workers flushed first), under the demo's short names. */
  metrics(): Promise<Record<string, number>>;
  seed(wallets: number, balance: bigint, prefix?: string): Promise<void>;
  close(): Promise<void>;
}

export async function createPipeline(env: Record<string, string> = {}): Promise<Pipeline> {
  const queueName = uniqueName('q');
  const baseEnv = {
    QUEUE_NAME: queueName,
    LOCK_KEY_PREFIX: `${queueName}:`,
    LOCK_TTL_MS: '1000',
    WORKER_CONCURRENCY: '4',
    DB_POOL_MAX: '4',
    JOB_ATTEMPTS_MAX: '30',
    LOG_LEVEL: 'silent',
    ...env,
  };
  const db = await createTestDatabase('ft_pipe', baseEnv);
  const config = db.config;
  const queueConnection = bullmqConnection(config.redisUrl);
  const queue = new Queue(queueName, { connection: queueConnection, defaultJobOptions: defaultJobOptions(config.jobAttemptsMax) });
  const events = new QueueEvents(queueName, { connection: bullmqConnection(config.redisUrl) });
  await events.waitUntilReady();
  const redis = lockConnection(config.redisUrl);
  const workers: PipelineWorker[] = [];

  const pipeline: Pipeline = {
    db,
    config,
    queue,
    events,
    redis,
    async startWorker(hooks, workerEnv = {}) {
      const workerConfig = loadConfig({ ...process.env, ...baseEnv, DATABASE_URL: db.url, ...workerEnv });
      const logger = pino({ level: 'silent' });
      const prisma: PrismaClient = createPrisma(workerConfig);
      const lockRedis = lockConnection(workerConfig.redisUrl);
      const connection = bullmqConnection(workerConfig.redisUrl);
      const lock = new FencedLock({ redis: lockRedis, lockTtlMs: workerConfig.lockTtlMs, keyPrefix: workerConfig.lockKeyPrefix, logger });
      const metrics = new WorkerMetrics({ instanceId: uniqueName('inproc'), queueName });
      const publisher = new CounterAggregatePublisher({
        redis: lockRedis, keys: aggregateKeys(workerConfig.lockKeyPrefix, queueName), metrics, logger,
      });
      const worker = startTransferWorker({ config: workerConfig, prisma, lock, connection, logger, metrics, ...(hooks ? { hooks } : {}) });
      await worker.waitUntilReady();
      let closed = false;
      const handle: PipelineWorker = {
        worker,
        lock,
        metrics,
        flushCounters: () => (closed ? Promise.resolve(true) : publisher.flush()),
        async close() {
          if (closed) return;
          closed = true;
          await worker.close(true);
          await publisher.stop();
          await prisma.$disconnect();
          lockRedis.disconnect();
          connection.disconnect();
        },
      };
      workers.push(handle);
      return handle;
    },
    addRaw(data, name = TRANSFER_JOB_NAME) {
      return queue.add(name, data);
    },
    async result(job, timeoutMs = 30_000) {
      return job.waitUntilFinished(events, timeoutMs);
    },
    async settle(job, timeoutMs = 30_000) {
      try {
        return { ok: true, value: await job.waitUntilFinished(events, timeoutMs) };
      } catch (err) {
        return { ok: false, reason: err instanceof Error ? err.message : String(err) };
      }
    },
    async balances() {
      const rows = (await db.pg.query<{ id: string; balance: string }>('SELECT id, balance FROM wallets ORDER BY id')).rows;
      return Object.fromEntries(rows.map((r) => [r.id, BigInt(r.balance)]));
    },
    async debitsOf(operationId) {
      const r = await db.pg.query<{ n: string }>(
        "SELECT count(*) AS n FROM ledger_entries WHERE operation_id = $1 AND kind = 'debit'", [operationId]);
      return Number(r.rows[0]?.n ?? 0);
    },
    async metrics() {
      for (const w of workers) {
        if (!(await w.flushCounters())) throw new Error('could not copy the in-process counters to Redis');
      }
      return transferCounterSummary(await readCounterTotals(redis, aggregateKeys(config.lockKeyPrefix, queueName)));
    },
    async seed(wallets, balance, prefix = 'w') {
      await seedWallets(db.prisma, { wallets, balanceMinor: balance, prefix, currency: 'EUR' });
    },
    async close() {
      await Promise.all(workers.map((w) => w.close()));
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      await events.close();
      const keys = await redis.keys(`${config.lockKeyPrefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
      queueConnection.disconnect();
      await db.drop();
    },
  };
  return pipeline;
}
