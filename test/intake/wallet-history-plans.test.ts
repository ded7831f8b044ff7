// A balance at an instant and a statement page read a few index entries whatever the ledger's
// size: on a ledger of 400,000 entries over 2,000 accounts, the statements wallet_balance_at() and
// wallet_statement() run (shown by auto_explain, nested statements included, as notices) use the
// wallet-time index and never scan the table, and read a few dozen buffers.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const ACCOUNTS = 2_000;
const PER_ACCOUNT = 200;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_histplan');
  await db.pg.query(`INSERT INTO wallets (id, currency, balance) SELECT 'a' || g, 'EUR', ${PER_ACCOUNT}
                       FROM generate_series(1, ${ACCOUNTS}) g`);
  // Entries written as the decisions write them: per account, ascending in time and id, each
  // carrying its running balance.
  await db.pg.query(`
    INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, created_at)
    SELECT 'op-' || n || '-' || a, 'a' || a, 'credit', 1, n,
           timestamptz '2026-11-01 00:00:00Z' + make_interval(secs => n * 60)
      FROM generate_series(1, ${PER_ACCOUNT}) n, generate_series(1, ${ACCOUNTS}) a
     ORDER BY n, a`);
  await db.pg.query('ANALYZE ledger_entries');
  await db.pg.query('ANALYZE wallets');
}, 120_000);
afterAll(async () => db.drop());

/** The plans of every statement `sql` runs, nested ones included, as auto_explain prints them (JSON). */
async function plansOf(sql: string, values: unknown[]): Promise<string[]> {
  const client: pg.PoolClient = await db.pg.connect();
  const notices: string[] = [];
  const listen = (n: { message?: string }) => notices.push(n.message ?? '');
  client.on('notice', listen);
  try {
    await client.query(`LOAD 'auto_explain'`);
    await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
      SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_format = json;
      SET auto_explain.log_level = notice; SET client_min_messages = notice`);
    await client.query(sql, values);
    await client.query('RESET auto_explain.log_min_duration');
  } finally {
    client.off('notice', listen);
    client.release(true);
  }
  return notices.filter((n) => n.includes('ledger_entries'));
}

/** Every node of a plan's JSON text, flattened. */
function nodesOf(notice: string): Record<string, unknown>[] {
  const plan = JSON.parse(notice.slice(notice.indexOf('{'))) as { Plan: Record<string, unknown> };
  const out: Record<string, unknown>[] = [];
  const walk = (node: Record<string, unknown>) => {
    out.push(node);
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  walk(plan.Plan);
  return out;
}

function expectIndexRangeScans(notices: string[]): void {
  expect(notices.length).toBeGreaterThan(0);
  for (const notice of notices) {
    const nodes = nodesOf(notice);
    const onEntries = nodes.filter((n) => n['Relation Name'] === 'ledger_entries');
    expect(onEntries.length).toBeGreaterThan(0);
    for (const node of onEntries) {
      expect(node['Node Type']).toMatch(/^Index (Only )?Scan$/);
      expect(node['Index Name']).toBe('ledger_entries_wallet_time_idx');
    }
    expect(nodes.filter((n) => String(n['Node Type']).includes('Seq Scan'))).toEqual([]);
    // The root's buffers count its children's: a page of 50 entries of one account, each on a heap
    // page of its own here, and the index pages above them.
    const root = nodes[0] ?? {};
    expect(Number(root['Shared Hit Blocks'] ?? 0) + Number(root['Shared Read Blocks'] ?? 0)).toBeLessThan(200);
  }
}

describe('the history functions on a large ledger', () => {
  it('a balance at an instant is two index lookups', async () => {
    const notices = await plansOf('SELECT * FROM wallet_balance_at($1, $2)', ['a777', '2026-11-01T01:40:30Z']);
    expectIndexRangeScans(notices);
    const { rows } = await db.pg.query('SELECT balance::int, held::int FROM wallet_balance_at($1, $2)', [
      'a777',
      '2026-11-01T01:40:30Z',
    ]);
    expect(rows).toEqual([{ balance: 100, held: 0 }]);
  });

  it('a statement page is one index range scan per account', async () => {
    const notices = await plansOf('SELECT * FROM wallet_statement($1, $2, $3, NULL, NULL, 50, TRUE)', [
      'a1234',
      '2026-11-01T00:30:00Z',
      '2026-11-02T00:00:00Z',
    ]);
    expectIndexRangeScans(notices);
    const { rows } = await db.pg.query(
      'SELECT count(*)::int AS n, min(balance_after)::int AS first FROM wallet_statement($1, $2, $3, NULL, NULL, 50)',
      ['a1234', '2026-11-01T00:30:00Z', '2026-11-02T00:00:00Z'],
    );
    expect(rows).toEqual([{ n: 50, first: 30 }]);
  });
});
