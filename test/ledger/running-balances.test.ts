// Running balances: every entry every writer appends (the batch decision of every kind, the
// single decision, the expiry sweep, the seed) carries its account's balance after it, equal to
// the sum of the account's entries up to it in id order, and a wallet's entries ascend in
// (created_at, id) as they do in id, so a balance at an instant is the last entry before it.
// reconcile() finds an entry whose running balance is off (written behind the append-only trigger).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfer, applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments, holdsExpire, said } from '../support/payments.ts';
import { entriesWithRunningSums } from '../support/running-sums.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const RUNNING = "every entry's running balance equals the sum of its account's entries up to it";
const FENCE = 7n;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_running');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

/** The last running balance of each account, beside the wallet row's figure it must equal. */
async function lastAgainstWallets(): Promise<{ account: string; last: string; wallet: string }[]> {
  const { rows } = await db.pg.query<{ account: string; last: string; wallet: string }>(`
    SELECT DISTINCT ON (e.wallet_id) e.wallet_id AS account, e.balance_after::text AS last,
           (CASE WHEN starts_with(e.wallet_id, '$held:') THEN w.held ELSE w.balance END)::text AS wallet
      FROM ledger_entries e
      JOIN wallets w ON w.id = CASE WHEN starts_with(e.wallet_id, '$held:') THEN substr(e.wallet_id, 7) ELSE e.wallet_id END
     ORDER BY e.wallet_id, e.id DESC`);
  return rows;
}

async function transfer(operationId: string, from: string, to: string, amountMinor: bigint): Promise<void> {
  const [result] = await applyTransfers(db.prisma, [
    { request: { operationId, from, to, amountMinor, currency: null }, fence: FENCE, leaseId: leaseIdFor(FENCE) },
  ]);
  expect(result?.outcome).toBe('applied');
}

describe('running balances', () => {
  it('every writer appends entries whose balance after is the running sum, ascending in time', async () => {
    await transfer('t1', 'w1', 'w2', 100n);
    // One batch touching w1 three times: each entry sees the ones before it in the batch.
    const [a, b] = await applyTransfers(db.prisma, [
      {
        request: { operationId: 't2', from: 'w1', to: 'w3', amountMinor: 10n, currency: null },
        fence: FENCE,
        leaseId: leaseIdFor(FENCE),
      },
      {
        request: { operationId: 't3', from: 'w1', to: 'w2', amountMinor: 20n, currency: null },
        fence: FENCE,
        leaseId: leaseIdFor(FENCE),
      },
    ]);
    expect([a?.outcome, b?.outcome]).toEqual(['applied', 'applied']);
    const single = await applyTransfer(
      db.prisma,
      { operationId: 't4', from: 'w2', to: 'w1', amountMinor: 5n, currency: null },
      FENCE,
      leaseIdFor(FENCE),
    );
    expect(single.outcome).toBe('applied');
    const decided = await applyPayments(db.pg, [
      { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 300n, expiresInMs: 60_000, fence: FENCE },
      { kind: 'capture', operationId: 'c1', from: 'w1', ref: 'h1', amount: 120n, fence: FENCE },
      { kind: 'refund', operationId: 'r1', from: 'w2', ref: 'c1x', amount: 1n, fence: FENCE },
      { kind: 'refund', operationId: 'r2', from: 'w2', ref: 't1', amount: 40n, fence: FENCE },
      {
        kind: 'split',
        operationId: 's1',
        from: 'w3',
        legs: [
          { to: 'w1', amount: 3n },
          { to: 'w4', amount: 4n },
        ],
        fence: FENCE,
      },
      // Two holds of one wallet that the sweep releases in one statement.
      { kind: 'hold', operationId: 'h2', from: 'w4', to: 'w1', amount: 30n, expiresInMs: 1, fence: FENCE },
      { kind: 'hold', operationId: 'h3', from: 'w4', to: 'w2', amount: 50n, expiresInMs: 1, fence: FENCE },
      { kind: 'hold', operationId: 'h4', from: 'w4', to: 'w3', amount: 70n, expiresInMs: 600_000, fence: FENCE },
    ]);
    expect(decided.map(said)).toEqual([
      'applied',
      'applied',
      'rejected:original_not_found',
      'applied',
      'applied',
      'applied',
      'applied',
      'applied',
    ]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await holdsExpire(db.pg)).toBe(2);
    await seedWallets(db.prisma, { wallets: 2, balanceMinor: 500n, prefix: 'x', currency: 'EUR' });

    const all = await entriesWithRunningSums(db.pg);
    expect(all.length).toBeGreaterThan(30);
    expect(all.filter((e) => e.balance_after !== e.running)).toEqual([]);
    expect(all.filter((e) => !e.ascending)).toEqual([]);
    const accounts = new Set(all.map((e) => e.wallet_id));
    for (const account of ['w1', '$held:w1', 'w4', '$held:w4', '$funding:EUR']) expect(accounts).toContain(account);
    const last = await lastAgainstWallets();
    expect(last.length).toBe(8);
    expect(last.filter((r) => r.last !== r.wallet)).toEqual([]);
    // The funding account's running balance spans both seeds: minus all the money they made.
    const funding = all.filter((e) => e.wallet_id === '$funding:EUR').at(-1);
    expect(funding?.balance_after).toBe('-5000');
    const report = await reconcile(db.prisma);
    expect(report.invariants.find((i) => i.name === RUNNING)?.ok).toBe(true);
    expect(report.ok).toBe(true);
  });

  it('two seeds of one currency at once post the funding account one after the other', async () => {
    await Promise.all(
      ['p', 'q', 'r'].map((prefix) =>
        seedWallets(db.prisma, { wallets: 200, balanceMinor: 10n, prefix, currency: 'EUR' }),
      ),
    );
    const all = await entriesWithRunningSums(db.pg);
    expect(all.filter((e) => e.balance_after !== e.running)).toEqual([]);
    expect(all.filter((e) => e.wallet_id === '$funding:EUR').at(-1)?.balance_after).toBe('-10000');
  });

  it('reconcile() names an entry whose running balance is off', async () => {
    await transfer('t1', 'w1', 'w2', 100n);
    const client = await db.pg.connect();
    try {
      await client.query('BEGIN');
      await client.query('ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_no_update_delete');
      await client.query(
        "UPDATE ledger_entries SET balance_after = balance_after + 1 WHERE operation_id = 't1' AND wallet_id = 'w2'",
      );
      await client.query('ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_no_update_delete');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok).map((i) => i.name)).toEqual([RUNNING]);
    expect(report.invariants.find((i) => i.name === RUNNING)?.counterexamples).toEqual([
      expect.objectContaining({
        account: 'w2',
        operation_id: 't1',
        amount: '100',
        balance_after: '1101',
        entries_sum: '1100',
      }),
    ]);
  });
});
