// No password reaches a log line or a command's output. A private PostgreSQL with password
// authentication (SCRAM) and a private Redis with requirepass; every command a user runs
// (migrate, db:worker-role, seed, enqueue, worker, status, reconcile) with URLs that carry the
// passwords, at LOG_LEVEL=trace, plus forced failures: wrong passwords on both servers, a closed
// port, a permission error, a bad variable. Then every line of every output and log is searched
// for each password's random part, raw and URL-encoded. The run must have produced those
// failures, or the search would prove little.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { freePort } from '../../harness/services/free-port.ts';
import { LocalPostgres } from '../../harness/services/local-postgres.ts';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { loadConfig } from '../../src/config/config.ts';
import { roleUrl } from '../../src/db/worker-role-grants.ts';
import { type CliResult, describeRun, runSource } from '../support/cli-process.ts';

const WAIT_MS = 40_000;
/** A command expected to hang on a refused Redis password is stopped after this long; its output still counts. */
const HANG_BOUND_MS = 15_000;
const token = () => randomBytes(8).toString('hex');
// Characters that need URL encoding, so that a leak in either form is caught.
const ownerToken = token();
const workerToken = token();
const redisToken = token();
const OWNER_PASSWORD = `own/er+${ownerToken}:pw`;
const WORKER_PASSWORD = `work#er@${workerToken}!pw`;
const REDIS_PASSWORD = `red/is+${redisToken}@pw`;
const SECRETS = [OWNER_PASSWORD, WORKER_PASSWORD, REDIS_PASSWORD];
/** What is searched for: each password, its URL-encoded form, and its random part alone. */
const NEEDLES = [...SECRETS, ...SECRETS.map(encodeURIComponent), ownerToken, workerToken, redisToken];
const ROLE = 'creds_worker';

let dir: string;
let postgres: LocalPostgres;
let redis: LocalRedis;
let ownerUrl: string;
let workerUrl: string;
let redisUrl: string;
/** Every output and log, by what produced it. */
const outputs: { what: string; text: string }[] = [];
const processes: WorkerProcess[] = [];

function record(what: string, r: CliResult): CliResult {
  outputs.push({ what, text: `${r.stdout}\n${r.stderr}` });
  return r;
}

async function cli(
  what: string,
  file: string,
  args: string[],
  env: Record<string, string>,
  timeoutMs?: number,
): Promise<CliResult> {
  return record(what, await runSource(file, args, { LOG_LEVEL: 'trace', ...env }, timeoutMs));
}

/** A command that may hang (a refused Redis password makes BullMQ retry forever): bounded, its output kept. */
async function boundedCli(what: string, file: string, args: string[], env: Record<string, string>): Promise<string> {
  try {
    const r = await cli(what, file, args, env, HANG_BOUND_MS);
    return `${r.stdout}\n${r.stderr}`;
  } catch (err) {
    const text = err instanceof Error ? err.message : String(err);
    outputs.push({ what: `${what} (stopped after ${HANG_BOUND_MS} ms)`, text });
    return text;
  }
}

function workerLogDir(name: string): string {
  return join(dir, 'logs', name);
}

async function startWorker(name: string, env: Record<string, string>): Promise<WorkerProcess> {
  const w = new WorkerProcess(1, {
    logDir: workerLogDir(name),
    entry: loadConfig().workerEntry,
    env: {
      LOG_LEVEL: 'trace',
      QUEUE_NAME: 'creds',
      LOCK_KEY_PREFIX: 'creds:',
      DB_POOL_MAX: '2',
      WORKER_CONCURRENCY: '2',
      ...env,
    },
  });
  processes.push(w);
  w.start();
  return w;
}

function logText(name: string): string {
  try {
    return readFileSync(join(workerLogDir(name), 'worker-1.log'), 'utf8');
  } catch {
    return ''; // not opened yet
  }
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ft-creds-'));
  chmodSync(dir, 0o711);
  postgres = await LocalPostgres.start({
    dir: join(dir, 'pg'),
    fsync: false,
    superuserPassword: OWNER_PASSWORD,
    hba: ['local all all trust', 'host all all 127.0.0.1/32 scram-sha-256'],
  });
  redis = await LocalRedis.start({ dir: join(dir, 'redis'), extraArgs: ['--requirepass', REDIS_PASSWORD] });
  ownerUrl = `postgresql://postgres:${encodeURIComponent(OWNER_PASSWORD)}@127.0.0.1:${postgres.port}/creds`;
  workerUrl = roleUrl(ownerUrl, ROLE, WORKER_PASSWORD);
  redisUrl = `redis://:${encodeURIComponent(REDIS_PASSWORD)}@127.0.0.1:${redis.port}`;
}, 120_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await redis?.stop();
  await postgres?.stop('immediate');
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('a run whose URLs carry passwords', () => {
  it('works end to end: migrate, worker role, seed, enqueue, worker, status', { timeout: 180_000 }, async () => {
    const owner = { DATABASE_URL: ownerUrl };
    const migrated = await cli('migrate', 'src/cli/migrate.ts', [], owner);
    expect(migrated.code, describeRun(migrated)).toBe(0);
    const role = await cli('db:worker-role', 'src/cli/worker-role.ts', ['--role', ROLE], {
      ...owner,
      WORKER_DB_PASSWORD: WORKER_PASSWORD,
    });
    expect(role.code, describeRun(role)).toBe(0);
    const seeded = await cli(
      'seed',
      'src/cli/seed.ts',
      ['--wallets', '2', '--balance', '1000', '--prefix', 'w'],
      owner,
    );
    expect(seeded.code, describeRun(seeded)).toBe(0);
    const enqueued = await cli(
      'enqueue',
      'src/cli/enqueue.ts',
      ['--from', 'w1', '--to', 'w2', '--amount', '5', '--operation-id', 'creds-1'],
      { REDIS_URL: redisUrl, QUEUE_NAME: 'creds' },
    );
    expect(enqueued.code, describeRun(enqueued)).toBe(0);

    const w = await startWorker('good', { DATABASE_URL: workerUrl, REDIS_URL: redisUrl });
    await waitFor('the transfer to be applied', async () => {
      const status = await runSource('src/cli/status.ts', ['creds-1'], { ...owner, LOG_LEVEL: 'silent' });
      return status.code === 0 && JSON.parse(status.stdout.trim()).status === 'applied';
    });
    await w.stop();
    const status = await cli('status', 'src/cli/status.ts', ['creds-1'], owner);
    expect(JSON.parse(status.stdout.trim())).toMatchObject({ operationId: 'creds-1', status: 'applied' });
    const reconciled = await cli('reconcile', 'src/cli/reconcile.ts', [], owner);
    expect(reconciled.code, describeRun(reconciled)).toBe(0);
    outputs.push({ what: 'worker log (good)', text: logText('good') });
  });

  it('and fails in the ways a deployment does: wrong passwords, a closed port, no permission, a bad variable', {
    timeout: 240_000,
  }, async () => {
    const wrongOwner = ownerUrl.replace(encodeURIComponent(OWNER_PASSWORD), encodeURIComponent(`${OWNER_PASSWORD}x`));
    const migrate = await cli('migrate, wrong owner password', 'src/cli/migrate.ts', [], { DATABASE_URL: wrongOwner });
    expect(migrate.code).toBe(1);
    expect(migrate.stderr).toMatch(/password authentication failed/);

    const closed = ownerUrl.replace(`:${postgres.port}/`, `:${await freePort()}/`);
    const status = await cli('status, closed port', 'src/cli/status.ts', ['creds-1'], { DATABASE_URL: closed });
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(
      /^error: DATABASE_URL: cannot reach PostgreSQL at 127\.0\.0\.1:\d+: connection refused$/m,
    );

    const asRole = await cli('status as the worker role', 'src/cli/status.ts', ['creds-1'], {
      DATABASE_URL: workerUrl,
    });
    expect(asRole.code).toBe(1);
    expect(asRole.stderr).toMatch(/permission denied/);
    const reconcileAsRole = await cli('reconcile as the worker role', 'src/cli/reconcile.ts', [], {
      DATABASE_URL: workerUrl,
    });
    expect(reconcileAsRole.code).toBe(1);

    const weak = await cli('db:worker-role, weak password', 'src/cli/worker-role.ts', ['--role', ROLE], {
      DATABASE_URL: ownerUrl,
      WORKER_DB_PASSWORD: `${workerToken.slice(0, 6)}`,
    });
    expect(weak.code).toBe(1);
    expect(weak.stderr).toMatch(/^configuration error: WORKER_DB_PASSWORD/m);
    const badUrl = await cli('worker, unparseable URL', 'src/cli/worker.ts', [], {
      DATABASE_URL: `postgresql://postgres:${OWNER_PASSWORD}@127.0.0.1:99999/creds`,
      REDIS_URL: redisUrl,
    });
    expect(badUrl.code).toBe(1);

    const wrongRedis = redisUrl.replace(encodeURIComponent(REDIS_PASSWORD), encodeURIComponent(`${REDIS_PASSWORD}x`));
    const enqueue = await boundedCli(
      'enqueue, wrong Redis password',
      'src/cli/enqueue.ts',
      ['--from', 'w1', '--to', 'w2', '--amount', '5'],
      { REDIS_URL: wrongRedis, QUEUE_NAME: 'creds' },
    );
    expect(enqueue).toMatch(/WRONGPASS|invalid username-password|NOAUTH/);

    const enqueued = await cli(
      'enqueue',
      'src/cli/enqueue.ts',
      ['--from', 'w1', '--to', 'w2', '--amount', '5', '--operation-id', 'creds-2'],
      { REDIS_URL: redisUrl, QUEUE_NAME: 'creds' },
    );
    expect(enqueued.code, describeRun(enqueued)).toBe(0);
    const wrongRole = roleUrl(ownerUrl, ROLE, `${WORKER_PASSWORD}x`);
    const badDb = await startWorker('wrong-db-password', {
      DATABASE_URL: wrongRole,
      REDIS_URL: redisUrl,
      JOB_ATTEMPTS_MAX: '1',
    });
    await waitFor('an authentication failure in the worker log', () =>
      /password authentication failed/.test(logText('wrong-db-password')),
    );
    await badDb.stop();
    outputs.push({ what: 'worker log (wrong database password)', text: logText('wrong-db-password') });

    const badRedis = await startWorker('wrong-redis-password', { DATABASE_URL: workerUrl, REDIS_URL: wrongRedis });
    await waitFor('a refused Redis password in the worker log', () =>
      /WRONGPASS|invalid username-password/.test(logText('wrong-redis-password')),
    );
    await badRedis.stop();
    outputs.push({ what: 'worker log (wrong Redis password)', text: logText('wrong-redis-password') });

    const noDb = await startWorker('closed-database-port', {
      DATABASE_URL: closed.replace('postgres:', `${ROLE}:`),
      REDIS_URL: redisUrl,
    });
    await waitFor('a refused database connection in the worker log', () =>
      /ECONNREFUSED|Can't reach database server/i.test(logText('closed-database-port')),
    );
    await noDb.stop();
    outputs.push({ what: 'worker log (closed database port)', text: logText('closed-database-port') });
  });

  it('no line of any output or log contains a password, raw or URL-encoded, nor its random part', () => {
    expect(outputs.length).toBeGreaterThanOrEqual(16);
    const leaks: string[] = [];
    let lines = 0;
    for (const { what, text } of outputs) {
      for (const line of text.split('\n')) {
        lines += 1;
        for (const needle of NEEDLES) if (line.includes(needle)) leaks.push(`${what}: ${line.slice(0, 400)}`);
      }
    }
    // Anything else the run left on disk (worker log folders) is searched too.
    for (const name of readdirSync(join(dir, 'logs'))) {
      const text = readFileSync(join(workerLogDir(name), 'worker-1.log'), 'utf8');
      for (const needle of NEEDLES) if (text.includes(needle)) leaks.push(`${name} log file contains a password`);
    }
    expect(lines).toBeGreaterThan(50);
    expect(leaks).toEqual([]);
  });
});
