// Throughput of the whole pipeline against worker processes and queue shards, on private
// servers started here: a Redis Cluster of 3 masters (and one single redis-server for the
// reference row) and a PostgreSQL with fsync on. Each case gets a fresh database of seeded
// wallets and empty queues; the queues are paused, the worker processes started, the transfers
// enqueued (the producer is not measured), then the queues resumed. Throughput is the transfers
// answered divided by the time from the first job a worker took to the last answer, both as
// BullMQ recorded them; CPU per transfer is what the worker processes, the Redis servers and
// PostgreSQL (postmaster and backends) spent between resume and drain.
// The figures of docs/operating/scaling.md come from here (`npm run scaling`).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import { type RedisClusterConfig, redisTargetEnv, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { createPrisma } from '../../src/db/prisma.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { enqueueTransfers, TransferQueues } from '../../src/queue/producer.ts';
import { waitForDrain } from '../../src/queue/queue-drain.ts';
import { bullmqConnection, type RedisTarget } from '../../src/queue/redis-connection.ts';
import { dataNodesOf } from '../../src/queue/redis-scan.ts';
import { randomWorkload } from '../../src/workload/random-transfers.ts';
import { WorkerProcess, waitForWorkersConnected } from '../fleet/worker-processes.ts';
import { LocalPostgres } from '../services/local-postgres.ts';
import { LocalRedis } from '../services/local-redis.ts';
import { LocalRedisCluster } from '../services/local-redis-cluster.ts';
import { cpuMsOf, processTree } from './process-cpu.ts';

export const SCALING_WALLETS = 10_000;
export const SCALING_BALANCE_MINOR = 1_000_000_000n;
/**
 * WORKER_CONCURRENCY per shard: the worker's default when docs/operating/scaling.md's figures were
 * taken (64 since), kept so that a new run compares with them.
 */
export const SCALING_WORKER_CONCURRENCY = 32;
export const SCALING_DB_POOL_MAX = 8;
export const SCALING_WORKERS_READY_TIMEOUT_MS = 60_000;
export const SCALING_DRAIN_TIMEOUT_MS = 600_000;
const JOBS_PAGE_SIZE = 2_000;

export interface ScalingCase {
  readonly redis: 'single' | 'cluster';
  readonly shards: number;
  readonly workers: number;
}

export interface ScalingResult extends ScalingCase {
  readonly transfers: number;
  /** From the first job taken to the last answer. */
  readonly busyMs: number;
  readonly perSecond: number;
  /** Producer: transfers enqueued per second (addBulk, before the workers start). */
  readonly enqueuedPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** CPU milliseconds per transfer, between resume and drain. */
  readonly cpuMsPerTransfer: { readonly workers: number; readonly redis: number; readonly postgres: number };
  /** 1-minute load average of the machine before and after the case. */
  readonly loadBefore: number;
  readonly loadAfter: number;
  readonly reconciled: boolean;
}

export interface ScalingOptions {
  readonly cases: readonly ScalingCase[];
  readonly transfers: number;
  readonly out: string;
  readonly log: (line: string) => void;
  /** The worker entry (WORKER_ENTRY): the sources through tsx, or dist/cli/worker.js. */
  readonly workerEntry?: string;
}

/** Every (redis, shards, workers) the docs table holds. */
export function defaultCases(workers: readonly number[] = [1, 2, 4]): ScalingCase[] {
  return [
    ...workers.map((w) => ({ redis: 'single' as const, shards: 1, workers: w })),
    ...workers.map((w) => ({ redis: 'cluster' as const, shards: 1, workers: w })),
    ...workers.map((w) => ({ redis: 'cluster' as const, shards: 3, workers: w })),
  ];
}

function quantile(sorted: readonly number[], q: number): number {
  return sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number);
}

async function answeredJobs(
  queues: readonly Queue[],
): Promise<{ processedOn: number; finishedOn: number; timestamp: number }[]> {
  const out = [];
  for (const queue of queues) {
    for (let start = 0; ; start += JOBS_PAGE_SIZE) {
      const page = await queue.getJobs(['completed'], start, start + JOBS_PAGE_SIZE - 1, true);
      for (const j of page) {
        if (j?.processedOn !== undefined && j.finishedOn !== undefined)
          out.push({ processedOn: j.processedOn, finishedOn: j.finishedOn, timestamp: j.timestamp });
      }
      if (page.length < JOBS_PAGE_SIZE) break;
    }
  }
  return out;
}

async function runCase(
  c: ScalingCase,
  index: number,
  target: RedisTarget,
  postgres: LocalPostgres,
  redisPids: readonly number[],
  o: ScalingOptions,
  logDir: string,
): Promise<ScalingResult> {
  const databaseUrl = withDatabase(postgres.url, `scaling_${index}`);
  await dropDatabase(databaseUrl);
  await migrate(databaseUrl, MIGRATIONS_DIR);
  const prisma = createPrisma({
    databaseUrl,
    databasePooler: 'none',
    dbPoolMax: 4,
    dbStatementTimeoutMs: 60_000,
    dbLockTimeoutMs: 10_000,
    dbIdleInTransactionTimeoutMs: 60_000,
  });
  await seedWallets(prisma, {
    wallets: SCALING_WALLETS,
    balanceMinor: SCALING_BALANCE_MINOR,
    prefix: 'w',
    currency: 'EUR',
  });

  const config = { ...target, queueName: 'transfers', queueShards: c.shards };
  const connection = bullmqConnection(target);
  connection.on('error', () => undefined);
  // A clean slate: this case's queues and lock keys only (the servers are private to the run).
  for (const node of await dataNodesOf(connection)) await node.flushall();
  const queues = TransferQueues.open(connection, config, 20);
  const workers: WorkerProcess[] = [];
  try {
    const wires = randomWorkload({
      transfers: o.transfers,
      wallets: SCALING_WALLETS,
      walletPrefix: 'w',
      duplicateRate: 0,
      conflicts: 0,
      amountMaxMinor: 100,
      seed: 1_000 + index,
      operationPrefix: `s${index}-`,
    }).map((m) => m.wire);
    // Paused while the workers start and the transfers go in: neither is measured.
    for (const q of queues.queues) await q.pause();
    const tEnqueue = performance.now();
    await enqueueTransfers(queues, wires, SCALING_BALANCE_MINOR);
    const enqueuedPerSecond = wires.length / ((performance.now() - tEnqueue) / 1000);

    const env: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      ...redisTargetEnv(target),
      QUEUE_NAME: 'transfers',
      QUEUE_SHARDS: String(c.shards),
      QUEUE_SHARDS_CONSUMED: '',
      LOCK_KEY_PREFIX: 'sc:',
      WORKER_CONCURRENCY: String(SCALING_WORKER_CONCURRENCY),
      DB_POOL_MAX: String(SCALING_DB_POOL_MAX),
      LOG_LEVEL: 'warn',
      TRANSFERS_UNSAFE: '',
    };
    for (let w = 1; w <= c.workers; w += 1) {
      const proc = new WorkerProcess(w, {
        env,
        logDir: join(logDir, `case-${index}`),
        ...(o.workerEntry === undefined ? {} : { entry: o.workerEntry }),
      });
      proc.start();
      workers.push(proc);
    }
    // Every worker consumes every shard: the fewest a shard counts is how many are up.
    await waitForWorkersConnected(
      workers,
      async () => Math.min(...(await Promise.all(queues.queues.map((q) => q.getWorkersCount())))),
      SCALING_WORKERS_READY_TIMEOUT_MS,
    );
    const pgPid = postgres.postmasterPid();
    const parts = () => ({
      workers: cpuMsOf(workers.map((w) => w.pid).filter((p): p is number => p !== undefined)),
      redis: cpuMsOf(redisPids),
      postgres: pgPid === null ? 0 : cpuMsOf(processTree(pgPid)),
    });
    const loadBefore = loadavg()[0] as number;
    const cpuBefore = parts();
    for (const q of queues.queues) await q.resume();
    await waitForDrain(queues.queues, SCALING_DRAIN_TIMEOUT_MS);
    const cpuAfter = parts();
    const loadAfter = loadavg()[0] as number;
    const jobs = await answeredJobs(queues.queues);
    // Exactly this case's transfers, or the figures would mix cases.
    if (jobs.length !== wires.length) throw new Error(`expected ${wires.length} answered jobs, found ${jobs.length}`);
    const first = Math.min(...jobs.map((j) => j.processedOn));
    const last = Math.max(...jobs.map((j) => j.finishedOn));
    const busyMs = Math.max(1, last - first);
    const latencies = jobs.map((j) => j.finishedOn - j.processedOn).sort((a, b) => a - b);
    const report = await reconcile(prisma);
    return {
      ...c,
      transfers: jobs.length,
      busyMs,
      perSecond: Math.round(jobs.length / (busyMs / 1000)),
      enqueuedPerSecond: Math.round(enqueuedPerSecond),
      cpuMsPerTransfer: {
        workers: Math.round(((cpuAfter.workers - cpuBefore.workers) / jobs.length) * 100) / 100,
        redis: Math.round(((cpuAfter.redis - cpuBefore.redis) / jobs.length) * 100) / 100,
        postgres: Math.round(((cpuAfter.postgres - cpuBefore.postgres) / jobs.length) * 100) / 100,
      },
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      loadBefore: Math.round(loadBefore * 10) / 10,
      loadAfter: Math.round(loadAfter * 10) / 10,
      reconciled: report.ok,
    };
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await queues.close();
    connection.disconnect();
    await prisma.$disconnect();
    await dropDatabase(databaseUrl).catch(() => undefined);
  }
}

export function renderTable(results: readonly ScalingResult[]): string {
  const lines = [
    '| Redis | queue shards | worker processes | transfers/s | CPU ms per transfer: workers / Redis / PostgreSQL | p50 / p99 job time (ms) | ' +
      'producer enqueue/s | load avg before → after | reconciled |',
    '| --- | ---: | ---: | ---: | --- | --- | ---: | --- | --- |',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.redis === 'cluster' ? 'cluster, 3 masters' : 'single node'} | ${r.shards} | ${r.workers} | ${r.perSecond} | ` +
        `${r.cpuMsPerTransfer.workers} / ${r.cpuMsPerTransfer.redis} / ${r.cpuMsPerTransfer.postgres} | ${r.p50Ms} / ${r.p99Ms} | ${r.enqueuedPerSecond} | ${r.loadBefore} → ${r.loadAfter} | ${r.reconciled ? 'yes' : 'NO'} |`,
    );
  }
  return lines.join('\n');
}

export async function runScaling(o: ScalingOptions): Promise<ScalingResult[]> {
  mkdirSync(o.out, { recursive: true });
  const root = mkdtempSync(join(tmpdir(), 'ft-scaling-'));
  // A folder of its own: LocalPostgres hands it to the postgres user, who cannot enter `root`.
  const pgDir = mkdtempSync(join(tmpdir(), 'ft-scaling-pg-'));
  let postgres: LocalPostgres | null = null;
  let single: LocalRedis | null = null;
  let cluster: LocalRedisCluster | null = null;
  const results: ScalingResult[] = [];
  try {
    postgres = await LocalPostgres.start({ dir: pgDir, fsync: true });
    if (o.cases.some((c) => c.redis === 'single')) single = await LocalRedis.start({ dir: join(root, 'redis') });
    if (o.cases.some((c) => c.redis === 'cluster'))
      cluster = await LocalRedisCluster.start({ dir: join(root, 'cluster'), masters: 3 });
    for (const [i, c] of o.cases.entries()) {
      const target: RedisTarget =
        c.redis === 'single'
          ? { redisUrl: (single as LocalRedis).url, redisTlsCaFile: null, redisCluster: null }
          : {
              redisUrl: 'redis://127.0.0.1',
              redisTlsCaFile: null,
              redisCluster: {
                nodes: (cluster as LocalRedisCluster).seedNodes,
                natMap: {},
              } satisfies RedisClusterConfig,
            };
      o.log(
        `case ${i + 1}/${o.cases.length}: ${c.redis}, ${c.shards} shard(s), ${c.workers} worker(s), ${o.transfers} transfers`,
      );
      const redisPids = (
        c.redis === 'single' ? [single?.pid] : (cluster as LocalRedisCluster).nodes.map((n) => n.server.pid)
      ).filter((p): p is number => p !== undefined);
      const r = await runCase(c, i, target, postgres, redisPids, o, join(o.out, 'workers'));
      o.log(
        `  ${r.perSecond} transfers/s (p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms), CPU ms per transfer ${JSON.stringify(r.cpuMsPerTransfer)}, ` +
          `load ${r.loadBefore} → ${r.loadAfter}`,
      );
      results.push(r);
      writeFileSync(join(o.out, 'results.json'), `${JSON.stringify(results, null, 2)}\n`);
    }
    writeFileSync(join(o.out, 'table.md'), `${renderTable(results)}\n`);
    return results;
  } finally {
    await cluster?.stop().catch(() => undefined);
    await single?.stop().catch(() => undefined);
    await postgres?.stop('immediate').catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
    rmSync(pgDir, { recursive: true, force: true });
  }
}
