// The workers of a chaos run: N real processes, each reaching Redis and PostgreSQL through a
// pair of fault proxies of its own, so a link fault can partition one worker from one service.
// On a cluster a worker's Redis link is a proxy per node: the worker's ioredis Cluster maps
// each node's announced address to its own proxy (REDIS_CLUSTER_NAT_MAP).
// The standard apply runs `src/cli/worker.ts` through harness/fleet; the naive apply runs
// `harness/chaos/naive-worker.ts` the same way (a process of its own, so SIGSTOP freezes it whole).
import { join } from 'node:path';
import { redisTargetEnv } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WorkerProcess } from '../fleet/worker-processes.ts';
import { lockEnv } from './chaos-lock.ts';
import { type ChaosOptions, usesUnsafeDecisions, workerUnsafeOf } from './chaos-options.ts';
import type { ChaosServices } from './chaos-services.ts';
import { FaultProxy, FaultProxyGroup, type LinkProxy } from './fault-proxy.ts';
import type { LinkName } from './schedule.ts';

export const NAIVE_WORKER_ENTRY = join(PROJECT_ROOT, 'harness', 'chaos', 'naive-worker.ts');
/** The harness's unsafe modes need this second key on the workers (see src/config/config.ts). */
export const ALLOW_UNSAFE_VALUE = 'i-understand-this-breaks-guarantees';
/** Attempts per job: high, so that faults never exhaust them (a job in the failed set is then news). */
export const CHAOS_JOB_ATTEMPTS_MAX = 200;
export const CHAOS_DB_POOL_MAX = 4;
export const CHAOS_JOB_LOCK_DURATION_MS = 5_000;

export interface ChaosWorker {
  readonly index: number;
  readonly process: WorkerProcess;
  readonly proxies: Readonly<Record<LinkName, LinkProxy>>;
  /** On a cluster: its Redis link to each node (node index → proxy). */
  readonly nodeLinks: ReadonlyMap<number, FaultProxy>;
}

export interface FleetNames {
  readonly queueName: string;
  readonly lockKeyPrefix: string;
}

/** A process's Redis link (a worker's, or an intake run's relay's) and the environment that makes it use it. */
export async function redisLinkOf(
  index: number,
  services: ChaosServices,
  role: 'worker' | 'relay' = 'worker',
): Promise<{ proxy: LinkProxy; env: Record<string, string>; nodeLinks: Map<number, FaultProxy> }> {
  const cluster = services.cluster;
  if (cluster === null) {
    const target = services.redisEndpoint;
    const proxy = await FaultProxy.start(`${role}-${index}:redis`, target.host, target.port);
    const redisUrl = new URL(services.redisUrl);
    redisUrl.hostname = '127.0.0.1';
    redisUrl.port = String(proxy.port);
    return { proxy, env: { REDIS_URL: redisUrl.toString() }, nodeLinks: new Map() };
  }
  const members: FaultProxy[] = [];
  try {
    for (const node of cluster.nodes)
      members.push(await FaultProxy.start(`${role}-${index}:redis-node-${node.index}`, '127.0.0.1', node.port));
  } catch (err) {
    await Promise.all(members.map((m) => m.close()));
    throw err;
  }
  const env = redisTargetEnv({
    redisUrl: services.redisTarget.redisUrl,
    redisCluster: {
      nodes: members.map((m) => ({ host: '127.0.0.1', port: m.port })),
      natMap: Object.fromEntries(
        cluster.nodes.map((n, i) => [
          `127.0.0.1:${n.announcedPort}`,
          { host: '127.0.0.1', port: (members[i] as FaultProxy).port },
        ]),
      ),
    },
  });
  const nodeLinks = new Map(cluster.nodes.map((n, i) => [n.index, members[i] as FaultProxy]));
  return { proxy: new FaultProxyGroup(`${role}-${index}:redis`, members), env, nodeLinks };
}

export class ChaosFleet {
  private constructor(readonly workers: readonly ChaosWorker[]) {}

  static async create(
    options: ChaosOptions,
    services: ChaosServices,
    names: FleetNames,
    logDir: string,
  ): Promise<ChaosFleet> {
    const workers: ChaosWorker[] = [];
    const pgTarget = services.workerPostgresEndpoint;
    try {
      for (let index = 1; index <= options.workers; index++) {
        const redisLink = await redisLinkOf(index, services);
        const redisProxy = redisLink.proxy;
        const pgProxy = await FaultProxy.start(`worker-${index}:postgres`, pgTarget.host, pgTarget.port);
        // The real worker logs in as the least-privilege role. The negative controls that need
        // the owner keep the owner's URL: the naive worker reads and writes the tables itself,
        // and switching a database check off goes through apply_transfers_unsafe() (apply_payments_unsafe()), which
        // the run installed as the owner (harness/chaos/unsafe/) and the worker role may never call.
        const asOwner = options.apply === 'naive' || usesUnsafeDecisions(options);
        const databaseUrl = new URL(asOwner ? services.databaseUrl : services.workerDatabaseUrl);
        databaseUrl.hostname = '127.0.0.1';
        databaseUrl.port = String(pgProxy.port);
        const env: Record<string, string> = {
          DATABASE_URL: databaseUrl.toString(),
          ...services.poolerEnv,
          ...redisLink.env,
          QUEUE_NAME: names.queueName,
          QUEUE_SHARDS: String(options.queueShards),
          QUEUE_SHARDS_CONSUMED: '',
          LOCK_KEY_PREFIX: names.lockKeyPrefix,
          LOCK_TTL_MS: String(options.lockTtlMs),
          WORKER_CONCURRENCY: String(options.concurrency),
          LOG_LEVEL: 'info',
          JOB_ATTEMPTS_MAX: String(CHAOS_JOB_ATTEMPTS_MAX),
          DB_POOL_MAX: String(CHAOS_DB_POOL_MAX),
          // A killed worker's jobs come back after seconds, not BullMQ's default half minute.
          JOB_LOCK_DURATION_MS: String(CHAOS_JOB_LOCK_DURATION_MS),
          JOB_STALLED_INTERVAL_MS: String(CHAOS_JOB_LOCK_DURATION_MS),
          TRANSFERS_UNSAFE: workerUnsafeOf(options.unsafe) ?? '',
          TRANSFERS_ALLOW_UNSAFE: workerUnsafeOf(options.unsafe) === null ? '' : ALLOW_UNSAFE_VALUE,
          ...lockEnv(options.lock, databaseUrl.toString(), services.etcd?.workerEndpoints),
        };
        const proc = new WorkerProcess(index, {
          env,
          logDir,
          ...(options.apply === 'naive' ? { entry: NAIVE_WORKER_ENTRY } : {}),
        });
        workers.push({
          index,
          process: proc,
          proxies: { redis: redisProxy, postgres: pgProxy },
          nodeLinks: redisLink.nodeLinks,
        });
      }
    } catch (err) {
      await Promise.all(workers.flatMap((w) => [w.proxies.redis.close(), w.proxies.postgres.close()]));
      throw err;
    }
    return new ChaosFleet(workers);
  }

  worker(index: number): ChaosWorker {
    const w = this.workers[index - 1];
    if (w === undefined) throw new RangeError(`no worker ${index}`);
    return w;
  }

  /** Every worker's link to one cluster node (none on a single node). */
  redisLinksTo(node: number): FaultProxy[] {
    return this.workers.flatMap((w) => {
      const link = w.nodeLinks.get(node);
      return link === undefined ? [] : [link];
    });
  }

  startAll(): void {
    for (const w of this.workers) w.process.start();
  }

  pids(): number[] {
    return this.workers.map((w) => w.process.pid).filter((p): p is number => p !== undefined);
  }

  /** Every proxy back to a plain pipe and every worker running and thawed. */
  healAll(): void {
    for (const w of this.workers) {
      w.proxies.redis.heal();
      w.proxies.postgres.heal();
      w.process.thaw();
      if (!w.process.running) w.process.start();
    }
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.process.stop()));
  }

  async closeProxies(): Promise<void> {
    await Promise.all(this.workers.flatMap((w) => [w.proxies.redis.close(), w.proxies.postgres.close()]));
  }

  proxyStats(): Record<string, { connections: number; resets: number; refused: number }> {
    const out: Record<string, { connections: number; resets: number; refused: number; replication?: number }> = {};
    for (const w of this.workers) {
      out[w.proxies.redis.name] = { ...w.proxies.redis.stats };
      out[w.proxies.postgres.name] = { ...w.proxies.postgres.stats };
    }
    return out;
  }
}
