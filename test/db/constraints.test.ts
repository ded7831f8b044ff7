// The last line of defence lives in the tables: CHECK (balance >= -credit_limit) on wallets and
// CHECK (amount > 0) on transfers refuse bad rows with SQLSTATE 23514 whatever code writes them,
// and let good rows through.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const CHECK_VIOLATION = '23514';
const HASH = 'a'.repeat(64);

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_checks');
});

afterAll(async () => {
  await db?.drop();
});

/** The PostgreSQL error a statement fails with; fails the test when it succeeds. */
async function failureOf(sql: string, values: unknown[]): Promise<{ code?: string; constraint?: string }> {
  try {
    await db.pg.query(sql, values);
  } catch (err) {
    return err as { code?: string; constraint?: string };
  }
  throw new Error(`statement succeeded: ${sql} ${JSON.stringify(values)}`);
}

async function balanceOf(id: string): Promise<string | undefined> {
  const { rows } = await db.pg.query<{ balance: string }>('SELECT balance FROM wallets WHERE id = $1', [id]);
  return rows[0]?.balance;
}

const insertWallet = 'INSERT INTO wallets (id, currency, balance) VALUES ($1, $2, $3)';
const insertTransfer = `INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency, status, reason, fence)
  VALUES ($1, $2, 'w-a', 'w-b', $3, 'EUR', 'applied', NULL, 1)`;

describe('wallets: CHECK (balance >= -credit_limit), with the default limit 0', () => {
  it('refuses a wallet opened with a negative balance', async () => {
    const err = await failureOf(insertWallet, ['neg-open', 'EUR', -1]);
    expect(err).toMatchObject({ code: CHECK_VIOLATION, constraint: 'wallets_balance_within_limit' });
    expect(await balanceOf('neg-open')).toBeUndefined();
  });

  it('refuses a debit that would take a balance below zero, and leaves the balance as it was', async () => {
    await db.pg.query(insertWallet, ['neg-debit', 'EUR', 100]);
    const err = await failureOf('UPDATE wallets SET balance = balance - $2 WHERE id = $1', ['neg-debit', 101]);
    expect(err).toMatchObject({ code: CHECK_VIOLATION, constraint: 'wallets_balance_within_limit' });
    expect(await balanceOf('neg-debit')).toBe('100');
  });

  it('accepts a zero balance and a debit down to exactly zero', async () => {
    await db.pg.query(insertWallet, ['zero-open', 'EUR', 0]);
    expect(await balanceOf('zero-open')).toBe('0');
    await db.pg.query(insertWallet, ['to-zero', 'EUR', 100]);
    await db.pg.query('UPDATE wallets SET balance = balance - $2 WHERE id = $1', ['to-zero', 100]);
    expect(await balanceOf('to-zero')).toBe('0');
  });
});

describe('transfers: CHECK (amount > 0)', () => {
  it.each([0, -1, -1_000_000])('refuses amount %d', async (amount) => {
    const operationId = `bad-amount-${amount}`;
    const err = await failureOf(insertTransfer, [operationId, HASH, amount]);
    expect(err).toMatchObject({ code: CHECK_VIOLATION, constraint: 'transfers_amount_positive' });
    const { rowCount } = await db.pg.query('SELECT 1 FROM transfers WHERE operation_id = $1', [operationId]);
    expect(rowCount).toBe(0);
  });

  it('accepts the smallest and a large positive amount', async () => {
    await db.pg.query(insertTransfer, ['good-1', HASH, 1]);
    await db.pg.query(insertTransfer, ['good-big', HASH, '1000000000000000']);
    const { rows } = await db.pg.query<{ operation_id: string; amount: string }>(
      "SELECT operation_id, amount FROM transfers WHERE operation_id LIKE 'good-%' ORDER BY operation_id",
    );
    expect(rows).toEqual([
      { operation_id: 'good-1', amount: '1' },
      { operation_id: 'good-big', amount: '1000000000000000' },
    ]);
  });
});
