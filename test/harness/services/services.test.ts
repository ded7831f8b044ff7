// `npm run services` brings back a stopped Redis or PostgreSQL. On two free ports (never the
// shared 6379/5432) it starts private instances in .data/redis-<port> and .data/postgres-<port>
// (PostgreSQL, as root, under /var/lib/fenced-transfers/<project>/, which the postgres user can
// reach wherever the checkout is); after either or both are stopped, running it again makes them
// answer again; with both up it says already-running. Everything it started is stopped and
// removed at the end.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../harness/services/free-port.ts';
import { LocalPostgres, postgresBinDir } from '../../../harness/services/local-postgres.ts';
import {
  postgresDataDir,
  projectId,
  ROOT_POSTGRES_BASE_DIR,
  redisDataDir,
} from '../../../harness/services/service-data-dir.ts';
import { DATA_DIR, PROJECT_ROOT } from '../../../src/config/paths.ts';
import { describeRun, lastJsonLine, runCommand } from '../../support/cli-process.ts';

const run = promisify(execFile);
const PROBE_TIMEOUT_MS = 1_000;
const STOP_TIMEOUT_MS = 15_000;
/** One run of the CLI; it waits up to 60 s for a server it started, so a broken start fails here first. */
const SERVICES_CLI_TIMEOUT_MS = 40_000;
const TEST_TIMEOUT_MS = 90_000;

let redisPort: number;
let postgresPort: number;
let env: Record<string, string>;
let redisDir: string;
let postgresDir: string;

async function redisAnswers(): Promise<boolean> {
  const client = new Redis({
    host: '127.0.0.1',
    port: redisPort,
    lazyConnect: true,
    connectTimeout: PROBE_TIMEOUT_MS,
    commandTimeout: PROBE_TIMEOUT_MS,
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

async function withPostgres<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    connectionString: `postgresql://postgres@127.0.0.1:${postgresPort}/postgres`,
    connectionTimeoutMillis: PROBE_TIMEOUT_MS,
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function postgresAnswers(): Promise<boolean> {
  return withPostgres(async (c) => (await c.query('SELECT 1 AS one')).rows[0]?.one === 1).catch(() => false);
}

async function waitFor(what: string, condition: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + STOP_TIMEOUT_MS;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`${what} after ${STOP_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stopRedis(): Promise<void> {
  if (!(await redisAnswers())) return;
  const client = new Redis({ host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  // The server closes the connection instead of answering.
  await client.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
  client.disconnect();
  await waitFor('Redis still answers', async () => !(await redisAnswers()));
}

async function stopPostgres(): Promise<void> {
  if (!existsSync(join(postgresDir, 'postmaster.pid'))) return;
  const binDir = postgresBinDir();
  if (binDir === null) throw new Error('PostgreSQL binaries not found');
  const args = ['stop', '-D', postgresDir, '-m', 'fast', '-w'];
  const pgCtl = join(binDir, 'pg_ctl');
  // As root the cluster belongs to the postgres user, like harness/services/local-postgres.ts does it.
  if (userInfo().uid === 0) await run('runuser', ['-u', 'postgres', '--', pgCtl, ...args]);
  else await run(pgCtl, args);
  await waitFor('PostgreSQL still answers', async () => !(await postgresAnswers()));
}

async function services(): Promise<{ redis: string; postgres: string }> {
  const result = await runCommand('npm', ['run', 'services'], env, SERVICES_CLI_TIMEOUT_MS);
  expect(result.code, describeRun(result)).toBe(0);
  return lastJsonLine(result) as { redis: string; postgres: string };
}

async function expectBothAnswer(): Promise<void> {
  expect(await redisAnswers(), 'Redis answers').toBe(true);
  expect(await postgresAnswers(), 'PostgreSQL answers').toBe(true);
}

beforeAll(async () => {
  redisPort = await freePort();
  do postgresPort = await freePort();
  while (postgresPort === redisPort);
  redisDir = redisDataDir(redisPort);
  postgresDir = postgresDataDir(postgresPort);
  env = {
    REDIS_URL: `redis://127.0.0.1:${redisPort}`,
    DATABASE_URL: `postgresql://postgres@127.0.0.1:${postgresPort}/transfers`,
  };
});

afterAll(async () => {
  if (redisPort === undefined) return;
  const stopped = await Promise.allSettled([stopRedis(), stopPostgres()]);
  rmSync(redisDir, { recursive: true, force: true });
  rmSync(postgresDir, { recursive: true, force: true });
  for (const result of stopped) if (result.status === 'rejected') throw result.reason;
});

describe('npm run services', { timeout: TEST_TIMEOUT_MS }, () => {
  it('starts private instances when nothing answers on the configured ports', async () => {
    expect(await redisAnswers()).toBe(false);
    expect(await postgresAnswers()).toBe(false);

    expect(await services()).toEqual({ redis: 'started-local', postgres: 'started-local' });
    await expectBothAnswer();
    // They are ours, in their data folders, configured for the queue's needs.
    expect(redisDir).toBe(join(DATA_DIR, `redis-${redisPort}`));
    expect(existsSync(join(redisDir, 'redis.pid'))).toBe(true);
    const redis = new Redis({ host: '127.0.0.1', port: redisPort, lazyConnect: true });
    try {
      await redis.connect();
      expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await redis.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    } finally {
      redis.disconnect();
    }
    expect(await withPostgres(async (c) => (await c.query('SHOW data_directory')).rows[0]?.data_directory)).toBe(
      postgresDir,
    );
    if (userInfo().uid === 0) {
      // Outside the checkout, which may be root-only, in a folder named after this checkout.
      expect(postgresDir).toBe(join(ROOT_POSTGRES_BASE_DIR, projectId(PROJECT_ROOT), `postgres-${postgresPort}`));
      expect(statSync(postgresDir).mode & 0o777).toBe(0o700);
      expect(statSync(postgresDir).uid).not.toBe(0);
    } else {
      expect(postgresDir).toBe(join(DATA_DIR, `postgres-${postgresPort}`));
    }
  });

  it('says already-running when both answer', async () => {
    expect(await services()).toEqual({ redis: 'already-running', postgres: 'already-running' });
  });

  it('brings back a stopped Redis', async () => {
    await stopRedis();
    expect(await services()).toEqual({ redis: 'started-local', postgres: 'already-running' });
    await expectBothAnswer();
  });

  it('brings back a stopped PostgreSQL, with its data', async () => {
    await withPostgres((c) => c.query('CREATE TABLE survives (x int)'));
    await stopPostgres();
    expect(await services()).toEqual({ redis: 'already-running', postgres: 'started-local' });
    await expectBothAnswer();
    expect(
      await withPostgres(async (c) => (await c.query("SELECT to_regclass('survives')::text AS t")).rows[0]?.t),
    ).toBe('survives');
  });

  it('brings back both when both are stopped', async () => {
    await Promise.all([stopRedis(), stopPostgres()]);
    expect(await redisAnswers()).toBe(false);
    expect(await postgresAnswers()).toBe(false);
    expect(await services()).toEqual({ redis: 'started-local', postgres: 'started-local' });
    await expectBothAnswer();
    expect(await services()).toEqual({ redis: 'already-running', postgres: 'already-running' });
  });
});

describe('a PostgreSQL data folder the postgres user cannot enter', () => {
  it.runIf(userInfo().uid === 0)('is refused with one clear message, before initdb runs', async () => {
    const rootOnly = mkdtempSync(join(tmpdir(), 'ft-root-only-'));
    try {
      expect(statSync(rootOnly).mode & 0o777).toBe(0o700);
      await expect(LocalPostgres.start({ dir: join(rootOnly, 'cluster') })).rejects.toThrow(
        /cannot be entered by the postgres user/,
      );
      expect(existsSync(join(rootOnly, 'cluster', 'PG_VERSION'))).toBe(false);
    } finally {
      rmSync(rootOnly, { recursive: true, force: true });
    }
  });
});

describe('projectId', () => {
  it('is stable for one path and differs between clones', () => {
    expect(projectId('/tmp/a/fenced-transfers')).toBe(projectId('/tmp/a/fenced-transfers'));
    expect(projectId('/tmp/a/fenced-transfers')).not.toBe(projectId('/tmp/b/fenced-transfers'));
    expect(projectId('/tmp/a/fenced transfers!')).toMatch(/^fenced_transfers_-[0-9a-f]{12}$/);
  });
});

describe('freePort', () => {
  it('returns distinct loopback ports nothing listens on', async () => {
    const ports = await Promise.all([freePort(), freePort(), freePort()]);
    for (const port of ports) {
      expect(port).toBeGreaterThan(1024);
      expect(port).toBeLessThan(65536);
    }
    expect(new Set(ports).size).toBe(3);
  });
});
