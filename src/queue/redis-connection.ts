// ioredis connections for the two kinds of use: BullMQ's (blocking commands, must retry
// forever) and the lock's (every command bounded, so an unreachable Redis fails a job fast).
// The one place that decides single node or cluster: with REDIS_CLUSTER_NODES set, both are
// ioredis Cluster clients; otherwise plain clients to REDIS_URL, exactly as before.
// A rediss:// URL speaks TLS and verifies the server's certificate (against REDIS_TLS_CA_FILE
// when given, else the system's CAs) and its host name; there is no switch to skip either.
import { readFileSync } from 'node:fs';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { type Config, type RedisClusterConfig, redactUrl } from '../config/config.ts';
import { redactText } from '../log/redact.ts';
import { withinMs } from '../ops/probes.ts';

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

/** An ioredis client: one node, or a cluster. */
export type RedisClient = Redis | Cluster;
/** Where Redis is and how to trust it: REDIS_URL, REDIS_TLS_CA_FILE, and REDIS_CLUSTER_NODES in cluster mode. */
export type RedisTarget = Pick<Config, 'redisUrl' | 'redisTlsCaFile' | 'redisCluster'>;
/** A single node and how to trust it. */
export type RedisEndpoint = Pick<Config, 'redisUrl' | 'redisTlsCaFile'>;

export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}

/** The TLS options for an endpoint: none for redis://, the CA file's certificates for rediss://. */
export function redisTlsOptions(endpoint: RedisEndpoint): Pick<RedisOptions, 'tls'> {
  if (new URL(endpoint.redisUrl).protocol !== 'rediss:') return {};
  return { tls: endpoint.redisTlsCaFile === null ? {} : { ca: readFileSync(endpoint.redisTlsCaFile) } };
}

/** In cluster mode REDIS_URL still carries what applies to every node: credentials, and TLS for rediss:. */
export function clusterNodeOptionsOf(endpoint: RedisEndpoint): RedisOptions {
  const u = new URL(endpoint.redisUrl);
  return {
    ...(u.username === '' ? {} : { username: decodeURIComponent(u.username) }),
    ...(u.password === '' ? {} : { password: decodeURIComponent(u.password) }),
    ...redisTlsOptions(endpoint),
  };
}

/**
 * Without an 'error' listener ioredis prints the whole error object, and a refused AUTH
 * carries the password in `command.args`. This listener speaks only while no other one is
 * attached (callers with a logger attach theirs), with the message alone.
 */
function reportErrorsSafely<T extends RedisClient>(redis: T): T {
  redis.on('error', (err: Error) => {
    if (redis.listenerCount('error') > 1) return;
    process.stderr.write(`redis connection error: ${redactText(err.message)}\n`);
  });
  return redis;
}

function clusterClient(
  cluster: RedisClusterConfig,
  endpoint: RedisEndpoint,
  redisOptions: RedisOptions,
  retry: { delayMs: number; max: number },
): Cluster {
  const options: ClusterOptions = {
    redisOptions: { ...clusterNodeOptionsOf(endpoint), ...redisOptions },
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
  return new Cluster(
    cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
    options,
  );
}

const BULLMQ_OPTIONS: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };
const LOCK_OPTIONS: RedisOptions = {
  maxRetriesPerRequest: 1,
  commandTimeout: LOCK_COMMAND_TIMEOUT_MS,
  enableOfflineQueue: true,
};
// On a single server the lock scripts already gather a turn's acquisitions into one call and its
// releases into another (src/lock/lock-scripts.ts), so ioredis's auto-pipelining only wrapped
// each call in a pipeline object of its own, and the e2e workers spent less CPU per transfer
// without it (measured: docs/verification/results/performance-history.md). The worker coalesces the connection's writes
// instead (coalesced-writes.ts, applied in run-worker.ts): a turn's calls still leave in one
// write. In a cluster every lock call holds one wallet, so a turn has many: there ioredis's
// auto-pipelining sends those of one node together.
const LOCK_CLUSTER_OPTIONS: RedisOptions = { ...LOCK_OPTIONS, enableAutoPipelining: true };

function endpointOf(target: string | RedisEndpoint): RedisEndpoint {
  return typeof target === 'string' ? { redisUrl: target, redisTlsCaFile: null } : target;
}

function clusterOf(target: string | RedisEndpoint | RedisTarget): RedisClusterConfig | null {
  return typeof target === 'string' || !('redisCluster' in target) ? null : target.redisCluster;
}

/**
 * A Redis connection (a cluster client under REDIS_CLUSTER_NODES) for BullMQ queues and workers:
 * BullMQ requires maxRetriesPerRequest: null on connections used by workers.
 *
 * @throws the file system's error when the REDIS_TLS_CA_FILE it names cannot be read, a TypeError
 * for a REDIS_URL that is not a URL (loadConfig() refuses both first).
 */
export function bullmqConnection(target: string | RedisEndpoint): Redis;
export function bullmqConnection(target: RedisTarget): RedisClient;
export function bullmqConnection(target: string | RedisEndpoint | RedisTarget): RedisClient {
  const endpoint = endpointOf(target);
  const cluster = clusterOf(target);
  if (cluster !== null) {
    return reportErrorsSafely(
      clusterClient(cluster, endpoint, BULLMQ_OPTIONS, {
        delayMs: CLUSTER_FAILOVER_RETRY_DELAY_MS,
        max: CLUSTER_FAILOVER_RETRIES_MAX,
      }),
    );
  }
  return reportErrorsSafely(new Redis(endpoint.redisUrl, { ...BULLMQ_OPTIONS, ...redisTlsOptions(endpoint) }));
}

export function lockConnection(target: string | RedisEndpoint): Redis;
export function lockConnection(target: RedisTarget): RedisClient;
export function lockConnection(target: string | RedisEndpoint | RedisTarget): RedisClient {
  const endpoint = endpointOf(target);
  const cluster = clusterOf(target);
  if (cluster !== null) {
    return reportErrorsSafely(
      clusterClient(cluster, endpoint, LOCK_CLUSTER_OPTIONS, {
        delayMs: CLUSTER_RETRY_DELAY_MS,
        max: CLUSTER_REDIRECTIONS_MAX,
      }),
    );
  }
  return reportErrorsSafely(new Redis(endpoint.redisUrl, { ...LOCK_OPTIONS, ...redisTlsOptions(endpoint) }));
}

/** Where the process's Redis is, safe to log (no password). */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.redisCluster === null) return redactUrl(target.redisUrl);
  return `cluster ${target.redisCluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
}

/** QUIT, waited for at most timeoutMs; past it (or on an error) the socket is dropped. */
export async function closeRedis(client: RedisClient, timeoutMs: number): Promise<void> {
  await withinMs(client.quit(), timeoutMs, 'Redis').then(
    () => undefined,
    () => client.disconnect(),
  );
}
