// Changing a credit limit is an operation of its own (`credit_limit`), decided and fenced on the
// wallet like a debit: under the wallet's row lock, so a limit lowered while a debit is in flight
// is decided before or after it and never beside it. A limit below what the wallet already uses
// is refused `limit_below_used`; one at or above it applies to every debit decided after it. Each
// wallet entry carries the limit in force when it was written, and reconcile() judges the history
// by it: a limit lowered once the balance came back leaves the old debits within their own.
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import { balancesOf, decidedAs, type PaymentOp, splitOp } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 7n;
const HISTORY = "no entry's running balance below minus the credit limit in force then";

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_limit_ops');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  // c1: balance 100, limit 500; p1, p2: balance 100, no limit.
  await seedWallets(db.prisma, {
    wallets: 1,
    balanceMinor: 100n,
    creditLimitMinor: 500n,
    prefix: 'c',
    currency: 'EUR',
  });
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 100n, prefix: 'p', currency: 'EUR' });
});

const limit = (operationId: string, from: string, amount: bigint, fence = FENCE): PaymentOp => ({
  kind: 'credit_limit',
  operationId,
  from,
  amount,
  fence,
});

/** A debit of `from` with two credits (a split: the kind that debits and has no payee of its own). */
const split = (operationId: string, from: string, ...legs: [string, bigint][]): PaymentOp =>
  splitOp(operationId, from, legs, FENCE);

const decide = (...ops: PaymentOp[]): Promise<string[]> => decidedAs(db.pg, ops);

async function limitsOf(ids: readonly string[]): Promise<Record<string, bigint>> {
  const { rows } = await db.pg.query<{ id: string; credit_limit: string }>(
    'SELECT id, credit_limit FROM wallets WHERE id = ANY ($1) ORDER BY id',
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.id, BigInt(r.credit_limit)]));
}

/** A wallet's entries in order: amount, running balance, the limit they carry. */
async function entriesOf(wallet: string): Promise<string[]> {
  const { rows } = await db.pg.query<{ amount: string; balance_after: string; credit_limit: string | null }>(
    'SELECT amount, balance_after, credit_limit FROM ledger_entries WHERE wallet_id = $1 ORDER BY id',
    [wallet],
  );
  return rows.map((r) => `${r.amount}→${r.balance_after}@${r.credit_limit}`);
}

/** The credit_limit's arguments for apply_payments() on a client of our own (a transaction held open). */
function decideOn(client: pg.PoolClient, op: PaymentOp) {
  return client.query<{ outcome: string; reason: string | null }>(
    `SELECT outcome, reason FROM apply_payments(ARRAY[$1], ARRAY[$2], ARRAY[repeat('b', 64)], ARRAY[$3], ARRAY[$4]::text[],
       ARRAY[$5]::bigint[], ARRAY[NULL]::text[], ARRAY[NULL]::text[], ARRAY[NULL]::bigint[], ARRAY[NULL]::timestamptz[],
       ARRAY[$6]::jsonb[], ARRAY[$7]::bigint[], ARRAY[$8]::uuid[], 604800000)`,
    [
      op.kind,
      op.operationId,
      op.from,
      op.to ?? null,
      op.amount?.toString() ?? null,
      op.legs === undefined ? null : JSON.stringify(op.legs.map((l) => ({ to: l.to, amount: l.amount.toString() }))),
      FENCE.toString(),
      leaseIdFor(FENCE),
    ],
  );
}

describe('credit_limit: a limit changed by an operation', () => {
  it('raises and lowers a limit down to what is used, never below; each entry carries its limit', async () => {
    expect(await decide(limit('l1', 'p1', 300n))).toEqual(['applied']);
    expect(await limitsOf(['p1'])).toEqual({ p1: 300n });
    // The raised limit applies to the next debit: p1 goes to -250.
    expect(await decide(split('s1', 'p1', ['p2', 349n], ['c1', 1n]))).toEqual(['applied']);
    expect(await decide(limit('l2', 'p1', 249n), limit('l3', 'p1', 250n))).toEqual([
      'rejected:limit_below_used',
      'applied',
    ]);
    expect(await limitsOf(['p1'])).toEqual({ p1: 250n });
    // At the new limit exactly: not one unit more.
    expect(await decide(split('s2', 'p1', ['p2', 1n], ['c1', 1n]))).toEqual(['rejected:insufficient_funds']);
    expect(await entriesOf('p1')).toEqual(['100→100@0', '-350→-250@300']);
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
  });

  it('records the limit asked for and the one before in its outcome; duplicates and conflicts as any kind', async () => {
    expect(await decide(limit('l1', 'c1', 0n))).toEqual(['applied']);
    const { rows } = await db.pg.query(
      `SELECT t.kind, t.amount::text, t.to_wallet, e.detail FROM transfers t
         JOIN outcome_pending e ON e.operation_id = t.operation_id WHERE t.operation_id = 'l1'`,
    );
    expect(rows).toEqual([
      {
        kind: 'credit_limit',
        amount: '0',
        to_wallet: null,
        detail: { creditLimit: '0', previousCreditLimit: '500', used: '0' },
      },
    ]);
    expect(await decide(limit('l1', 'c1', 0n), limit('l1', 'c1', 9n))).toEqual(['duplicate', 'conflict']);
    expect(await decide(limit('l9', 'nobody', 10n))).toEqual(['rejected:unknown_wallet']);
    expect(await limitsOf(['c1'])).toEqual({ c1: 0n });
  });

  it('is fenced on its wallet: a token below the wallet fence changes nothing', async () => {
    expect(await decide(limit('l1', 'c1', 600n, 9n))).toEqual(['applied']);
    expect(await decide(limit('l2', 'c1', 0n, 8n))).toEqual(['stale_fence']);
    expect(await limitsOf(['c1'])).toEqual({ c1: 600n });
    const { rows } = await db.pg.query("SELECT last_fence::text FROM wallets WHERE id = 'c1'");
    expect(rows).toEqual([{ last_fence: '9' }]);
  });

  it('a limit lowered while a debit is in flight waits for it, then is refused below what it used', async () => {
    const debit = await db.pg.connect();
    const lower = await db.pg.connect();
    try {
      await debit.query('BEGIN');
      expect((await decideOn(debit, split('s1', 'c1', ['p1', 399n], ['p2', 1n]))).rows[0]).toEqual({
        outcome: 'applied',
        reason: null,
      });
      const pid = (await lower.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      const late = decideOn(lower, limit('l1', 'c1', 200n));
      await waitUntilBlocked(db.pg, pid, 10_000);
      await debit.query('COMMIT');
      expect((await late).rows[0]).toEqual({ outcome: 'rejected', reason: 'limit_below_used' });
    } finally {
      debit.release();
      lower.release();
    }
    expect(await balancesOf(db.pg, ['c1'])).toEqual({ c1: -300n });
    expect(await limitsOf(['c1'])).toEqual({ c1: 500n });
  });

  it('a debit behind a limit lowered first is decided against the new limit', async () => {
    const lower = await db.pg.connect();
    const debit = await db.pg.connect();
    try {
      await lower.query('BEGIN');
      expect((await decideOn(lower, limit('l1', 'c1', 0n))).rows[0]).toEqual({ outcome: 'applied', reason: null });
      const pid = (await debit.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      const late = decideOn(debit, split('s1', 'c1', ['p1', 149n], ['p2', 1n]));
      await waitUntilBlocked(db.pg, pid, 10_000);
      await lower.query('COMMIT');
      expect((await late).rows[0]).toEqual({ outcome: 'rejected', reason: 'insufficient_funds' });
    } finally {
      lower.release();
      debit.release();
    }
    expect(await balancesOf(db.pg, ['c1'])).toEqual({ c1: 100n });
  });

  it('reconcile() judges each entry by its own limit, and finds one below it', async () => {
    // c1 spends into its credit, is paid back, and its limit is taken away: the -300 it went to
    // was within the 500 in force then.
    expect(
      await decide(split('s1', 'c1', ['p1', 399n], ['p2', 1n]), split('s2', 'p1', ['c1', 300n], ['p2', 1n])),
    ).toEqual(['applied', 'applied']);
    expect(await decide(limit('l1', 'c1', 0n))).toEqual(['applied']);
    expect(await entriesOf('c1')).toEqual(['100→100@500', '-400→-300@500', '300→0@500']);
    expect((await reconcile(db.prisma)).invariants.filter((i) => !i.ok)).toEqual([]);
    // The debit's recorded limit rewritten by hand to the limit now (the append-only trigger off):
    // the history check finds it.
    await db.pg.query('ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_no_update_delete');
    await db.pg.query("UPDATE ledger_entries SET credit_limit = 0 WHERE operation_id = 's1' AND wallet_id = 'c1'");
    await db.pg.query('ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_no_update_delete');
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok).map((i) => i.name)).toEqual([HISTORY]);
    expect(report.invariants.find((i) => i.name === HISTORY)?.counterexamples).toEqual([
      expect.objectContaining({ account: 'c1', operation_id: 's1', balance_after: '-300', credit_limit: '0' }),
    ]);
  });

  it("the decision refuses a limit above the wallets' ceiling before any lock", async () => {
    await expect(decide(limit('l1', 'c1', 10n ** 17n + 1n))).rejects.toMatchObject({ code: '22023' });
    await expect(decide({ kind: 'credit_limit', operationId: 'l2', from: 'c1', fence: FENCE })).rejects.toMatchObject({
      code: '22023',
    });
    expect(await decide(limit('l3', 'c1', 10n ** 17n))).toEqual(['applied']);
  });
});
