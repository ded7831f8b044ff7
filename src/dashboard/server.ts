// The dashboard's HTTP server: the board of src/dashboard/board.ts on host:port (127.0.0.1 by
// default), over its own Redis connection whose commands are bounded, so a page fails instead of
// hanging when Redis is away. A port in use or an address this machine does not have is one
// clear error naming the variable; so is a Redis that does not answer at start.

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { Redis } from 'ioredis';
import { type RedisClusterConfig, redactUrl } from '../config/config.ts';
import { ConfigError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import { withinMs } from '../ops/probes.ts';
import { describeRedisTarget, lockConnection, type RedisClient, redisTlsOptions } from '../queue/redis-connection.ts';
import { describeRedisError } from '../queue/redis-reachable.ts';
import { createBoard } from './board.ts';

/** A Redis command of the dashboard that has not answered in this long fails (the page shows an error). */
export const DASHBOARD_REDIS_COMMAND_TIMEOUT_MS = 5_000;
/** How long start-up waits for Redis to answer before it gives up. */
export const DASHBOARD_REDIS_CONNECT_TIMEOUT_MS = 10_000;
/** Open browser connections get this long to finish when the dashboard stops. */
export const DASHBOARD_CLOSE_GRACE_MS = 2_000;

export interface DashboardOptions {
  host: string;
  /** 0 takes any free port. */
  port: number;
  queueNames: readonly string[];
  /** BullMQ prefix of each queue (cluster mode: `{<name>}`, see src/queue/queue-shards.ts); default `bull`. */
  queuePrefixes?: Readonly<Record<string, string>>;
  redisUrl: string;
  /** REDIS_TLS_CA_FILE, for rediss://. */
  redisTlsCaFile?: string | null;
  /** REDIS_CLUSTER_NODES: an ioredis Cluster instead of one Redis at redisUrl. */
  redisCluster?: RedisClusterConfig | null;
  readOnly: boolean;
  logger: Logger;
}

export interface RunningDashboard {
  url: string;
  port: number;
  close(): Promise<void>;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

function urlOf(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/`;
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      if (err.code === 'EADDRINUSE')
        reject(new ConfigError('DASHBOARD_PORT', `port ${port} on ${host} is already in use`));
      else if (err.code === 'EADDRNOTAVAIL')
        reject(new ConfigError('DASHBOARD_HOST', `${host} is not an address of this machine`));
      else if (err.code === 'EACCES')
        reject(new ConfigError('DASHBOARD_PORT', `port ${port} needs privileges this process does not have`));
      else reject(err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.removeListener('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

async function connectRedis(options: DashboardOptions): Promise<RedisClient> {
  const target = {
    redisUrl: options.redisUrl,
    redisTlsCaFile: options.redisTlsCaFile ?? null,
    redisCluster: options.redisCluster ?? null,
  };
  if (target.redisCluster !== null) {
    // The lock's kind of connection: every command bounded, retried briefly through a failover.
    const cluster = lockConnection(target);
    cluster.on('error', () => undefined);
    try {
      await withinMs(cluster.ping(), DASHBOARD_REDIS_CONNECT_TIMEOUT_MS, 'Redis Cluster');
    } catch (err) {
      cluster.disconnect();
      throw new ConfigError(
        'REDIS_CLUSTER_NODES',
        `Redis Cluster does not answer at ${describeRedisTarget(target)}: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return cluster;
  }
  const connection = new Redis(options.redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    commandTimeout: DASHBOARD_REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: DASHBOARD_REDIS_CONNECT_TIMEOUT_MS,
    ...redisTlsOptions(target),
  });
  // Errors after start reach the requests that fail with them; this keeps them off the console.
  // The first one is kept: connect() itself only says "Connection is closed".
  let firstError: Error | null = null;
  connection.on('error', (err: Error) => {
    firstError ??= err;
  });
  try {
    await connection.connect();
    await connection.ping();
  } catch (err) {
    connection.disconnect();
    const reason = firstError ?? (err instanceof Error ? err : new Error(String(err)));
    throw new ConfigError(
      'REDIS_URL',
      `Redis does not answer at ${redactUrl(options.redisUrl)}: ${describeRedisError(reason)}`,
    );
  }
  return connection;
}

export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const { logger } = options;
  const connection = await connectRedis(options);
  const board = createBoard({
    queueNames: options.queueNames,
    ...(options.queuePrefixes === undefined ? {} : { queuePrefixes: options.queuePrefixes }),
    connection,
    readOnly: options.readOnly,
    onError: (err, queueName) => logger.warn({ err: err.message, queueName }, 'dashboard queue error'),
  });
  const server = createAdaptorServer({ fetch: board.app.fetch }) as Server;
  let port: number;
  try {
    port = await listen(server, options.host, options.port);
  } catch (err) {
    await board.close();
    connection.disconnect();
    throw err;
  }
  const url = urlOf(options.host, port);
  logger.info(
    {
      url,
      queues: options.queueNames,
      readOnly: options.readOnly,
      redis: describeRedisTarget({
        redisUrl: options.redisUrl,
        redisTlsCaFile: options.redisTlsCaFile ?? null,
        redisCluster: options.redisCluster ?? null,
      }),
    },
    'dashboard listening',
  );
  if (!options.readOnly)
    logger.warn({ url }, 'dashboard is NOT read-only: anyone who can open it can retry, clean and remove jobs');
  if (!isLoopback(options.host))
    logger.warn({ host: options.host }, 'dashboard listens beyond this machine and has no authentication');

  return {
    url,
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const grace = setTimeout(() => server.closeAllConnections(), DASHBOARD_CLOSE_GRACE_MS);
      await closed;
      clearTimeout(grace);
      await board.close();
      connection.disconnect();
      logger.info({ url }, 'dashboard stopped');
    },
  };
}
