// A private, migrated database per test file on the configured PostgreSQL server, so test
// files run in parallel without touching each other's data; dropped again afterwards. It is a
// copy of the run's migrated template (test/global-setup.ts) when the file's server is the
// template's, and migrated from scratch otherwise.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { type InstallOptions, installUnsafeDecisions } from '../../harness/chaos/unsafe/unsafe-decisions.ts';
import { type Config, loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { dropWorkerRole, ensureWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { copyTemplate } from './template-db.ts';

export interface TestDatabase {
  name: string;
  url: string;
  /** The base configuration with DATABASE_URL pointing at this database. */
  config: Config;
  prisma: PrismaClient;
  /** A plain pg pool for assertions that should not go through the code under test. */
  pg: pg.Pool;
  /**
   * The least-privilege worker role of this database (created on first call, as
   * `npm run db:worker-role` does, with a unique name: roles are cluster-wide) and the URL
   * logging in as it. drop() drops it.
   */
  workerRole(): Promise<{ role: string; url: string }>;
  /**
   * One more worker role with the same grants and a name of its own, dropped by drop() too: a
   * test tells one worker's sessions apart from the others' by it (pg_stat_activity.usename).
   */
  anotherWorkerRole(): Promise<{ role: string; url: string }>;
  /**
   * Installs the negative controls' decisions (apply_transfers_unsafe(), apply_payments_unsafe()
   * and the `*_unsafe` variants they call) into this database, as the chaos harness does into its
   * own: a migrated database has none. For the tests of a control only.
   */
  installUnsafeDecisions(options?: InstallOptions): Promise<void>;
  /** Empties the tables between tests; the ledger's append-only trigger is lifted for the TRUNCATE only. */
  truncateAll(): Promise<void>;
  drop(): Promise<void>;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export async function createTestDatabase(prefix = 'ft_test', env: Record<string, string> = {}): Promise<TestDatabase> {
  const base = loadConfig({ ...process.env, ...env });
  const name = uniqueName(prefix);
  const url = withDatabase(base.databaseUrl, name);
  const template = inject('templateDatabase') ?? null;
  try {
    if (template !== null && withDatabase(base.databaseUrl, 'postgres') === template.server) {
      await copyTemplate(url, template.name);
    } else {
      await migrate(url, MIGRATIONS_DIR);
    }
  } catch (err) {
    await dropDatabase(url).catch(() => undefined);
    throw err;
  }
  const config = loadConfig({ ...process.env, ...env, DATABASE_URL: url });
  const prisma = createPrisma(config);
  const pool = trackConnections(new pg.Pool({ connectionString: url, max: 4 }));
  // An idle connection the server ends (a test that terminates backends, the drop below when a
  // socket is slow to close) is dropped by the pool and replaced on the next query; a server
  // that is really gone fails that query instead. Without a listener it would crash the file.
  pool.on('error', () => undefined);
  const newWorkerRole = async (): Promise<{ role: string; url: string }> => {
    const role = uniqueName('ft_w');
    const password = randomBytes(16).toString('hex');
    await ensureWorkerRole(url, role, password, config);
    return { role, url: roleUrl(url, role, password) };
  };
  let worker: Promise<{ role: string; url: string }> | null = null;
  const others: Promise<{ role: string; url: string }>[] = [];
  return {
    name,
    url,
    config,
    prisma,
    pg: pool,
    workerRole() {
      worker ??= newWorkerRole();
      return worker;
    },
    anotherWorkerRole() {
      const other = newWorkerRole();
      others.push(other);
      return other;
    },
    async installUnsafeDecisions(options = {}) {
      const client = await pool.connect();
      try {
        await installUnsafeDecisions(client, options);
      } finally {
        client.release();
      }
    },
    async truncateAll() {
      // Owner-only DDL, the one way around the trigger; in a transaction so it is back at once.
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query('ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_no_truncate');
        await client.query(
          'TRUNCATE wallets, transfers, ledger_entries, transfer_requests, outcome_pending, outcome_events, outcome_cursors, holds, split_legs',
        );
        await client.query('ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_no_truncate');
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      } finally {
        client.release();
      }
    },
    async drop() {
      // Every socket closed first, so the drop's FORCE has no session of ours left to end.
      await closePrisma(prisma);
      await endPool(pool);
      await dropDatabase(url);
      if (worker !== null) await dropWorkerRole(url, (await worker).role);
      for (const other of others) await dropWorkerRole(url, (await other).role);
    },
  };
}

/** Whether a database of this name exists on the configured server (asked as the admin, in `postgres`). */
export async function databaseExists(name: string): Promise<boolean> {
  const admin = new pg.Client({ connectionString: withDatabase(loadConfig().databaseUrl, 'postgres') });
  await admin.connect();
  try {
    return (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rows.length > 0;
  } finally {
    await admin.end();
  }
}
