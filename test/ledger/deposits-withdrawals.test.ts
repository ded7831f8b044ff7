// Money in and out: a deposit credits a wallet from the outside world and a withdrawal debits it to
// the outside world, each with an external reference, in double entry against the currency's
// settlement account `$settlement:<currency>`. The settlement account has no wallet row: its
// entries carry its running balance, one batch after the other under its advisory lock, and
// reconcile() holds it to mirror every applied deposit and withdrawal. A withdrawal is a debit like
// any other (fenced, down to minus the credit limit); a deposit is decided and fenced on the wallet
// it credits.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import { balancesOf, decidedAs, type PaymentOp } from '../support/payments.ts';
import { entriesWithRunningSums } from '../support/running-sums.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 7n;
const MIRROR = 'each settlement account mirrors the deposits and withdrawals of its currency';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_settle');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  // a1, a2: EUR, balance 100, limit 50; u1: USD, balance 0.
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 100n, creditLimitMinor: 50n, prefix: 'a', currency: 'EUR' });
  await seedWallets(db.prisma, { wallets: 1, balanceMinor: 0n, prefix: 'u', currency: 'USD' });
});

/** A deposit into `wallet` (the wallet it is decided on, `from` in SQL's arrays). */
const deposit = (operationId: string, wallet: string, amount: bigint, currency = 'EUR', fence = FENCE): PaymentOp => ({
  kind: 'deposit',
  operationId,
  from: wallet,
  amount,
  currency,
  ref: `psp:${operationId}`,
  fence,
});

const withdrawal = (operationId: string, wallet: string, amount: bigint, currency = 'EUR'): PaymentOp => ({
  kind: 'withdrawal',
  operationId,
  from: wallet,
  amount,
  currency,
  ref: `bank:${operationId}`,
  fence: FENCE,
});

const decide = (...ops: PaymentOp[]): Promise<string[]> => decidedAs(db.pg, ops);

async function settlementEntries(account: string): Promise<string[]> {
  const { rows } = await db.pg.query<{ operation_id: string; amount: string; balance_after: string }>(
    'SELECT operation_id, amount, balance_after FROM ledger_entries WHERE wallet_id = $1 ORDER BY id',
    [account],
  );
  return rows.map((r) => `${r.operation_id}:${r.amount}→${r.balance_after}`);
}

async function failing(): Promise<string[]> {
  return (await reconcile(db.prisma)).invariants.filter((i) => !i.ok).map((i) => i.name);
}

describe('deposits and withdrawals', () => {
  it('post against the settlement account, which carries its running balance', async () => {
    expect(
      await decide(deposit('d1', 'a1', 500n), withdrawal('w1', 'a1', 200n), deposit('d2', 'u1', 9n, 'USD')),
    ).toEqual(['applied', 'applied', 'applied']);
    expect(await balancesOf(db.pg, ['a1', 'u1'])).toEqual({ a1: 400n, u1: 9n });
    expect(await settlementEntries('$settlement:EUR')).toEqual(['d1:-500→-500', 'w1:200→-300']);
    expect(await settlementEntries('$settlement:USD')).toEqual(['d2:-9→-9']);
    const { rows } = await db.pg.query(
      `SELECT t.operation_id, t.kind, t.from_wallet, t.to_wallet, t.amount::text, t.reference, e.detail
         FROM transfers t JOIN outcome_pending e ON e.operation_id = t.operation_id
        WHERE t.kind IN ('deposit', 'withdrawal') ORDER BY t.operation_id`,
    );
    expect(rows).toEqual([
      {
        operation_id: 'd1',
        kind: 'deposit',
        from_wallet: 'a1',
        to_wallet: 'a1',
        amount: '500',
        reference: 'psp:d1',
        detail: { reference: 'psp:d1', settlement: '$settlement:EUR' },
      },
      {
        operation_id: 'd2',
        kind: 'deposit',
        from_wallet: 'u1',
        to_wallet: 'u1',
        amount: '9',
        reference: 'psp:d2',
        detail: { reference: 'psp:d2', settlement: '$settlement:USD' },
      },
      {
        operation_id: 'w1',
        kind: 'withdrawal',
        from_wallet: 'a1',
        to_wallet: null,
        amount: '200',
        reference: 'bank:w1',
        detail: { reference: 'bank:w1', settlement: '$settlement:EUR' },
      },
    ]);
    expect(await failing()).toEqual([]);
  });

  it('refuse an unknown wallet, another currency, and a withdrawal past the credit limit', async () => {
    expect(
      await decide(
        deposit('d1', 'nobody', 5n),
        deposit('d2', 'a1', 5n, 'USD'),
        withdrawal('w1', 'a2', 151n),
        withdrawal('w2', 'a2', 150n),
        withdrawal('w3', 'u1', 1n, 'USD'),
      ),
    ).toEqual([
      'rejected:unknown_wallet',
      'rejected:currency_mismatch',
      'rejected:insufficient_funds',
      'applied',
      'rejected:insufficient_funds',
    ]);
    expect(await balancesOf(db.pg, ['a2'])).toEqual({ a2: -50n });
    expect(await settlementEntries('$settlement:EUR')).toEqual(['w2:150→150']);
    expect(await failing()).toEqual([]);
  });

  it('answer a redelivery from the record and another reference as a conflict; a stale token changes nothing', async () => {
    expect(await decide(deposit('d1', 'a1', 500n, 'EUR', 9n))).toEqual(['applied']);
    expect(
      await decide(deposit('d1', 'a1', 500n, 'EUR', 9n), { ...deposit('d1', 'a1', 500n), ref: 'psp:other' }),
    ).toEqual(['duplicate', 'conflict']);
    expect(await decide(deposit('d2', 'a1', 1n, 'EUR', 8n))).toEqual(['stale_fence']);
    expect(await balancesOf(db.pg, ['a1'])).toEqual({ a1: 600n });
  });

  it('two batches posting to one settlement account at once take turns, each entry after the last', async () => {
    const first = await db.pg.connect();
    const second = await db.pg.connect();
    const call = (client: typeof first, op: PaymentOp) =>
      client.query<{ outcome: string }>(
        `SELECT outcome FROM apply_payments(ARRAY[$1], ARRAY[$2], ARRAY[repeat('c', 64)], ARRAY[$3], ARRAY[NULL]::text[],
           ARRAY[$4]::bigint[], ARRAY['EUR'], ARRAY[$5], ARRAY[NULL]::bigint[], ARRAY[NULL]::timestamptz[],
           ARRAY[NULL]::jsonb[], ARRAY[$6]::bigint[], ARRAY[$7]::uuid[], 604800000)`,
        [op.kind, op.operationId, op.from, op.amount?.toString(), op.ref, FENCE.toString(), leaseIdFor(FENCE)],
      );
    try {
      await first.query('BEGIN');
      expect((await call(first, deposit('d1', 'a1', 10n))).rows).toEqual([{ outcome: 'applied' }]);
      const pid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      const late = call(second, withdrawal('w1', 'a2', 30n));
      await waitUntilBlocked(db.pg, pid, 10_000);
      await first.query('COMMIT');
      expect((await late).rows).toEqual([{ outcome: 'applied' }]);
    } finally {
      first.release();
      second.release();
    }
    expect(await settlementEntries('$settlement:EUR')).toEqual(['d1:-10→-10', 'w1:30→20']);
    const sums = await entriesWithRunningSums(db.pg);
    expect(sums.filter((e) => e.balance_after !== e.running)).toEqual([]);
    expect(await failing()).toEqual([]);
  });

  it('reconcile() finds a settlement entry no deposit or withdrawal accounts for', async () => {
    expect(await decide(deposit('d1', 'a1', 40n))).toEqual(['applied']);
    // Money taken in by hand: the wallet and the settlement account agree with each other, but
    // no applied deposit says so.
    await db.pg.query(`UPDATE wallets SET balance = balance + 5 WHERE id = 'a1'`);
    await db.pg.query(
      `INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit)
       VALUES ('d1', '$settlement:EUR', 'debit', -5, -45, NULL), ('d1', 'a1', 'credit', 5, 145, 50)`,
    );
    const names = await failing();
    expect(names).toContain(MIRROR);
    const report = await reconcile(db.prisma);
    expect(report.invariants.find((i) => i.name === MIRROR)?.counterexamples).toEqual([
      { account: '$settlement:EUR', entries_sum: '-45', settled_sum: '-40' },
    ]);
  });
});
