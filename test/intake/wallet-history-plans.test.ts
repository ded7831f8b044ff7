// A balance at an instant and a statement page read a few index entries whatever the ledger's
// size: on a ledger of 400,000 entries over 2,000 accounts, the statements wallet_balance_at() and
// wallet_statement() run (shown by auto_explain, nested statements included, as notices) use the
// wallet-time index and never scan the table, and read a few dozen buffers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buffersOf, nodesOf, plansOf } from '../support/plans.ts';
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
    expect(buffersOf(nodes)).toBeLessThan(200);
  }
}

describe('the history functions on a large ledger', () => {
  it('a balance at an instant is two index lookups', async () => {
    const notices = await plansOf(
      db.pg,
      'SELECT * FROM wallet_balance_at($1, $2)',
      ['a777', '2026-11-01T01:40:30Z'],
      'ledger_entries',
    );
    expectIndexRangeScans(notices);
    const { rows } = await db.pg.query('SELECT balance::int, held::int FROM wallet_balance_at($1, $2)', [
      'a777',
      '2026-11-01T01:40:30Z',
    ]);
    expect(rows).toEqual([{ balance: 100, held: 0 }]);
  });

  it('a statement page is one index range scan per account', async () => {
    const notices = await plansOf(
      db.pg,
      'SELECT * FROM wallet_statement($1, $2, $3, NULL, NULL, 50, TRUE)',
      ['a1234', '2026-11-01T00:30:00Z', '2026-11-02T00:00:00Z'],
      'ledger_entries',
    );
    expectIndexRangeScans(notices);
    const { rows } = await db.pg.query(
      'SELECT count(*)::int AS n, min(balance_after)::int AS first FROM wallet_statement($1, $2, $3, NULL, NULL, 50)',
      ['a1234', '2026-11-01T00:30:00Z', '2026-11-02T00:00:00Z'],
    );
    expect(rows).toEqual([{ n: 50, first: 30 }]);
  });
});
