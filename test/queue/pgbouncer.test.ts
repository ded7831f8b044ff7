// The pipeline behind a real PgBouncer (Debian's, started privately in transaction mode in front
// of the configured PostgreSQL: harness/services/local-pgbouncer.ts). Worker processes log in
// as the worker role through it with DATABASE_POOLER=pgbouncer and apply every transfer exactly
// once; the bounds are really in force there (a statement past DB_STATEMENT_TIMEOUT_MS is
// cancelled); the CLI commands work through it once the owner has its bounds. Controls: a worker
// that sends the start-up parameters (DATABASE_POOLER=none, as every worker did before) is never
// ready, and neither is one whose role lacks the bounds.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { LocalPgBouncer } from '../../harness/services/local-pgbouncer.ts';
import { LocalPostgres } from '../../harness/services/local-postgres.ts';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR, PROJECT_ROOT } from '../../src/config/paths.ts';
import { migrate } from '../../src/db/migrations.ts';
import { closePrisma, createPool, createPrisma } from '../../src/db/prisma.ts';
import { readSessionSettings } from '../../src/db/session-bounds.ts';
import { ensureWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { applyTransfers, postgresErrorCode } from '../../src/ledger/apply-transfer.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { lastJsonLine, runSource } from '../support/cli-process.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { createTestDatabase } from '../support/test-db.ts';
import { spawnWorkerProcess, TEST_WORKER_LOG_ROOT } from '../support/worker-process.ts';

/** A lease id for the decisions this file sends without a lock. */
const TEST_LEASE_ID = '00000000-0000-4000-8000-0000000000b0';

/** A worker that cannot get ready gives up after this long (STARTUP_TIMEOUT_MS). */
const STARTUP_TIMEOUT_MS = 3_000;
const OPERATIONS = 60;

let bouncer: LocalPgBouncer;

beforeAll(async () => {
  const server = new URL(loadConfig().databaseUrl);
  bouncer = await LocalPgBouncer.start({
    serverHost: server.hostname,
    serverPort: server.port === '' ? 5432 : Number(server.port),
  });
});

afterAll(async () => {
  await bouncer?.stop();
});

const open = pipelinePerTest();

/** The environment that sends a worker (or a command) to PostgreSQL through the PgBouncer. */
function throughBouncer(url: string, pooler: 'none' | 'pgbouncer' = 'pgbouncer'): Record<string, string> {
  return { DATABASE_URL: bouncer.urlFor(url), DATABASE_POOLER: pooler };
}

/** A worker process that is expected never to become ready: started, and its refusal returned. */
async function refusal(p: Pipeline, env: Record<string, string>): Promise<string> {
  mkdirSync(TEST_WORKER_LOG_ROOT, { recursive: true });
  const w = new WorkerProcess(1, {
    logDir: mkdtempSync(join(TEST_WORKER_LOG_ROOT, 'bouncer-')),
    entry: p.config.workerEntry,
    env: { ...p.workerEnv, LOG_LEVEL: 'info', STARTUP_TIMEOUT_MS: String(STARTUP_TIMEOUT_MS), ...env },
  });
  w.start();
  try {
    await w.waitUntilReady(STARTUP_TIMEOUT_MS * 10);
    return 'ready';
  } catch (err) {
    return (err as Error).message;
  } finally {
    await w.stop();
  }
}

describe('the worker behind PgBouncer in transaction mode', () => {
  it('two worker processes, as the worker role through PgBouncer, apply every transfer exactly once; reconcile holds', async () => {
    const p = await open();
    await p.seed(10, 10_000n);
    const env = throughBouncer(p.workerEnv.DATABASE_URL as string);
    const workers = await Promise.all([spawnWorkerProcess(p, env, 1), spawnWorkerProcess(p, env, 2)]);
    try {
      const wires = Array.from({ length: OPERATIONS }, (_, i) => ({
        operationId: `op-${i}`,
        from: `w${(i % 10) + 1}`,
        to: `w${((i + 3) % 10) + 1}`,
        amount: String(10 + i),
      }));
      // Every operation delivered twice.
      const jobs = await Promise.all([...wires, ...wires].map((w) => p.addRaw(w)));
      const outcomes = (await Promise.all(jobs.map((j) => p.result(j, 60_000)))) as TransferOutcome[];
      expect(outcomes.filter((o) => o.outcome === 'applied')).toHaveLength(OPERATIONS);
      expect(outcomes.filter((o) => o.outcome === 'duplicate')).toHaveLength(OPERATIONS);
      for (const w of wires) expect(await p.debitsOf(w.operationId), w.operationId).toBe(1);
      const balances = await p.balances();
      expect(Object.values(balances).reduce((a, b) => a + b, 0n)).toBe(100_000n);
      expect((await reconcile(p.db.prisma)).ok).toBe(true);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  });

  it('statement_timeout is in force through PgBouncer: a statement longer than DB_STATEMENT_TIMEOUT_MS is cancelled (57014)', async () => {
    const p = await open({ DB_STATEMENT_TIMEOUT_MS: '1000' });
    const workerConfig = loadConfig({
      ...process.env,
      ...p.workerEnv,
      ...throughBouncer(p.workerEnv.DATABASE_URL as string),
    });
    const pool = createPool(workerConfig);
    try {
      // The worker role's session as PgBouncer hands it out: every bound the configuration names.
      const client = await pool.connect();
      try {
        expect(await readSessionSettings(client)).toEqual({
          statement_timeout: '1000',
          lock_timeout: String(workerConfig.dbLockTimeoutMs),
          idle_in_transaction_session_timeout: String(workerConfig.dbIdleInTransactionTimeoutMs),
          TimeZone: 'UTC',
        });
      } finally {
        client.release();
      }
      const started = performance.now();
      const failure = await pool.query('SELECT pg_sleep(10)').then(
        () => null,
        (err: { code?: string }) => err,
      );
      const elapsedMs = performance.now() - started;
      expect(failure?.code).toBe('57014');
      expect(elapsedMs).toBeGreaterThanOrEqual(900);
      expect(elapsedMs).toBeLessThan(5_000);
    } finally {
      await pool.end();
    }
  });

  it('lock_timeout is in force through PgBouncer: the decision waits on a locked wallet for DB_LOCK_TIMEOUT_MS, not forever', async () => {
    const p = await open({ DB_LOCK_TIMEOUT_MS: '500' });
    await p.seed(2, 1_000n);
    const workerConfig = loadConfig({
      ...process.env,
      ...p.workerEnv,
      ...throughBouncer(p.workerEnv.DATABASE_URL as string),
    });
    const prisma = createPrisma(workerConfig);
    const holder = await p.db.pg.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM wallets WHERE id = 'w1' FOR UPDATE");
      const started = performance.now();
      const request = { operationId: 'op-locked', from: 'w1', to: 'w2', amountMinor: 10n, currency: null };
      const failure = await applyTransfers(prisma, [{ request, fence: 1n, leaseId: TEST_LEASE_ID }]).then(
        () => null,
        (err: unknown) => err,
      );
      const elapsedMs = performance.now() - started;
      expect(postgresErrorCode(failure)).toBe('55P03');
      expect(elapsedMs).toBeLessThan(4_000);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
      await closePrisma(prisma);
    }
  });

  it('control: a worker that sends the start-up parameters (DATABASE_POOLER=none) is never ready, and says what to set', async () => {
    const p = await open();
    const reason = await refusal(p, throughBouncer(p.workerEnv.DATABASE_URL as string, 'none'));
    expect(reason).toMatch(
      /unsupported startup parameter: statement_timeout; behind PgBouncer set DATABASE_POOLER=pgbouncer/,
    );
  });

  it('control: a worker whose role lacks the bounds is never ready, and names db:worker-role', async () => {
    const p = await open();
    const { role } = await p.db.workerRole();
    await p.db.pg.query(`ALTER ROLE ${role} IN DATABASE ${p.db.name} RESET ALL`);
    const reason = await refusal(p, throughBouncer(p.workerEnv.DATABASE_URL as string));
    expect(reason).toMatch(/session bounds not in force: statement_timeout is 0, expected 5000 ms/);
    expect(reason).toContain('npm run db:worker-role');
  });
});

describe('the commands behind PgBouncer in transaction mode', () => {
  it('are refused, naming db:session-bounds, until the owner has its bounds; then they work; db:migrate is refused', async () => {
    const db = await createTestDatabase('ft_bouncer_cli');
    try {
      const env = throughBouncer(db.url);
      const before = await runSource('src/cli/reconcile.ts', [], env);
      expect(before.code, before.stderr).toBe(1);
      expect(before.stderr).toMatch(/^error: .*session bounds not in force.*npm run db:session-bounds/m);
      expect(before.stderr.trim().split('\n')).toHaveLength(1);

      const set = await runSource('src/cli/role-session-bounds.ts', [], env);
      expect(set.code, set.stderr).toBe(0);
      expect(lastJsonLine(set)).toMatchObject({ role: 'postgres', sessionDefaults: { statement_timeout: '5000' } });
      // Server connections PgBouncer opened before keep their old settings: it opens fresh ones.
      await bouncer.reconnect();

      const after = await runSource('src/cli/reconcile.ts', [], env);
      expect(after.code, after.stderr).toBe(0);
      expect(JSON.parse(after.stdout)).toMatchObject({ ok: true });

      const migrate = await runSource('src/cli/migrate.ts', [], env);
      expect(migrate.code).toBe(1);
      expect(migrate.stderr).toMatch(/DATABASE_POOLER: is pgbouncer, but db:migrate needs a session of its own/);
    } finally {
      await db.drop();
    }
  });
});

/** The ```ini block of the PgBouncer section of docs/operating/deploy.md, as [databases] lines and [pgbouncer] settings. */
function documentedIni(): { databases: string[]; settings: Record<string, string> } {
  const doc = readFileSync(join(PROJECT_ROOT, 'docs', 'operating', 'deploy.md'), 'utf8');
  const block = /## PgBouncer[\s\S]*?```ini\n([\s\S]*?)```/.exec(doc)?.[1];
  if (block === undefined) throw new Error('no ini block in the PgBouncer section of deploy.md');
  const databases: string[] = [];
  const settings: Record<string, string> = {};
  let section = '';
  for (const line of block.split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith(';')) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header !== null) {
      section = header[1] as string;
    } else if (section === 'databases') {
      databases.push(line);
    } else {
      const [key, ...value] = line.split('=');
      settings[(key as string).trim()] = value.join('=').trim();
    }
  }
  return { databases, settings };
}

describe('the pgbouncer.ini of docs/operating/deploy.md', () => {
  it('works as written: the worker role logs in with its password, SCRAM through to a server that requires it, and its decisions go through', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ft-bouncer-doc-'));
    chmodSync(dir, 0o755);
    const ownerPassword = randomBytes(12).toString('hex');
    const workerPassword = randomBytes(12).toString('hex');
    let server: LocalPostgres | null = null;
    let documented: LocalPgBouncer | null = null;
    try {
      server = await LocalPostgres.start({
        dir: join(dir, 'pg'),
        fsync: false,
        superuserPassword: ownerPassword,
        hba: ['local all all trust', 'host all all 127.0.0.1/32 scram-sha-256'],
      });
      const ownerUrl = withDatabase(`postgresql://postgres:${ownerPassword}@127.0.0.1:${server.port}/x`, 'transfers');
      await migrate(ownerUrl, MIGRATIONS_DIR);
      const config = loadConfig({ ...process.env, DATABASE_URL: ownerUrl, DATABASE_POOLER: 'pgbouncer' });
      const owner = createPrisma({ ...config, databasePooler: 'none' });
      await seedWallets(owner, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
      await closePrisma(owner);
      await ensureWorkerRole(ownerUrl, 'transfers_worker', workerPassword, config);

      // userlist.txt as the comment in the file says: the role's verifier, read as a superuser.
      const admin = new pg.Client({ connectionString: ownerUrl });
      await admin.connect();
      const verifier = (
        await admin.query<{ v: string }>("SELECT rolpassword AS v FROM pg_authid WHERE rolname = 'transfers_worker'")
      ).rows[0]?.v;
      await admin.end();
      expect(verifier).toMatch(/^SCRAM-SHA-256\$/);
      const userlist = join(dir, 'userlist.txt');
      writeFileSync(userlist, `"transfers_worker" "${verifier}"\n`, { mode: 0o644 });

      const ini = documentedIni();
      expect(ini.settings).toMatchObject({ pool_mode: 'transaction', ignore_startup_parameters: '' });
      documented = await LocalPgBouncer.start({
        serverHost: '127.0.0.1',
        serverPort: server.port,
        config: {
          databases: ini.databases.map((l) => l.replace(/host=\S+ port=\d+/, `host=127.0.0.1 port=${server?.port}`)),
          settings: { ...ini.settings, auth_file: userlist },
        },
      });
      const workerConfig = loadConfig({
        ...process.env,
        DATABASE_URL: documented.urlFor(roleUrl(ownerUrl, 'transfers_worker', workerPassword)),
        DATABASE_POOLER: 'pgbouncer',
      });
      const prisma = createPrisma(workerConfig);
      try {
        const request = { operationId: 'op-doc', from: 'w1', to: 'w2', amountMinor: 10n, currency: null };
        const [result] = await applyTransfers(prisma, [{ request, fence: 1n, leaseId: TEST_LEASE_ID }]);
        expect(result).toMatchObject({ outcome: 'applied' });
      } finally {
        await closePrisma(prisma);
      }
      // A wrong password is refused by PgBouncer itself.
      const intruder = createPool({
        ...workerConfig,
        databaseUrl: documented.urlFor(roleUrl(ownerUrl, 'transfers_worker', 'not-the-password-at-all')),
      });
      await expect(intruder.query('SELECT 1')).rejects.toThrow(
        /password authentication failed|SASL authentication failed/,
      );
      await intruder.end();
    } finally {
      await documented?.stop();
      await server?.stop('immediate').catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
