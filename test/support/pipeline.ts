// An isolated pipeline for one test file: its own database, queue name and lock key prefix on
// the configured Redis and PostgreSQL, workers logged in as the database's least-privilege
// role, and helpers to enqueue raw messages and wait for their results. Workers run in this
// process, built exactly as src/cli/worker.ts builds them, unless WORKER_ENTRY names a compiled
// .js entry (the `compiled` vitest project): then every worker without test hooks is that
// compiled worker in a process of its own.
import { type Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterEach } from 'vitest';
import {
  needsClosedCheckDropped,
  needsLimitCheckDropped,
  needsUnsafeDecisions,
} from '../../harness/chaos/unsafe/unsafe-decisions.ts';
import { type Config, loadConfig } from '../../src/config/config.ts';
import { FeedSequencer } from '../../src/intake/feed-sequencer.ts';
import { HoldSweeper } from '../../src/ledger/hold-sweeper.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { currentLockEpoch } from '../../src/lock/lock-epochs.ts';
import {
  aggregateKeys,
  COUNTER_FLUSH_INTERVAL_MS,
  CounterAggregatePublisher,
  readCounterTotals,
  transferCounterSummary,
} from '../../src/metrics/counter-aggregate.ts';
import { defaultJobOptions, TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { bullmqConnection, lockConnection, type RedisClient } from '../../src/queue/redis-connection.ts';
import type { TransferWorkerHooks } from '../../src/queue/transfer-worker.ts';
import { startInProcessWorker } from './in-process-worker.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from './test-db.ts';
import { spawnWorkerProcess } from './worker-process.ts';

export interface PipelineWorker {
  /** In this process (sources, hooks possible) or a child process running Config.workerEntry. */
  kind: 'in-process' | 'process';
  /**
   * Copies this worker's counters to the queue's aggregate in Redis (what a worker process does
   * every second on its own: for one, this waits two of its intervals).
   */
  flushCounters(): Promise<boolean>;
  close(): Promise<void>;
}

export interface Pipeline {
  db: TestDatabase;
  config: Config;
  queue: Queue;
  events: QueueEvents;
  redis: Redis;
  /** The environment a worker of this pipeline runs with (logged in as the worker role). */
  workerEnv: Record<string, string>;
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

/**
 * A fresh pipeline for each test that asks for one, closed after that test: call it once at the
 * top of a test file and open the pipeline inside each test.
 */
export function pipelinePerTest(): (env?: Record<string, string>) => Promise<Pipeline> {
  let current: Pipeline | null = null;
  afterEach(async () => {
    await current?.close();
    current = null;
  });
  return async (env = {}) => {
    current = await createPipeline(env);
    return current;
  };
}

/** Removes every key of the BullMQ queue `name` (best effort, as a test's cleanup), then closes the handle. */
export async function obliterateQueueNamed(name: string, connection: RedisClient): Promise<void> {
  const queue = new Queue(name, { connection });
  await queue.obliterate({ force: true }).catch(() => undefined);
  await queue.close();
}

export async function createPipeline(env: Record<string, string> = {}): Promise<Pipeline> {
  // A caller may name the queue (it must be unique too); the queue, the events and the workers all use it.
  const queueName = env.QUEUE_NAME ?? uniqueName('q');
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
  const workerLogin = await db.workerRole();
  // The negative controls that switch a database check off call apply_transfers_unsafe(), which
  // a migrated database has not: it is installed here (as the chaos harness does) and only the
  // owner may execute it (the worker role never can), so those workers log in as the owner.
  const modesOf = (env: Record<string, string>): string[] =>
    (env.TRANSFERS_UNSAFE ?? '').split(',').map((m) => m.trim());
  const unsafeIn = (env: Record<string, string>): boolean => needsUnsafeDecisions(modesOf(env));
  const installOptionsOf = (env: Record<string, string>) => ({
    withoutLimitCheck: needsLimitCheckDropped(modesOf(env)),
    withoutClosedCheck: needsClosedCheckDropped(modesOf(env)),
  });
  const loginFor = (env: Record<string, string>): Record<string, string> =>
    unsafeIn(env) ? { ...env, DATABASE_URL: db.url } : env;
  if (unsafeIn(env)) await db.installUnsafeDecisions(installOptionsOf(env));
  const workerEnv = loginFor({ ...baseEnv, DATABASE_URL: workerLogin.url, REDIS_URL: config.redisUrl });
  const workerEnvFor = (extraEnv: Record<string, string>): Record<string, string> =>
    loginFor({ ...workerEnv, ...extraEnv });
  const queueConnection = bullmqConnection(config);
  const queue = new Queue(queueName, {
    connection: queueConnection,
    defaultJobOptions: defaultJobOptions(config.jobAttemptsMax),
  });
  // From the stream's first entry, not from '$' (BullMQ's default): its reader re-sends XREAD
  // from '$' after each empty 10 s block, and after abandoning a read that took over 11 s (a
  // loaded machine), until it has read one event; what was written in between is never read.
  // Seen as the first 31 of 1,000 jobs "timed out" though their worker had logged each done in
  // seconds. The queue is this pipeline's own, so its stream holds only this test's events.
  const events = new QueueEvents(queueName, { connection: bullmqConnection(config), lastEventId: '0' });
  // Each job.waitUntilFinished() adds a listener on both while it waits; tests wait for many
  // jobs at once, which is no leak (node would warn at 10).
  queue.setMaxListeners(0);
  events.setMaxListeners(0);
  await events.waitUntilReady();
  const redis = lockConnection(config);
  const workers: PipelineWorker[] = [];

  const pipeline: Pipeline = {
    db,
    config,
    queue,
    events,
    redis,
    workerEnv,
    async startWorker(hooks, extraEnv = {}) {
      if (unsafeIn(extraEnv)) await db.installUnsafeDecisions(installOptionsOf(extraEnv));
      if (hooks === undefined && config.workerEntry.endsWith('.js')) {
        const child = await spawnWorkerProcess(pipeline, extraEnv);
        const handle: PipelineWorker = {
          kind: 'process',
          flushCounters: () => new Promise((resolve) => setTimeout(() => resolve(true), COUNTER_FLUSH_INTERVAL_MS * 2)),
          close: async () => {
            await child.stop();
          },
        };
        workers.push(handle);
        return handle;
      }
      const workerConfig = loadConfig({ ...process.env, ...workerEnvFor(extraEnv) });
      const logger = pino({ level: 'silent' });
      // The epoch in force, as run-worker.ts reads it before its first job.
      const { epoch } = await currentLockEpoch(db.pg);
      const worker = startInProcessWorker(workerConfig, logger, 'inproc', hooks ? { hooks } : {}, epoch);
      const publisher = new CounterAggregatePublisher({
        redis: worker.lockRedis,
        keys: aggregateKeys(workerConfig.lockKeyPrefix, queueName),
        metrics: worker.metrics,
        logger,
      });
      await Promise.all(worker.running.workers.map((w) => w.waitUntilReady()));
      // As the worker process does (run-worker.ts): reading the feed never sequences it.
      const sequencer = new FeedSequencer(worker.prisma, workerConfig.outcomeSequenceIntervalMs, logger);
      sequencer.start();
      const sweeper = new HoldSweeper(worker.prisma, workerConfig.holdSweepIntervalMs, logger, (n) =>
        worker.metrics.holdsReleased(n),
      );
      sweeper.start();
      let closed = false;
      const handle: PipelineWorker = {
        kind: 'in-process',
        flushCounters: () => (closed ? Promise.resolve(true) : publisher.flush()),
        async close() {
          if (closed) return;
          closed = true;
          await worker.close(async () => {
            await sequencer.stop();
            await sweeper.stop();
            await publisher.stop();
          });
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
      const rows = (
        await db.pg.query<{ id: string; balance: string; held: string }>(
          'SELECT id, balance, held FROM wallets ORDER BY id',
        )
      ).rows;
      // Each wallet's own account, and its holding account `$held:<wallet>` (its held) when not empty.
      return Object.fromEntries(
        rows.flatMap((r) => [
          [r.id, BigInt(r.balance)] as const,
          ...(BigInt(r.held) === 0n ? [] : [[`$held:${r.id}`, BigInt(r.held)] as const]),
        ]),
      );
    },
    async debitsOf(operationId) {
      const r = await db.pg.query<{ n: string }>(
        "SELECT count(*) AS n FROM ledger_entries WHERE operation_id = $1 AND kind = 'debit'",
        [operationId],
      );
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
      // A relay started on this pipeline (the refund-service example's) publishes the outcome
      // feed to `<QUEUE_NAME>-outcomes`: that queue goes too, or its jobs stay in the shared Redis.
      await obliterateQueueNamed(config.outcomesQueueName, queueConnection);
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
