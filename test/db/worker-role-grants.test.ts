// The worker's least-privilege role (`npm run db:worker-role`) and the append-only ledger.
// Connected as the role, every direct write (and every read but _prisma_migrations) fails with
// 42501 while the decision function works; the owner cannot change or remove ledger entries
// either (trigger). Controls: with the trigger dropped the owner's edits go through, and a
// privilege granted by hand lets the role write until db:worker-role runs again.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPrisma } from '../../src/db/prisma.ts';
import { RELAY_FUNCTIONS } from '../../src/db/relay-role-grants.ts';
import { readSessionSettings } from '../../src/db/session-bounds.ts';
import {
  DECISION_FUNCTIONS,
  dropWorkerRole,
  ensureWorkerRole,
  expectedWorkerPrivileges,
  roleUrl,
} from '../../src/db/worker-role-grants.ts';
import { WorkerRoleError } from '../../src/errors.ts';
import {
  INTAKE_FUNCTION,
  INTAKE_OPERATION_FUNCTION,
  INTAKE_TRACED_FUNCTION,
  INTAKE_TRACED_OPERATION_FUNCTION,
} from '../../src/intake/intake.ts';
import { OPERATIONS_MATCHING_FUNCTION } from '../../src/intake/operation-query.ts';
import { OUTCOME_FEED_FUNCTION } from '../../src/intake/outcome-feed.ts';
import { WALLET_BALANCE_AT_FUNCTION, WALLET_STATEMENT_FUNCTION } from '../../src/intake/wallet-history.ts';
import { applyTransfer, applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

const PASSWORD = 'worker-role-test-password-42';
let db: TestDatabase;
let role: string;
let asRole: pg.Client;

/** The SQLSTATE a statement fails with, or 'ok'. */
async function outcome(client: pg.ClientBase | pg.Pool, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

/** The message a statement fails with, or 'ok'. */
async function failure(client: pg.ClientBase | pg.Pool, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return (err as Error).message;
  }
}

const ROLE_MAY_NOT = [
  'UPDATE wallets SET balance = balance + 1000',
  "INSERT INTO wallets (id, currency, balance) VALUES ('mine', 'EUR', 1000000)",
  'DELETE FROM wallets',
  "INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount) VALUES ('forged', 'w1', 'credit', 1000)",
  'UPDATE ledger_entries SET amount = amount * 2',
  'DELETE FROM ledger_entries',
  'TRUNCATE ledger_entries',
  'SELECT * FROM transfers',
  "INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, status, fence) VALUES ('x', repeat('0', 64), 'w1', 'w2', 1, 'applied', 1)",
  "UPDATE transfers SET status = 'rejected'",
  'DELETE FROM transfers',
  'SELECT * FROM wallets',
  'SELECT * FROM ledger_entries',
  "SELECT nextval('ledger_entries_id_seq')",
  'DELETE FROM _prisma_migrations',
  'CREATE TABLE planted (x int)',
  'CREATE TEMP TABLE wallets (id text)',
  'CREATE FUNCTION public.hashtextextended(text, bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint $$',
  'SET ROLE postgres',
];

beforeAll(async () => {
  db = await createTestDatabase('ft_role');
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  role = uniqueName('ft_w');
});

afterAll(async () => {
  await asRole?.end().catch(() => undefined);
  await db.drop();
  await dropWorkerRole(db.url, role);
});

describe('npm run db:worker-role', () => {
  it('creates a login role with exactly CONNECT, USAGE, EXECUTE on the decision functions and SELECT on _prisma_migrations; never prints the password', async () => {
    const run = await runSource('src/cli/worker-role.ts', ['--role', role], {
      DATABASE_URL: db.url,
      WORKER_DB_PASSWORD: PASSWORD,
      LOG_LEVEL: 'trace',
    });
    expect(run.code, describeRun(run)).toBe(0);
    const result = lastJsonLine(run) as { role: string; created: boolean; privileges: string[] };
    expect(result).toMatchObject({ role, created: true });
    expect(result.privileges).toEqual(expectedWorkerPrivileges(db.name, 'public'));
    expect(result.privileges).toEqual([
      `DATABASE ${db.name} CONNECT`,
      'FUNCTION public.apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) EXECUTE',
      'FUNCTION public.apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) EXECUTE',
      'FUNCTION public.give_up_send_count(text,text) EXECUTE',
      'FUNCTION public.holds_expire(integer) EXECUTE',
      'FUNCTION public.lock_epoch_current() EXECUTE',
      'FUNCTION public.lock_release(text[]) EXECUTE',
      'FUNCTION public.lock_tokens_last() EXECUTE',
      'FUNCTION public.lock_try_acquire(text[]) EXECUTE',
      'FUNCTION public.outcome_feed_sequence(integer) EXECUTE',
      'FUNCTION public.record_transfer_given_up(text,text,text,integer) EXECUTE',
      'FUNCTION public.request_decide_invalid(text) EXECUTE',
      'SCHEMA public USAGE',
      'TABLE public._prisma_migrations SELECT',
    ]);
    expect(`${run.stdout}${run.stderr}`).not.toContain(PASSWORD);
    const attrs = (
      await db.pg.query(
        'SELECT rolcanlogin, rolsuper, rolcreaterole, rolcreatedb, rolinherit, rolbypassrls FROM pg_roles WHERE rolname = $1',
        [role],
      )
    ).rows[0];
    expect(attrs).toMatchObject({
      rolcanlogin: true,
      rolsuper: false,
      rolcreaterole: false,
      rolcreatedb: false,
      rolbypassrls: false,
    });
    asRole = new pg.Client({ connectionString: roleUrl(db.url, role, PASSWORD) });
    await asRole.connect();
  });

  it("makes the configured session bounds the role's defaults in this database only (how they reach it behind PgBouncer)", async () => {
    // asRole sent no start-up parameters: what it has is the role's defaults.
    expect(await readSessionSettings(asRole)).toEqual({
      statement_timeout: String(db.config.dbStatementTimeoutMs),
      lock_timeout: String(db.config.dbLockTimeoutMs),
      idle_in_transaction_session_timeout: String(db.config.dbIdleInTransactionTimeoutMs),
      TimeZone: 'UTC',
    });
    const { rows } = await db.pg.query<{ datname: string | null }>(
      `SELECT d.datname FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
         LEFT JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = $1`,
      [role],
    );
    expect(rows).toEqual([{ datname: db.name }]);
  });

  it('refuses to turn the owner (or any role with powers) into the worker role', async () => {
    await expect(ensureWorkerRole(db.url, 'postgres', PASSWORD, db.config)).rejects.toThrow(WorkerRoleError);
    await expect(ensureWorkerRole(db.url, 'Robert"; DROP ROLE x; --', PASSWORD, db.config)).rejects.toThrow(
      /role name/,
    );
  });
});

describe('connected as the worker role', () => {
  it('every direct write, every read but _prisma_migrations, any DDL and SET ROLE fail with 42501', async () => {
    const results: Record<string, string> = {};
    for (const sql of ROLE_MAY_NOT) results[sql] = await outcome(asRole, sql);
    expect(results).toEqual(Object.fromEntries(ROLE_MAY_NOT.map((sql) => [sql, '42501'])));
  });

  it('reads _prisma_migrations (the readiness check) and calls apply_transfers, which moves the money', async () => {
    const applied = await asRole.query<{ n: string }>(
      'SELECT count(*) AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL',
    );
    expect(Number(applied.rows[0]?.n)).toBeGreaterThanOrEqual(2);
    const prisma = createPrisma({ ...db.config, databaseUrl: roleUrl(db.url, role, PASSWORD) });
    try {
      const request = { operationId: 'as-role', from: 'w1', to: 'w2', amountMinor: 300n, currency: null };
      expect(await applyTransfers(prisma, [{ request, fence: 1n, leaseId: leaseIdFor(1n) }])).toEqual([
        { outcome: 'applied', operationId: 'as-role', fence: '1' },
      ]);
      expect(await applyTransfers(prisma, [{ request, fence: 2n, leaseId: leaseIdFor(2n) }])).toMatchObject([
        { outcome: 'duplicate' },
      ]);
      // The single-transfer function is the owner's; the negative controls' variant, installed
      // here as the chaos harness does into its own databases, is the owner's too: the worker
      // role may call neither.
      await expect(applyTransfer(prisma, request, 3n, leaseIdFor(3n))).rejects.toThrow(/permission denied/);
      await db.installUnsafeDecisions();
      for (const unsafe of [{ skipIdempotency: true }, { skipLeaseCheck: true }]) {
        await expect(applyTransfers(prisma, [{ request, fence: 3n, leaseId: leaseIdFor(3n) }], unsafe)).rejects.toThrow(
          /permission denied/,
        );
      }
      // The decision without lease ids is gone, for the worker role as for everyone.
      await expect(
        asRole.query('SELECT * FROM apply_transfers($1::text[], $2, $3, $4, $5::bigint[], $6::text[], $7::bigint[])', [
          ['x'],
          ['h'],
          ['w1'],
          ['w2'],
          ['1'],
          [null],
          ['4'],
        ]),
      ).rejects.toMatchObject({ code: '42883' });
    } finally {
      await prisma.$disconnect();
    }
    const balances = (await db.pg.query<{ id: string; balance: string }>('SELECT id, balance FROM wallets ORDER BY id'))
      .rows;
    expect(balances).toEqual([
      { id: 'w1', balance: '700' },
      { id: 'w2', balance: '1300' },
    ]);
  });

  it('control: a privilege granted by hand lets the role write; running db:worker-role again takes it back', async () => {
    await db.pg.query(`GRANT SELECT, UPDATE ON wallets TO ${role}`);
    expect(await outcome(asRole, "UPDATE wallets SET updated_at = updated_at WHERE id = 'w1'")).toBe('ok');
    const again = await ensureWorkerRole(db.url, role, PASSWORD, db.config);
    expect(again.created).toBe(false);
    expect(again.privileges).toEqual(expectedWorkerPrivileges(db.name, 'public'));
    expect(await outcome(asRole, "UPDATE wallets SET updated_at = updated_at WHERE id = 'w1'")).toBe('42501');
  });
});

describe('the decision functions', () => {
  it("run as their owner with a fixed search_path, PUBLIC may not execute them, and they are exactly the worker's, the intake's and the relay's", async () => {
    const { rows } = await db.pg.query<{ signature: string; config: string[] | null; public_execute: boolean }>(`
      SELECT p.proname || '(' || replace(oidvectortypes(p.proargtypes), ', ', ',') || ')' AS signature,
             p.proconfig AS config,
             has_function_privilege('public', p.oid, 'EXECUTE') AS public_execute
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = 'public' AND p.prosecdef ORDER BY 1`);
    expect(rows.map((r) => r.signature)).toEqual(
      [
        ...new Set([
          ...DECISION_FUNCTIONS,
          INTAKE_FUNCTION,
          INTAKE_OPERATION_FUNCTION,
          INTAKE_TRACED_FUNCTION,
          INTAKE_TRACED_OPERATION_FUNCTION,
          OUTCOME_FEED_FUNCTION,
          WALLET_BALANCE_AT_FUNCTION,
          WALLET_STATEMENT_FUNCTION,
          OPERATIONS_MATCHING_FUNCTION,
          ...RELAY_FUNCTIONS,
        ]),
      ].sort(),
    );
    for (const r of rows) {
      expect(r.config, r.signature).toEqual(['search_path=pg_catalog, public, pg_temp']);
      expect(r.public_execute, r.signature).toBe(false);
    }
  });
});

describe('ledger_entries is append-only for the owner too', () => {
  const OWNER_MAY_NOT = [
    'UPDATE ledger_entries SET amount = amount',
    "UPDATE ledger_entries SET amount = 0 WHERE operation_id = 'nothing-matches'",
    'DELETE FROM ledger_entries',
    'TRUNCATE ledger_entries',
  ];

  async function ownerAttempts(target: TestDatabase): Promise<Record<string, string>> {
    const results: Record<string, string> = {};
    for (const sql of OWNER_MAY_NOT) results[sql] = await failure(target.pg, sql);
    return results;
  }

  it('UPDATE, DELETE and TRUNCATE are refused by the trigger (even when no row matches); INSERT still works', async () => {
    const before = (await db.pg.query('SELECT count(*)::int AS n, sum(amount)::text AS total FROM ledger_entries'))
      .rows[0];
    const results = await ownerAttempts(db);
    for (const sql of OWNER_MAY_NOT)
      expect(results[sql], sql).toMatch(/^ledger_entries is append-only: (UPDATE|DELETE|TRUNCATE) refused$/);
    expect(
      (await db.pg.query('SELECT count(*)::int AS n, sum(amount)::text AS total FROM ledger_entries')).rows[0],
    ).toEqual(before);
    expect(
      await outcome(
        db.pg,
        "INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after) VALUES ('fix-1', 'w1', 'credit', 1, 1)",
      ),
    ).toBe('ok');
  });

  it('control: with the trigger dropped, the same statements go through', async () => {
    const bare = await createTestDatabase('ft_role_ctl');
    try {
      await seedWallets(bare.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
      await bare.pg.query(
        'DROP TRIGGER ledger_entries_no_update_delete ON ledger_entries; DROP TRIGGER ledger_entries_no_truncate ON ledger_entries',
      );
      const results = await ownerAttempts(bare);
      expect(results).toEqual(Object.fromEntries(OWNER_MAY_NOT.map((sql) => [sql, 'ok'])));
    } finally {
      await bare.drop();
    }
  });
});
