// ioredis connections for the two kinds of use: BullMQ's (blocking commands, must retry
// forever) and the lock's (every command bounded, so an unreachable Redis fails a job fast).
// The one place that decides single node or cluster: with REDIS_CLUSTER_NODES set, both are
// ioredis Cluster clients; otherwise plain clients to REDIS_URL, exactly as before.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { redactUrl, type Config, type RedisClusterConfig } from '../config/config.ts';

/** A lock command that has not answered in this long has failed (the watchdog has its own bound). */
export const LOCK_COMMAND_TIMEOUT_MS = 2_000;
/**
 * Cluster clients: after a MOVED, a connection loss or CLUSTERDOWN (a master failing over),
 * wait this long, refresh the slot map and send again.
 */
export const CLUSTER_RETRY_DELAY_MS = 100;
/** A CLUSTER SLOTS refresh that has not answered in this long tries another node. */
export const CLUSTER_SLOTS_REFRESH_TIMEOUT_MS = 2_000;
/** Redirections and retries one lock command makes at most (MOVED/ASK, a node gone): about 1.6 s, then the job retries. */
export const CLUSTER_REDIRECTIONS_MAX = 16;
/**
 * BullMQ's commands must outlive a failover, which takes cluster-node-timeout (15 s by default)
 * plus an election: retried every CLUSTER_FAILOVER_RETRY_DELAY_MS this many times, about 30 s.
 */
export const CLUSTER_FAILOVER_RETRY_DELAY_MS = 200;
export const CLUSTER_FAILOVER_RETRIES_MAX = 150;

export type RedisClient = Redis | Cluster;
/** What a connection needs to know: REDIS_URL, and REDIS_CLUSTER_NODES when in cluster mode. */
export type RedisTarget = Pick<Config, 'redisUrl' | 'redisCluster'>;

export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}

/** In cluster mode REDIS_URL still carries what applies to every node: credentials, and TLS for rediss:. */
export function clusterNodeOptionsOf(redisUrl: string): RedisOptions {
  const u = new URL(redisUrl);
  return {
    ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
    ...(u.password === '' ? {} : { password: decodeURIComponent(u.password) }),
    ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

function clusterClient(cluster: RedisClusterConfig, redisUrl: string, redisOptions: RedisOptions,
  retry: { delayMs: number; max: number }): Cluster {
  const options: ClusterOptions = {
    redisOptions: { ...clusterNodeOptionsOf(redisUrl), ...redisOptions },
    enableReadyCheck: true,
    retryDelayOnFailover: retry.delayMs,
    retryDelayOnClusterDown: retry.delayMs,
    retryDelayOnTryAgain: retry.delayMs,
    slotsRefreshTimeout: CLUSTER_SLOTS_REFRESH_TIMEOUT_MS,
    maxRedirections: retry.max,
    // Every command goes to the master of its slot: the lock and BullMQ read what they wrote.
    scaleReads: 'master',
    ...(Object.keys(cluster.natMap).length === 0 ? {} : { natMap: { ...cluster.natMap } }),
  };
  return new Cluster(cluster.nodes.map((n) => ({ host: n.host, port: n.port })), options);
}

const BULLMQ_OPTIONS: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };
const LOCK_OPTIONS: RedisOptions = {
  maxRetriesPerRequest: 1,
  commandTimeout: LOCK_COMMAND_TIMEOUT_MS,
  enableOfflineQueue: true,
};

/** BullMQ requires maxRetriesPerRequest: null on connections used by workers. */
export function bullmqConnection(redisUrl: string): Redis;
export function bullmqConnection(target: RedisTarget): RedisClient;
export function bullmqConnection(target: string | RedisTarget): RedisClient {
  if (typeof target === 'string') return new Redis(target, BULLMQ_OPTIONS);
  if (target.redisCluster !== null) {
    return clusterClient(target.redisCluster, target.redisUrl, BULLMQ_OPTIONS,
      { delayMs: CLUSTER_FAILOVER_RETRY_DELAY_MS, max: CLUSTER_FAILOVER_RETRIES_MAX });
  }
  return new Redis(target.redisUrl, BULLMQ_OPTIONS);
}

export function lockConnection(redisUrl: string): Redis;
export function lockConnection(target: RedisTarget): RedisClient;
export function lockConnection(target: string | RedisTarget): RedisClient {
  if (typeof target === 'string') return new Redis(target, LOCK_OPTIONS);
  if (target.redisCluster !== null) {
    return clusterClient(target.redisCluster, target.redisUrl, LOCK_OPTIONS, { delayMs: CLUSTER_RETRY_DELAY_MS, max: CLUSTER_REDIRECTIONS_MAX });
  }
  return new Redis(target.redisUrl, LOCK_OPTIONS);
}

/** Where the process's Redis is, safe to log (no password). */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.redisCluster === null) return redactUrl(target.redisUrl);
  return `cluster ${target.redisCluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
}
