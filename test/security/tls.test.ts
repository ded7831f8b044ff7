// TLS to both servers, against private servers with certificates from a throwaway CA (openssl):
// a real worker process connects over rediss:// (REDIS_TLS_CA_FILE) and sslmode=verify-full
// (sslrootcert) and applies a transfer; servers whose certificate another CA signed are refused,
// and so is a certificate for another host name. Both servers refuse plaintext, so whatever
// connects at all is encrypted. Controls show each refusal comes from the verification: the
// impostors answer a client that trusts their CA, and the worker applies on the impostor
// PostgreSQL once verification is switched off (sslmode=no-verify).
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { LocalPostgres } from '../../harness/services/local-postgres.ts';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { loadConfig } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { migrate } from '../../src/db/migrations.ts';
import { createPrisma } from '../../src/db/prisma.ts';
import { ensureWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { describeRun, runSource } from '../support/cli-process.ts';
import { uniqueName } from '../support/test-db.ts';
import { issueServerCert, type KeyPair, makeCa } from '../support/throwaway-ca.ts';

const WAIT_MS = 40_000;
const ROLE = 'tls_worker';
const ROLE_PASSWORD = 'tls-worker-password-0123456789';
/** Words Node uses when a certificate chain does not lead to a trusted CA. */
const UNTRUSTED = /self[- ]signed certificate|unable to verify|unable to get (local )?issuer|certificate chain/i;
const HOST_MISMATCH = /does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/i;

// Every connection over TLS, and nothing in plaintext.
const HBA = [
  'local all all trust',
  'hostssl all all 127.0.0.1/32 trust',
  'hostssl all all 127.0.0.2/32 trust',
  'hostnossl all all 0.0.0.0/0 reject',
];

interface Servers {
  redis: LocalRedis;
  postgres: LocalPostgres;
}

let dir: string;
let ca: KeyPair;
let rogueCa: KeyPair;
let good: Servers;
let rogue: Servers;
const processes: WorkerProcess[] = [];
/** Every server started, stopped in afterAll even when the set-up failed half way. */
const started: (LocalRedis | LocalPostgres)[] = [];
const clients: { close(): unknown }[] = [];

function pgUrl(server: LocalPostgres, caFile: string, mode = 'verify-full', host = '127.0.0.1'): string {
  return `postgresql://postgres@${host}:${server.port}/tls?sslmode=${mode}&sslrootcert=${encodeURIComponent(caFile)}`;
}

async function startServers(name: string, issuer: KeyPair): Promise<Servers> {
  const cert = await issueServerCert(issuer, dir, `${name}-server`, ['IP:127.0.0.1', 'DNS:localhost']);
  const redis = await LocalRedis.start({
    dir: join(dir, `${name}-redis`),
    tls: { ...cert, caFile: issuer.certFile },
    extraArgs: ['--bind', '127.0.0.1', '127.0.0.2'],
  });
  started.push(redis);
  const postgres = await LocalPostgres.start({
    dir: join(dir, `${name}-pg`),
    fsync: false,
    ssl: cert,
    hba: HBA,
    settings: { listen_addresses: '127.0.0.1,127.0.0.2' },
  });
  started.push(postgres);
  const ownerUrl = pgUrl(postgres, issuer.certFile);
  await migrate(ownerUrl, MIGRATIONS_DIR);
  const prisma = createPrisma({ ...loadConfig(), databaseUrl: ownerUrl });
  await seedWallets(prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  await prisma.$disconnect();
  await ensureWorkerRole(ownerUrl, ROLE, ROLE_PASSWORD, loadConfig());
  return { redis, postgres };
}

function queueOn(server: LocalRedis, caFile: string, name: string): { queue: Queue; events: QueueEvents } {
  const endpoint = { redisUrl: server.url, redisTlsCaFile: caFile };
  const connection = bullmqConnection(endpoint);
  const queue = new Queue(name, { connection });
  const eventsConnection = bullmqConnection(endpoint);
  // From the stream's start, as in test/support/pipeline.ts: no event lost while the reader reconnects.
  const events = new QueueEvents(name, { connection: eventsConnection, lastEventId: '0' });
  clients.push(events, queue, { close: () => connection.disconnect() }, { close: () => eventsConnection.disconnect() });
  return { queue, events };
}

async function startWorker(env: Record<string, string>): Promise<WorkerProcess> {
  const w = new WorkerProcess(processes.length + 1, {
    logDir: join(dir, 'logs'),
    entry: loadConfig().workerEntry,
    env: {
      LOG_LEVEL: 'info',
      LOCK_TTL_MS: '2000',
      WORKER_CONCURRENCY: '2',
      DB_POOL_MAX: '2',
      JOB_ATTEMPTS_MAX: '50',
      ...env,
    },
  });
  processes.push(w);
  w.start();
  return w;
}

function logOf(w: WorkerProcess): string {
  try {
    return readFileSync(join(dir, 'logs', `worker-${w.index}.log`), 'utf8');
  } catch {
    return '';
  }
}

async function waitFor(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = performance.now() + WAIT_MS;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function balances(ownerUrl: string): Promise<Record<string, string>> {
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    const rows = (await client.query<{ id: string; balance: string }>('SELECT id, balance FROM wallets ORDER BY id'))
      .rows;
    return Object.fromEntries(rows.map((r) => [r.id, r.balance]));
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ft-tls-'));
  // PostgreSQL runs as its own user (as root: postgres) and must reach its cluster folder in here.
  chmodSync(dir, 0o711);
  [ca, rogueCa] = await Promise.all([makeCa(dir, 'test-ca'), makeCa(dir, 'rogue-ca')]);
  [good, rogue] = await Promise.all([startServers('good', ca), startServers('rogue', rogueCa)]);
}, 180_000);

afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  for (const c of clients.reverse()) await c.close();
  for (const server of started) await (server instanceof LocalPostgres ? server.stop('immediate') : server.stop());
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('the servers speak TLS only', () => {
  it('Redis has no plaintext port and PostgreSQL refuses a connection without TLS', async () => {
    const plain = new Redis(`redis://127.0.0.1:${good.redis.port}`, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: 5_000,
    });
    plain.on('error', () => undefined);
    await expect(plain.connect().then(() => plain.ping())).rejects.toThrow();
    plain.disconnect();
    const client = new pg.Client({ connectionString: pgUrl(good.postgres, ca.certFile, 'disable') });
    await expect(client.connect()).rejects.toThrow(/no encryption|pg_hba\.conf/);
    await client.end().catch(() => undefined);
  });
});

describe('a worker over rediss:// and sslmode=verify-full', () => {
  it('connects to servers whose certificates the CA signed and applies a transfer as the worker role', async () => {
    const queueName = uniqueName('tls');
    const { queue, events } = queueOn(good.redis, ca.certFile, queueName);
    const w = await startWorker({
      DATABASE_URL: roleUrl(pgUrl(good.postgres, ca.certFile), ROLE, ROLE_PASSWORD),
      REDIS_URL: good.redis.url,
      REDIS_TLS_CA_FILE: ca.certFile,
      QUEUE_NAME: queueName,
      LOCK_KEY_PREFIX: `${queueName}:`,
    });
    await waitFor(
      'the worker to register with the queue',
      async () => (await queue.getWorkersCount()) > 0 || !w.running,
    );
    expect(w.running, logOf(w)).toBe(true);
    const job = await queue.add(TRANSFER_JOB_NAME, { operationId: 'tls-1', from: 'w1', to: 'w2', amount: '250' });
    expect(await job.waitUntilFinished(events, WAIT_MS)).toMatchObject({ outcome: 'applied', operationId: 'tls-1' });
    expect(await balances(pgUrl(good.postgres, ca.certFile))).toEqual({ w1: '750', w2: '1250' });
    await w.stop();
  });
});

describe('servers whose certificate another CA signed are refused', () => {
  it("Redis: the worker never gets past the handshake; a client trusting the impostor's CA gets in", async () => {
    const queueName = uniqueName('tls');
    const impostor = queueOn(rogue.redis, rogueCa.certFile, queueName);
    await impostor.queue.waitUntilReady();
    const job = await impostor.queue.add(TRANSFER_JOB_NAME, {
      operationId: 'rogue-redis',
      from: 'w1',
      to: 'w2',
      amount: '1',
    });
    const w = await startWorker({
      DATABASE_URL: roleUrl(pgUrl(good.postgres, ca.certFile), ROLE, ROLE_PASSWORD),
      REDIS_URL: rogue.redis.url,
      REDIS_TLS_CA_FILE: ca.certFile,
      QUEUE_NAME: queueName,
      LOCK_KEY_PREFIX: `${queueName}:`,
    });
    await waitFor('a certificate error in the worker log', () => UNTRUSTED.test(logOf(w)));
    expect(await impostor.queue.getWorkersCount()).toBe(0);
    expect(await job.getState()).toBe('waiting');
    await w.stop();
  });

  it('PostgreSQL: the attempt fails on the certificate and nothing is written; with sslmode=no-verify the same worker writes to the impostor', async () => {
    const queueName = uniqueName('tls');
    // One attempt per job (the queue's default): the refused job stays failed with its reason.
    const { queue, events } = queueOn(good.redis, ca.certFile, queueName);
    const env = {
      REDIS_URL: good.redis.url,
      REDIS_TLS_CA_FILE: ca.certFile,
      QUEUE_NAME: queueName,
      LOCK_KEY_PREFIX: `${queueName}:`,
    };
    const impostorOwnerUrl = pgUrl(rogue.postgres, rogueCa.certFile);
    const before = await balances(impostorOwnerUrl);
    const w = await startWorker({
      ...env,
      DATABASE_URL: roleUrl(pgUrl(rogue.postgres, ca.certFile), ROLE, ROLE_PASSWORD),
    });
    const job = await queue.add(TRANSFER_JOB_NAME, { operationId: 'rogue-pg', from: 'w1', to: 'w2', amount: '1' });
    let refused = '';
    await waitFor('a failed attempt', async () => {
      const current = (await queue.getJob(job.id as string)) as Job;
      refused = [current.failedReason ?? '', ...(current.stacktrace ?? [])].join('\n');
      return UNTRUSTED.test(refused) || UNTRUSTED.test(logOf(w));
    });
    await w.stop();
    expect(await balances(impostorOwnerUrl)).toEqual(before);

    // Control: the refusal is the verification's doing. Switched off, the impostor gets the write.
    const careless = await startWorker({
      ...env,
      DATABASE_URL: roleUrl(pgUrl(rogue.postgres, ca.certFile, 'no-verify'), ROLE, ROLE_PASSWORD),
    });
    const control = await queue.add(TRANSFER_JOB_NAME, {
      operationId: 'rogue-pg-control',
      from: 'w1',
      to: 'w2',
      amount: '1',
    });
    expect(await control.waitUntilFinished(events, WAIT_MS)).toMatchObject({
      outcome: 'applied',
      operationId: 'rogue-pg-control',
    });
    expect(await balances(impostorOwnerUrl)).not.toEqual(before);
    await careless.stop();
  });
});

describe('verify-full checks the host name as well as the CA', () => {
  it('a certificate the CA signed for 127.0.0.1 and localhost is refused at 127.0.0.2, by both clients', async () => {
    const status = await runSource('src/cli/status.ts', ['any-op'], {
      DATABASE_URL: pgUrl(good.postgres, ca.certFile, 'verify-full', '127.0.0.2'),
      LOG_LEVEL: 'silent',
    });
    expect(status.code, describeRun(status)).toBe(1);
    expect(status.stderr).toMatch(HOST_MISMATCH);
    const control = await runSource('src/cli/status.ts', ['any-op'], {
      DATABASE_URL: pgUrl(good.postgres, ca.certFile),
      LOG_LEVEL: 'silent',
    });
    expect(JSON.parse(control.stdout.trim()), describeRun(control)).toEqual({
      operationId: 'any-op',
      status: 'unknown',
    });

    const redis = bullmqConnection({ redisUrl: `rediss://127.0.0.2:${good.redis.port}`, redisTlsCaFile: ca.certFile });
    const error = await new Promise<Error>((resolve) => redis.once('error', resolve));
    redis.disconnect();
    expect(`${error.message} ${(error as NodeJS.ErrnoException).code ?? ''}`).toMatch(HOST_MISMATCH);
  });
});
