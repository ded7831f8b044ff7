// The intake's two login roles (`npm run db:producer-role`, `npm run db:read-role`). Connected
// as the producer role, request_transfer() works and every other statement on the tables and
// functions of the intake, the feed and the ledger fails with 42501; the read role may only read
// the feed and a wallet's history (its balance at an instant, its statement). Control: a privilege granted by hand (INSERT on transfer_requests) is seen by the
// same check, and the command takes it away again.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIntakeRole, expectedIntakeRolePrivileges, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { IntakeRoleError } from '../../src/errors.ts';
import { requestTransfer, requestTransfers } from '../../src/intake/intake.ts';
import { readOutcomes } from '../../src/intake/outcome-feed.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

const PASSWORD = 'intake-role-test-password-42';
let db: TestDatabase;
let producerRole: string;
let readRole: string;
let asProducer: pg.Client;
let asReader: pg.Client;

async function sqlState(client: pg.ClientBase, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

const TABLE_STATEMENTS = [
  'transfer_requests',
  'transfers',
  'wallets',
  'ledger_entries',
  'outcome_events',
  'outcome_pending',
]
  .flatMap((t) => [`SELECT * FROM ${t}`, `DELETE FROM ${t}`, `UPDATE ${t} SET operation_id = operation_id`])
  .map((s) => s.replace('UPDATE wallets SET operation_id = operation_id', 'UPDATE wallets SET balance = balance + 1'))
  .concat([
    "INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount) VALUES ('forged', repeat('0', 64), 'w1', 'w2', 1)",
    "INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, status, fence) VALUES ('x', repeat('0', 64), 'w1', 'w2', 1, 'applied', 1)",
    "INSERT INTO wallets (id, currency, balance) VALUES ('mine', 'EUR', 1000000)",
    "INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount) VALUES ('forged', 'w1', 'credit', 1000)",
    "INSERT INTO outcome_events (position, operation_id, kind, from_wallet, to_wallet, amount, decided_at) VALUES (99, 'x', 'applied', 'w1', 'w2', 1, now())",
    "INSERT INTO outcome_pending (operation_id, kind, from_wallet, to_wallet, amount) VALUES ('x', 'applied', 'w1', 'w2', 1)",
  ]);

const APPLY =
  "SELECT * FROM apply_transfers(ARRAY['f1'], ARRAY[repeat('0', 64)], ARRAY['w1'], ARRAY['w2'], ARRAY[1]::bigint[], ARRAY[NULL]::text[], ARRAY[1]::bigint[], ARRAY['00000000-0000-4000-8000-000000000001']::uuid[])";
const GIVE_UP = "SELECT record_transfer_given_up('g1', repeat('0', 64), 'forged', 0)";
const FEED = 'SELECT * FROM outcome_events_after(0, 10)';
const SEQUENCE = 'SELECT outcome_feed_sequence(10)';
const REQUEST = "SELECT request_transfer('raw-1', 'w1', 'w2', 5, NULL)";

/** Every statement the role must be refused, with the SQLSTATE it got ('ok' when it ran). */
async function refusals(client: pg.ClientBase, statements: readonly string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const s of statements) out[s] = await sqlState(client, s);
  return out;
}

const allRefused = (statements: readonly string[]) => Object.fromEntries(statements.map((s) => [s, '42501']));

beforeAll(async () => {
  db = await createTestDatabase('ft_introle');
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  producerRole = uniqueName('ft_p');
  readRole = uniqueName('ft_r');
});

afterAll(async () => {
  await asProducer?.end().catch(() => undefined);
  await asReader?.end().catch(() => undefined);
  await db.drop();
  await dropWorkerRole(db.url, producerRole);
  await dropWorkerRole(db.url, readRole);
});

describe('npm run db:producer-role', () => {
  it('creates a login role with exactly CONNECT, USAGE and EXECUTE on request_transfer and request_operation (both forms); never prints the password', async () => {
    const run = await runSource('src/cli/producer-role.ts', ['--role', producerRole], {
      DATABASE_URL: db.url,
      PRODUCER_DB_PASSWORD: PASSWORD,
    });
    expect(run.code, describeRun(run)).toBe(0);
    const result = lastJsonLine(run) as { role: string; created: boolean; privileges: string[] };
    expect(result).toMatchObject({ role: producerRole, created: true, kind: 'producer' });
    expect(result.privileges).toEqual([
      `DATABASE ${db.name} CONNECT`,
      'FUNCTION public.request_operation(jsonb,bigint) EXECUTE',
      'FUNCTION public.request_operation(jsonb,bigint,jsonb) EXECUTE',
      'FUNCTION public.request_transfer(text,text,text,bigint,text) EXECUTE',
      'FUNCTION public.request_transfer(text,text,text,bigint,text,jsonb) EXECUTE',
      'SCHEMA public USAGE',
    ]);
    expect(`${run.stdout}${run.stderr}`).not.toContain(PASSWORD);
    asProducer = new pg.Client({ connectionString: roleUrl(db.url, producerRole, PASSWORD) });
    await asProducer.connect();
  });

  it('may request a transfer (one open request row), and nothing else: every other statement is 42501', async () => {
    expect(await requestTransfer(asProducer, { operationId: 'p-1', from: 'w1', to: 'w2', amount: '5' }, 1000n)).toBe(
      'requested',
    );
    expect(await sqlState(asProducer, REQUEST)).toBe('ok');
    // Several at once: their advisory locks first, in one order (builtins PUBLIC may execute).
    const several = [
      { operationId: 'p-3', from: 'w1', to: 'w2', amount: '5' },
      { operationId: 'p-2', from: 'w1', to: 'w2', amount: '5' },
    ];
    expect(await requestTransfers(asProducer, several, 1000n)).toEqual(['requested', 'requested']);
    const { rows } = await db.pg.query(
      "SELECT operation_id, decided_at FROM transfer_requests WHERE operation_id IN ('p-1', 'raw-1') ORDER BY 1",
    );
    expect(rows).toEqual([
      { operation_id: 'p-1', decided_at: null },
      { operation_id: 'raw-1', decided_at: null },
    ]);
    const statements = [...TABLE_STATEMENTS, APPLY, GIVE_UP, FEED, SEQUENCE];
    expect(await refusals(asProducer, statements)).toEqual(allRefused(statements));
  });

  it('control: a privilege granted by hand is seen by the same check, and the command takes it away', async () => {
    const forged =
      "INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount) VALUES ('forged', repeat('0', 64), 'w1', 'w2', 1)";
    await db.pg.query(`GRANT INSERT ON transfer_requests TO ${producerRole}`);
    const statements = [...TABLE_STATEMENTS, APPLY];
    const seen = await refusals(asProducer, statements);
    expect(seen).not.toEqual(allRefused(statements));
    expect(seen[forged]).toBe('ok');
    const again = await ensureIntakeRole(INTAKE_ROLES.producer, db.url, producerRole, PASSWORD, db.config);
    expect(again).toMatchObject({ created: false });
    expect(again.privileges).toEqual(expectedIntakeRolePrivileges(INTAKE_ROLES.producer, db.name, 'public'));
    await db.pg.query("DELETE FROM transfer_requests WHERE operation_id = 'forged'");
    expect(await refusals(asProducer, statements)).toEqual(allRefused(statements));
  });

  it('refuses the owner, a role with powers, a member of a role, an owner of anything, and a bad name', async () => {
    const spec = INTAKE_ROLES.producer;
    const me = (await db.pg.query<{ me: string }>('SELECT current_user AS me')).rows[0]!.me;
    await expect(ensureIntakeRole(spec, db.url, me, PASSWORD, db.config)).rejects.toThrow(IntakeRoleError);
    await expect(ensureIntakeRole(spec, db.url, 'Bad"; DROP ROLE x; --', PASSWORD, db.config)).rejects.toThrow(
      /role name/,
    );
    const member = uniqueName('ft_m');
    const owner = uniqueName('ft_o');
    try {
      await db.pg.query(`CREATE ROLE ${member} LOGIN`);
      await db.pg.query(`GRANT pg_read_all_data TO ${member}`);
      await expect(ensureIntakeRole(spec, db.url, member, PASSWORD, db.config)).rejects.toThrow(/member of/);
      await db.pg.query(`CREATE ROLE ${owner} LOGIN`);
      await db.pg.query(`CREATE TABLE owned_${owner} (x int)`);
      await db.pg.query(`ALTER TABLE owned_${owner} OWNER TO ${owner}`);
      await expect(ensureIntakeRole(spec, db.url, owner, PASSWORD, db.config)).rejects.toThrow(/owns objects/);
    } finally {
      await db.pg.query(`DROP TABLE IF EXISTS owned_${owner}`);
      await dropWorkerRole(db.url, member);
      await dropWorkerRole(db.url, owner);
    }
  });
});

describe('npm run db:read-role', () => {
  it("creates a login role that may read the feed, a wallet's history and the operations, and nothing else", async () => {
    const run = await runSource('src/cli/read-role.ts', ['--role', readRole], {
      DATABASE_URL: db.url,
      READ_DB_PASSWORD: PASSWORD,
    });
    expect(run.code, describeRun(run)).toBe(0);
    expect((lastJsonLine(run) as { privileges: string[] }).privileges).toEqual([
      `DATABASE ${db.name} CONNECT`,
      'FUNCTION public.operations_matching(text,text,text,text,timestamp with time zone,timestamp with time zone,jsonb,timestamp with time zone,text,integer) EXECUTE',
      'FUNCTION public.outcome_events_after(bigint,integer) EXECUTE',
      'FUNCTION public.wallet_balance_at(text,timestamp with time zone) EXECUTE',
      'FUNCTION public.wallet_statement(text,timestamp with time zone,timestamp with time zone,timestamp with time zone,bigint,integer,boolean) EXECUTE',
      'SCHEMA public USAGE',
    ]);
    expect(`${run.stdout}${run.stderr}`).not.toContain(PASSWORD);
    asReader = new pg.Client({ connectionString: roleUrl(db.url, readRole, PASSWORD) });
    await asReader.connect();
    expect(await readOutcomes(asReader, 0n)).toEqual([]);
    expect(await sqlState(asReader, FEED)).toBe('ok');
    const statements = [...TABLE_STATEMENTS, APPLY, GIVE_UP, SEQUENCE, REQUEST];
    expect(await refusals(asReader, statements)).toEqual(allRefused(statements));
  });

  it('refuses a missing password in one line, without a stack', async () => {
    const run = await runSource('src/cli/read-role.ts', ['--role', readRole], {
      DATABASE_URL: db.url,
      READ_DB_PASSWORD: '',
    });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toMatch(/^configuration error: READ_DB_PASSWORD/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
