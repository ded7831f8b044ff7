// The harnesses' bulk seed (seedWallets: chaos, bench, scaling) is idempotent and goes
// through the ledger: a second run changes nothing, every wallet's balance equals the sum of its
// entries, and the funding accounts balance the opening entries to zero. `npm run db:seed`, which
// opens and funds wallets through the decision, is test/cli/seed-cli.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FUNDING_ACCOUNT_PREFIX,
  type SeedRequest,
  seedWallets,
  validateSeedRequest,
} from '../../src/ledger/seed-wallets.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_seed');
});

afterAll(async () => {
  await db?.drop();
});

/** Every wallet's balance, by id. */
async function balances(): Promise<Record<string, string>> {
  const { rows } = await db.pg.query<{ id: string; balance: string }>('SELECT id, balance FROM wallets ORDER BY id');
  return Object.fromEntries(rows.map((r) => [r.id, r.balance]));
}

async function entryCount(): Promise<number> {
  const { rows } = await db.pg.query<{ n: string }>('SELECT count(*) AS n FROM ledger_entries');
  return Number(rows[0]?.n);
}

/** The ledger invariants after seeding, checked with plain SQL rather than the code under test. */
async function expectLedgerBalanced(): Promise<void> {
  const mismatched = await db.pg.query(`
    SELECT w.id, w.balance, coalesce(sum(e.amount), 0) AS entries
      FROM wallets w LEFT JOIN ledger_entries e ON e.wallet_id = w.id
     GROUP BY w.id, w.balance
    HAVING w.balance <> coalesce(sum(e.amount), 0)`);
  expect(mismatched.rows, 'wallets whose balance differs from the sum of their entries').toEqual([]);

  const { rows } = await db.pg.query<{ kind: string; total: string }>(
    'SELECT kind, sum(amount)::text AS total FROM ledger_entries GROUP BY kind ORDER BY kind',
  );
  const totals = Object.fromEntries(rows.map((r) => [r.kind, BigInt(r.total)]));
  expect(Object.keys(totals).every((k) => k === 'opening' || k === 'funding')).toBe(true);
  expect((totals.opening ?? 0n) + (totals.funding ?? 0n)).toBe(0n);

  // Funding entries sit on `$funding:<CUR>` only, and each currency's funding balances its wallets.
  const perCurrency = await db.pg.query<{ currency: string; wallets: string; funding: string }>(
    `
    SELECT w.currency,
           sum(w.balance)::text AS wallets,
           (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
             WHERE e.kind = 'funding' AND e.wallet_id = $1 || w.currency)::text AS funding
      FROM wallets w GROUP BY w.currency`,
    [FUNDING_ACCOUNT_PREFIX],
  );
  for (const row of perCurrency.rows) {
    expect(BigInt(row.wallets) + BigInt(row.funding), row.currency).toBe(0n);
  }
  const stray = await db.pg.query(
    "SELECT wallet_id FROM ledger_entries WHERE kind = 'funding' AND wallet_id NOT LIKE '$funding:___'",
  );
  expect(stray.rows).toEqual([]);
  // Each opening is one operation whose two entries sum to zero.
  const unbalanced = await db.pg.query(
    'SELECT operation_id FROM ledger_entries GROUP BY operation_id HAVING sum(amount) <> 0 OR count(*) <> 2',
  );
  expect(unbalanced.rows).toEqual([]);
}

describe('seedWallets', () => {
  const usd: SeedRequest = { wallets: 15, balanceMinor: 2_500n, prefix: 'usd-', currency: 'USD' };

  it('is idempotent, and a larger second run only adds the new wallets', async () => {
    expect(await seedWallets(db.prisma, usd)).toEqual({ requested: 15, created: 15, openingEntries: 30 });
    const afterFirst = await balances();
    const entries = await entryCount();
    expect(await seedWallets(db.prisma, usd)).toEqual({ requested: 15, created: 0, openingEntries: 0 });
    expect(await balances()).toEqual(afterFirst);
    expect(await entryCount()).toBe(entries);

    // usd-16..usd-18 are new; the first 15 keep their balance even though 9 is asked now.
    expect(await seedWallets(db.prisma, { ...usd, wallets: 18, balanceMinor: 9n })).toEqual({
      requested: 18,
      created: 3,
      openingEntries: 6,
    });
    const after = await balances();
    expect(after['usd-15']).toBe('2500');
    expect(after['usd-16']).toBe('9');
    expect(after['usd-19']).toBeUndefined();
    await expectLedgerBalanced();
  });

  it('posts no entry for a zero opening balance', async () => {
    expect(await seedWallets(db.prisma, { wallets: 3, balanceMinor: 0n, prefix: 'empty-', currency: 'GBP' })).toEqual({
      requested: 3,
      created: 3,
      openingEntries: 0,
    });
    const { rows } = await db.pg.query(
      "SELECT 1 FROM ledger_entries WHERE wallet_id LIKE 'empty-%' OR wallet_id = '$funding:GBP'",
    );
    expect(rows).toEqual([]);
    await expectLedgerBalanced();
  });

  it('validates the request before touching the database', async () => {
    const ok: SeedRequest = { wallets: 1, balanceMinor: 0n, prefix: 'v-', currency: 'EUR' };
    expect(() => validateSeedRequest(ok)).not.toThrow();
    for (const bad of [
      { ...ok, wallets: 0 },
      { ...ok, wallets: 1.5 },
      { ...ok, wallets: 1_000_001 },
      { ...ok, balanceMinor: -1n },
      { ...ok, balanceMinor: 10n ** 17n + 1n },
      { ...ok, prefix: 'has space' },
      { ...ok, prefix: '$funding:' },
      { ...ok, currency: 'eur' },
      { ...ok, currency: 'EURO' },
    ]) {
      expect(
        () => validateSeedRequest(bad),
        JSON.stringify(bad, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)),
      ).toThrow(RangeError);
    }
    const before = await entryCount();
    await expect(seedWallets(db.prisma, { ...ok, currency: 'eur' })).rejects.toThrow(RangeError);
    expect(await entryCount()).toBe(before);
  });
});
