// Credit limits the engine enforces: every kind that debits (a transfer, a hold, a split, a
// refund) may take its source's balance down to minus the wallet's credit limit and never below,
// decided under the wallet's row lock, so no ordering of deliveries can pass it: two debits that
// each fit but not together (in one batch, and in two transactions at once), a hold that takes the
// last of the limit and a transfer behind it. A wallet seeded without a limit decides as before
// (limit 0), and the table's CHECK refuses a balance below minus the limit written by hand.
// Changing a limit, and the history judged by the limit in force: credit-limit-changes.test.ts.
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { CREDIT_LIMIT_MAX, seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import { applyPayments, balancesOf, type PaymentOp, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 7n;
const LEASE = leaseIdFor(FENCE);

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_limits');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  // c1, c2: balance 100, limit 500 (may go down to -500); p1, p2: balance 100, no limit.
  await seedWallets(db.prisma, {
    wallets: 2,
    balanceMinor: 100n,
    creditLimitMinor: 500n,
    prefix: 'c',
    currency: 'EUR',
  });
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 100n, prefix: 'p', currency: 'EUR' });
});

const transfer = (operationId: string, from: string, to: string, amountMinor: bigint) => ({
  request: { operationId, from, to, amountMinor, currency: null },
  fence: FENCE,
  leaseId: LEASE,
});

async function transfers(...items: ReturnType<typeof transfer>[]): Promise<string[]> {
  return (await applyTransfers(db.prisma, items)).map((r) =>
    r.outcome === 'rejected' ? `rejected:${r.reason}` : r.outcome,
  );
}

async function payments(...ops: PaymentOp[]): Promise<string[]> {
  return (await applyPayments(db.pg, ops)).map(said);
}

/** The transfer's arguments for apply_transfers() on a client of our own (a transaction held open). */
function decideOn(client: pg.PoolClient, operationId: string, from: string, to: string, amount: bigint) {
  return client.query<{ outcome: string; reason: string | null }>(
    `SELECT outcome, reason FROM apply_transfers(ARRAY[$1], ARRAY[repeat('a', 64)], ARRAY[$2], ARRAY[$3],
       ARRAY[$4]::bigint[], ARRAY[NULL]::text[], ARRAY[$5]::bigint[], ARRAY[$6]::uuid[])`,
    [operationId, from, to, amount.toString(), FENCE.toString(), LEASE],
  );
}

describe('credit limits', () => {
  it('a debit may take the balance down to minus the limit, and not one unit below', async () => {
    expect(await transfers(transfer('t1', 'c1', 'p1', 550n))).toEqual(['applied']);
    expect(await transfers(transfer('t2', 'c1', 'p1', 51n))).toEqual(['rejected:insufficient_funds']);
    expect(await transfers(transfer('t3', 'c1', 'p1', 50n))).toEqual(['applied']);
    expect(await balancesOf(db.pg, ['c1', 'p1'])).toEqual({ c1: -500n, p1: 700n });
    // Without a limit, as before: the balance is the floor.
    expect(await transfers(transfer('t4', 'p2', 'p1', 101n), transfer('t5', 'p2', 'p1', 100n))).toEqual([
      'rejected:insufficient_funds',
      'applied',
    ]);
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
  });

  it('two debits that each fit the limit but not together: one batch applies the first only', async () => {
    expect(await transfers(transfer('a', 'c1', 'p1', 400n), transfer('b', 'c1', 'p2', 400n))).toEqual([
      'applied',
      'rejected:insufficient_funds',
    ]);
    expect(await balancesOf(db.pg, ['c1'])).toEqual({ c1: -300n });
  });

  it('two debits that each fit, in two transactions at once: the second waits and is refused', async () => {
    const first = await db.pg.connect();
    const second = await db.pg.connect();
    try {
      await first.query('BEGIN');
      expect((await decideOn(first, 'x1', 'c1', 'p1', 400n)).rows[0]).toEqual({ outcome: 'applied', reason: null });
      const pid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      const late = decideOn(second, 'x2', 'c1', 'p2', 400n);
      await waitUntilBlocked(db.pg, pid, 10_000);
      await first.query('COMMIT');
      expect((await late).rows[0]).toEqual({ outcome: 'rejected', reason: 'insufficient_funds' });
    } finally {
      first.release();
      second.release();
    }
    expect(await balancesOf(db.pg, ['c1', 'p1', 'p2'])).toEqual({ c1: -300n, p1: 500n, p2: 100n });
  });

  it('a hold that takes the last of the limit leaves nothing for a transfer behind it', async () => {
    expect(
      await payments({
        kind: 'hold',
        operationId: 'h1',
        from: 'c1',
        to: 'p1',
        amount: 600n,
        expiresInMs: 60_000,
        fence: FENCE,
      }),
    ).toEqual(['applied']);
    expect(await balancesOf(db.pg, ['c1', '$held:c1'])).toEqual({ c1: -500n, '$held:c1': 600n });
    expect(await transfers(transfer('t1', 'c1', 'p2', 1n))).toEqual(['rejected:insufficient_funds']);
    // Captured in part: the rest comes back, and spends again.
    expect(
      await payments({ kind: 'capture', operationId: 'k1', from: 'c1', ref: 'h1', amount: 450n, fence: FENCE }),
    ).toEqual(['applied']);
    expect(await balancesOf(db.pg, ['c1', '$held:c1'])).toEqual({ c1: -350n, '$held:c1': 0n });
    expect(await transfers(transfer('t2', 'c1', 'p2', 150n), transfer('t3', 'c1', 'p2', 1n))).toEqual([
      'applied',
      'rejected:insufficient_funds',
    ]);
  });

  it('a split and a refund are held to the limit too', async () => {
    expect(
      await payments(
        {
          kind: 'split',
          operationId: 's1',
          from: 'c1',
          legs: [
            { to: 'p1', amount: 300n },
            { to: 'p2', amount: 301n },
          ],
          fence: FENCE,
        },
        {
          kind: 'split',
          operationId: 's2',
          from: 'c1',
          legs: [
            { to: 'p1', amount: 300n },
            { to: 'p2', amount: 300n },
          ],
          fence: FENCE,
        },
      ),
    ).toEqual(['rejected:insufficient_funds', 'applied']);
    expect(await balancesOf(db.pg, ['c1'])).toEqual({ c1: -500n });
    // p1 paid c2 with credit; c2 refunds p1's payment from its own credit, within its limit.
    expect(await transfers(transfer('pay', 'p1', 'c2', 400n))).toEqual(['applied']);
    expect(await transfers(transfer('spend', 'c2', 'p2', 900n))).toEqual(['applied']);
    expect(await balancesOf(db.pg, ['c2'])).toEqual({ c2: -400n });
    expect(
      await payments(
        { kind: 'refund', operationId: 'r1', from: 'c2', ref: 'pay', amount: 101n, fence: FENCE },
        { kind: 'refund', operationId: 'r2', from: 'c2', ref: 'pay', amount: 100n, fence: FENCE },
      ),
    ).toEqual(['rejected:insufficient_funds', 'applied']);
    expect(await balancesOf(db.pg, ['c2'])).toEqual({ c2: -500n });
  });

  it('the table refuses a balance below minus the limit, and a limit out of range', async () => {
    await expect(db.pg.query("UPDATE wallets SET balance = -501 WHERE id = 'c1'")).rejects.toMatchObject({
      code: '23514',
      constraint: 'wallets_balance_within_limit',
    });
    await expect(db.pg.query("UPDATE wallets SET balance = -1 WHERE id = 'p1'")).rejects.toMatchObject({
      constraint: 'wallets_balance_within_limit',
    });
    await expect(
      db.pg.query(`UPDATE wallets SET credit_limit = ${CREDIT_LIMIT_MAX + 1n} WHERE id = 'c1'`),
    ).rejects.toMatchObject({ constraint: 'wallets_credit_limit_range' });
    await expect(db.pg.query("UPDATE wallets SET credit_limit = -1 WHERE id = 'c1'")).rejects.toMatchObject({
      constraint: 'wallets_credit_limit_range',
    });
    await expect(
      seedWallets(db.prisma, {
        wallets: 1,
        balanceMinor: 0n,
        creditLimitMinor: CREDIT_LIMIT_MAX + 1n,
        prefix: 'z',
        currency: 'EUR',
      }),
    ).rejects.toThrow(/--credit-limit must be an integer amount in minor units from 0 to/);
  });
});
