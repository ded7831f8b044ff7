// Makes Redis and PostgreSQL reachable at the configured URLs (`npm run services`, the demo,
// the test setup). If a service answers, nothing is done. Otherwise, for a loopback URL, a
// private instance is started from the local binaries on the configured port, with its data
// where harness/services/service-data-dir.ts says (the project's .data/, or for PostgreSQL started
// as root a folder the postgres user can reach); failing that, `docker compose up -d` when a
// Docker engine answers; failing that, one error saying what to install.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { type Config, redactUrl, withDatabase } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { databaseFaultOf } from '../../src/db/database-errors.ts';
import type { Logger } from '../../src/log/logger.ts';
import { withinMs } from '../../src/ops/probes.ts';
import { clusterNodeOptionsOf, type RedisEndpoint, redisTlsOptions } from '../../src/queue/redis-connection.ts';
import { notYet, done as pollDone, pollUntil } from './bounded-wait.ts';
import { LocalPostgres, postgresBinDir } from './local-postgres.ts';
import { LocalRedis } from './local-redis.ts';
import { postgresDataDir, preparePostgresParent, redisDataDir } from './service-data-dir.ts';

const run = promisify(execFile);

export const SERVICE_PROBE_TIMEOUT_MS = 2_000;
/** Bound on a started service answering (and on Docker Compose, three times this). */
export const SERVICE_START_TIMEOUT_MS = 60_000;
const SERVICE_POLL_MS = 200;

type ServiceAction = 'already-running' | 'started-local' | 'started-docker';

export interface ServicesReport {
  redis: ServiceAction;
  postgres: ServiceAction;
}

export async function redisAnswers(endpoint: RedisEndpoint): Promise<boolean> {
  const client = new Redis(endpoint.redisUrl, {
    ...redisTlsOptions(endpoint),
    lazyConnect: true,
    connectTimeout: SERVICE_PROBE_TIMEOUT_MS,
    commandTimeout: SERVICE_PROBE_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** A Redis Cluster is never started here (REDIS_CLUSTER_NODES): it must answer with every slot served. */
export async function redisClusterAnswers(
  cluster: NonNullable<Config['redisCluster']>,
  endpoint: RedisEndpoint,
): Promise<boolean> {
  const client = new Cluster(
    cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
    {
      lazyConnect: true,
      clusterRetryStrategy: () => null,
      ...(Object.keys(cluster.natMap).length === 0 ? {} : { natMap: { ...cluster.natMap } }),
      redisOptions: {
        connectTimeout: SERVICE_PROBE_TIMEOUT_MS,
        commandTimeout: SERVICE_PROBE_TIMEOUT_MS,
        maxRetriesPerRequest: 0,
        ...clusterNodeOptionsOf(endpoint),
      },
    },
  );
  client.on('error', () => undefined);
  try {
    await client.connect();
    return /cluster_state:ok/.test(String(await client.cluster('INFO')));
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

export async function postgresAnswers(databaseUrl: string): Promise<boolean> {
  // The maintenance database: the configured one may not exist before the first migration.
  const client = new pg.Client({
    connectionString: withDatabase(databaseUrl, 'postgres'),
    connectionTimeoutMillis: SERVICE_PROBE_TIMEOUT_MS,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await withinMs(client.query('SELECT 1'), SERVICE_PROBE_TIMEOUT_MS, 'SELECT 1');
    return true;
  } catch (err) {
    // A server that answers but refuses (a role or password it does not know) is there: starting
    // another on its port could only fail, and the refusal is what the person needs to read.
    const fault = databaseFaultOf(err);
    if (fault !== null && !fault.unreachable) throw err;
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '::1' || hostname === '[::1]' || hostname.startsWith('127.');
}

function portOf(url: string, fallback: number): number {
  const u = new URL(url);
  return u.port === '' ? fallback : Number(u.port);
}

async function commandWorks(cmd: string, args: string[]): Promise<boolean> {
  try {
    await run(cmd, args, { timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

async function dockerEngineAnswers(): Promise<boolean> {
  return commandWorks('docker', ['info', '--format', '{{.ServerVersion}}']);
}

async function startLocalRedis(redisUrl: string): Promise<boolean> {
  if (!isLoopback(new URL(redisUrl).hostname) || !(await commandWorks('redis-server', ['--version']))) return false;
  const port = portOf(redisUrl, 6379);
  const dir = redisDataDir(port);
  mkdirSync(dir, { recursive: true });
  // AOF on: this instance carries the queue, which must survive a restart. It outlives this
  // process; an exit at start (its port taken) fails here at once, with the end of its log.
  await LocalRedis.startDetached({ port, dir, appendOnly: true });
  return true;
}

async function startLocalPostgres(databaseUrl: string): Promise<boolean> {
  if (!isLoopback(new URL(databaseUrl).hostname) || postgresBinDir() === null) return false;
  const port = portOf(databaseUrl, 5432);
  const dir = postgresDataDir(port);
  preparePostgresParent(dir);
  await LocalPostgres.start({ dir, port });
  return true;
}

async function startWithDocker(services: string[]): Promise<boolean> {
  if (!existsSync(join(PROJECT_ROOT, 'docker-compose.yml')) || !(await dockerEngineAnswers())) return false;
  const options = { cwd: PROJECT_ROOT, timeout: SERVICE_START_TIMEOUT_MS * 3 };
  // The compose plugin (`docker compose`) where it exists, else the standalone docker-compose.
  if (await commandWorks('docker', ['compose', 'version'])) {
    await run('docker', ['compose', 'up', '-d', '--wait', ...services], options);
  } else if (await commandWorks('docker-compose', ['version'])) {
    await run('docker-compose', ['up', '-d', ...services], options);
  } else {
    return false;
  }
  return true;
}

async function waitUntil(probe: () => Promise<boolean>, what: string): Promise<void> {
  await pollUntil(async () => ((await probe()) ? pollDone(undefined) : notYet('no answer to its probe')), {
    what: `${what} answering`,
    timeoutMs: SERVICE_START_TIMEOUT_MS,
    intervalMs: SERVICE_POLL_MS,
    timedOut: (seen) => `${what} was started but does not answer after ${SERVICE_START_TIMEOUT_MS} ms (${seen})`,
  });
}

async function ensureOne(
  what: string,
  url: string,
  answers: (url: string) => Promise<boolean>,
  startLocal: (url: string) => Promise<boolean>,
  composeService: string,
  install: string,
  logger?: Logger,
): Promise<ServiceAction> {
  if (await answers(url)) return 'already-running';
  logger?.info({ service: what, url: redactUrl(url) }, 'service does not answer; starting it');
  let action: ServiceAction;
  if (await startLocal(url)) action = 'started-local';
  else if (await startWithDocker([composeService])) action = 'started-docker';
  else {
    throw new Error(
      `${what} does not answer at ${redactUrl(url)} and cannot be started here: ${install}, ` +
        'or start a Docker engine so `docker compose up -d redis postgres` can run, or point the URL at a running server.',
    );
  }
  await waitUntil(() => answers(url), what);
  logger?.info({ service: what, url: redactUrl(url), action }, 'service answers');
  return action;
}

async function ensureCluster(
  cluster: NonNullable<Config['redisCluster']>,
  endpoint: RedisEndpoint,
): Promise<ServiceAction> {
  if (await redisClusterAnswers(cluster, endpoint)) return 'already-running';
  throw new Error(
    `Redis Cluster at ${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')} does not answer with ` +
      'cluster_state:ok; a cluster is never started here: start it, or unset REDIS_CLUSTER_NODES for single-node Redis.',
  );
}

export async function ensureServices(
  config: Pick<Config, 'redisUrl' | 'redisTlsCaFile' | 'databaseUrl'> & Partial<Pick<Config, 'redisCluster'>>,
  logger?: Logger,
): Promise<ServicesReport> {
  const cluster = config.redisCluster ?? null;
  const [redis, postgres] = await Promise.all([
    cluster !== null
      ? ensureCluster(cluster, config)
      : ensureOne(
          'Redis',
          config.redisUrl,
          (redisUrl) => redisAnswers({ ...config, redisUrl }),
          startLocalRedis,
          'redis',
          'install Redis 7 (Debian: apt-get install redis-server)',
          logger,
        ),
    ensureOne(
      'PostgreSQL',
      config.databaseUrl,
      postgresAnswers,
      startLocalPostgres,
      'postgres',
      'install PostgreSQL 15 or later (Debian: apt-get install postgresql)',
      logger,
    ),
  ]);
  return { redis, postgres };
}
