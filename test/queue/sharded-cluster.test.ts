// Sharded queues on a private 3-master Redis Cluster, end to end through the real commands: two
// worker processes (`npm run worker`'s entry) and the producer (`npm run enqueue`) with
// QUEUE_SHARDS=3. Every transfer ends with exactly one outcome, the ledger reconciles, every
// job sits in the shard of its source wallet, and the three queues' keys live on at least two
// different masters (found by scanning each master, and checked against CLUSTER KEYSLOT).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { LocalRedisCluster, parseClusterNodes } from '../../harness/services/local-redis-cluster.ts';
import { loadConfig, redisTargetEnv } from '../../src/config/config.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { keySlot } from '../../src/lock/key-slot.ts';
import { TransferQueues } from '../../src/queue/producer.ts';
import { waitForDrain } from '../../src/queue/queue-drain.ts';
import { queueShardsOf, shardIndexOf } from '../../src/queue/queue-shards.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const SHARDS = 3;
const WORKERS = 2;
const WALLETS = 30;
const TRANSFERS = 600;
const DUPLICATE_RATE = '0.2';
const WORKERS_READY_TIMEOUT_MS = 60_000;
const DRAIN_TIMEOUT_MS = 180_000;
const JOBS_PAGE_SIZE = 1_000;

let cluster: LocalRedisCluster | null = null;
let db: TestDatabase | null = null;
let client: Cluster | null = null;
let queues: TransferQueues | null = null;
const workers: WorkerProcess[] = [];
const dirs: string[] = [];

function temp(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `ft-sharded-${label}-`));
  dirs.push(dir);
  return dir;
}

/** The environment of every process of the test: the private cluster, three shards, the test database. */
function env(): Record<string, string> {
  if (cluster === null || db === null) throw new Error('not set up');
  return {
    DATABASE_URL: db.url,
    ...redisTargetEnv({ redisUrl: 'redis://127.0.0.1', redisCluster: { nodes: cluster.seedNodes, natMap: {} } }),
    // The default name: on an even three-way split its three shards land on two masters.
    QUEUE_NAME: 'transfers',
    QUEUE_SHARDS: String(SHARDS),
    LOCK_KEY_PREFIX: 'sharded:',
    LOCK_TTL_MS: '2000',
    WORKER_CONCURRENCY: '4',
    DB_POOL_MAX: '4',
    JOB_ATTEMPTS_MAX: '30',
    LOG_LEVEL: 'info',
  };
}

beforeAll(async () => {
  cluster = await LocalRedisCluster.start({ dir: temp('cluster'), masters: 3 });
  db = await createTestDatabase('ft_sharded');
  await db.pg.query('SELECT 1');
  const { seedWallets } = await import('../../src/ledger/seed-wallets.ts');
  await seedWallets(db.prisma, { wallets: WALLETS, balanceMinor: 1_000_000n, prefix: 'w', currency: 'EUR' });
  const config = loadConfig(env());
  client = bullmqConnection(config) as unknown as Cluster;
  client.on('error', () => undefined);
  queues = TransferQueues.open(client, config, config.jobAttemptsMax);
  const logDir = temp('logs');
  for (let index = 1; index <= WORKERS; index += 1) {
    const w = new WorkerProcess(index, { env: env(), logDir });
    w.start();
    workers.push(w);
  }
  const deadline = performance.now() + WORKERS_READY_TIMEOUT_MS;
  for (const q of queues.queues) {
    while ((await q.getWorkersCount()) < WORKERS) {
      if (workers.some((w) => !w.running)) throw new Error(`a worker process exited during start; logs in ${logDir}`);
      if (performance.now() > deadline)
        throw new Error(`workers did not register with ${q.name} in time; logs in ${logDir}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await queues?.close();
  client?.disconnect();
  await cluster?.stop();
  await db?.drop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}, 60_000);

async function allJobs(queue: Queue) {
  const out = [];
  for (let start = 0; ; start += JOBS_PAGE_SIZE) {
    const page = await queue.getJobs(['completed', 'failed'], start, start + JOBS_PAGE_SIZE - 1, true);
    out.push(...page.filter((j) => j !== undefined && j !== null));
    if (page.length < JOBS_PAGE_SIZE) return out;
  }
}

/** Port of the master that holds at least one key matching `pattern`, scanning every master. */
async function mastersHolding(pattern: string, masters: readonly Redis[]): Promise<number[]> {
  const holders: number[] = [];
  for (const node of masters) {
    const [, keys] = await node.scan('0', 'MATCH', pattern, 'COUNT', 10_000);
    if (keys.length > 0) holders.push(node.options.port as number);
  }
  return holders;
}

describe('QUEUE_SHARDS=3 on a Redis Cluster', () => {
  it('2 worker processes and the producer: one outcome per transfer, reconciled, shards on several masters', async () => {
    const produced = await runSource(
      'src/cli/enqueue.ts',
      [
        '--random',
        String(TRANSFERS),
        '--wallets',
        String(WALLETS),
        '--duplicates',
        DUPLICATE_RATE,
        '--seed',
        '7',
        '--prefix',
        'w',
      ],
      env(),
      120_000,
    );
    expect(produced.code, describeRun(produced)).toBe(0);
    const summary = lastJsonLine(produced) as { enqueued: number; duplicates: number };
    // --random N sends N operations, and each re-delivery as one more job.
    expect(summary.enqueued).toBe(TRANSFERS + summary.duplicates);
    expect(summary.duplicates).toBeGreaterThan(0);

    await waitForDrain(queues!.queues, DRAIN_TIMEOUT_MS);

    // Every job finished, in the shard of its source wallet, with one answer per delivery.
    const outcomes = new Map<string, string[]>();
    let jobs = 0;
    for (const { shard, queue } of queues!.shards) {
      const shardJobs = await allJobs(queue);
      expect(shardJobs.length, `shard ${shard.name}`).toBeGreaterThan(0);
      for (const job of shardJobs) {
        jobs += 1;
        expect(await job.getState()).toBe('completed');
        const data = job.data as { operationId: string; from: string };
        expect(shardIndexOf(data.from, SHARDS)).toBe(shard.index);
        const outcome = (job.returnvalue as { outcome: string }).outcome;
        outcomes.set(data.operationId, [...(outcomes.get(data.operationId) ?? []), outcome]);
      }
    }
    expect(jobs).toBe(summary.enqueued);
    const operations = TRANSFERS;
    expect(outcomes.size).toBe(operations);
    for (const [operationId, answers] of outcomes) {
      expect(
        answers.filter((a) => a === 'applied'),
        operationId,
      ).toHaveLength(1);
      expect(
        answers.filter((a) => a !== 'applied' && a !== 'duplicate'),
        operationId,
      ).toEqual([]);
    }
    const rows = await db!.pg.query<{ status: string; n: string }>(
      'SELECT status, count(*) AS n FROM transfers GROUP BY status',
    );
    expect(rows.rows).toEqual([{ status: 'applied', n: String(operations) }]);
    const report = await reconcile(db!.prisma);
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
    expect(report.ok).toBe(true);

    // Where the shards' keys are: scan each master, and ask the servers which master owns the slot.
    const view = parseClusterNodes(String(await cluster!.onNode(0, (c) => c.call('CLUSTER', 'NODES'))), (id) =>
      cluster!.indexOfId(id),
    );
    const masterIndexes = view.filter((v) => v.role === 'master').map((v) => v.index as number);
    expect(masterIndexes).toHaveLength(3);
    const masterClients = masterIndexes.map((i) => cluster!.nodeClient(i));
    try {
      const holders = new Set<number>();
      for (const shard of queueShardsOf(loadConfig(env()))) {
        const sample = `${shard.prefix}:${shard.name}:meta`;
        const found = await mastersHolding(`${shard.prefix}:${shard.name}:*`, masterClients);
        expect(found, shard.name).toHaveLength(1);
        const slot = Number(await cluster!.onNode(0, (c) => c.call('CLUSTER', 'KEYSLOT', sample)));
        expect(slot).toBe(keySlot(sample));
        const owner = view.find((v) => v.role === 'master' && v.slots.some(([a, b]) => slot >= a && slot <= b));
        expect(cluster!.node(owner?.index as number).port).toBe(found[0]);
        holders.add(found[0] as number);
      }
      expect(holders.size).toBeGreaterThanOrEqual(2);
    } finally {
      for (const c of masterClients) c.disconnect();
    }
  }, 300_000);
});
