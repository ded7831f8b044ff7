// The negative control `no-credit-limit`: the variant derived from today's decision
// (harness/chaos/unsafe/unsafe-decisions.ts) with the credit limit switched off lets a debit take a
// wallet below minus its limit, through both wrappers (apply_payments_unsafe() and
// apply_transfers_unsafe(), the worker's two calls), once the install has dropped the wallets'
// CHECK as the chaos run's does; reconcile() then names the wallet and the entry. The production
// decision, on the same database, refuses the same debits insufficient_funds, and the variant with
// the switch on is today's decision.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { type ReconcileReport, reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPaymentsUnsafe, decidedAs, type PaymentOp, said, splitOp } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const BELOW_LIMIT = 'no balance below minus its credit limit, no negative held';
const ENTRY_BELOW_LIMIT = "no entry's running balance below minus the credit limit in force then";
const FENCE = 3n;
const LIMIT = 100n;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_nocredit');
  await db.installUnsafeDecisions({ withoutLimitCheck: true });
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  await seedWallets(db.prisma, { wallets: 1, balanceMinor: 0n, creditLimitMinor: LIMIT, prefix: 'c', currency: 'EUR' });
});

const split = (operationId: string, amount: bigint): PaymentOp =>
  splitOp(
    operationId,
    'c1',
    [
      ['w1', amount - 1n],
      ['w2', 1n],
    ],
    FENCE,
  );

function failing(report: ReconcileReport): string[] {
  return report.invariants.filter((i) => i.counterexamples.length > 0).map((i) => i.name);
}

async function transfer(operationId: string, amountMinor: bigint, skipCreditLimit: boolean): Promise<string> {
  const request = { operationId, from: 'c1', to: 'w1', amountMinor, currency: null };
  const [result] = await applyTransfers(db.prisma, [{ request, fence: FENCE, leaseId: leaseIdFor(FENCE) }], {
    skipCreditLimit,
  });
  return result?.outcome === 'rejected' ? `rejected:${result.reason}` : String(result?.outcome);
}

async function balanceOfC1(): Promise<bigint> {
  const { rows } = await db.pg.query<{ balance: string }>(`SELECT balance::text FROM wallets WHERE id = 'c1'`);
  return BigInt(rows[0]?.balance ?? 'NaN');
}

describe('--unsafe no-credit-limit', () => {
  it('the production decision refuses a debit past the limit, and the variant with the switch on too', async () => {
    expect(await decidedAs(db.pg, [split('s1', LIMIT + 1n)])).toEqual(['rejected:insufficient_funds']);
    expect(await transfer('t1', LIMIT + 1n, false)).toBe('rejected:insufficient_funds');
    expect((await applyPaymentsUnsafe(db.pg, [split('s2', LIMIT + 1n)], {})).map(said)).toEqual([
      'rejected:insufficient_funds',
    ]);
    expect(await decidedAs(db.pg, [split('s3', LIMIT)])).toEqual(['applied']);
    expect(await balanceOfC1()).toBe(-LIMIT);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('the variant lets a split and a transfer past the limit, and reconcile() names the wallet and the entries', async () => {
    expect((await applyPaymentsUnsafe(db.pg, [split('s1', LIMIT + 50n)], { creditLimit: false })).map(said)).toEqual([
      'applied',
    ]);
    expect(await transfer('t1', 30n, true)).toBe('applied');
    expect(await balanceOfC1()).toBe(-(LIMIT + 80n));

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([BELOW_LIMIT, ENTRY_BELOW_LIMIT]);
    const named = (name: string) => report.invariants.find((i) => i.name === name)?.counterexamples ?? [];
    expect(named(BELOW_LIMIT)).toEqual([expect.objectContaining({ wallet: 'c1', balance: '-180' })]);
    expect(named(ENTRY_BELOW_LIMIT).map((c) => c.operation_id)).toEqual(['s1', 't1']);
  });

  it('the variant lets a withdrawal past the limit too; the production decision refuses it', async () => {
    const out = (operationId: string, amount: bigint): PaymentOp => ({
      kind: 'withdrawal',
      operationId,
      from: 'c1',
      amount,
      currency: 'EUR',
      ref: `bank:${operationId}`,
      fence: FENCE,
    });
    expect(await decidedAs(db.pg, [out('o1', LIMIT + 1n)])).toEqual(['rejected:insufficient_funds']);
    expect((await applyPaymentsUnsafe(db.pg, [out('o2', LIMIT + 1n)], { creditLimit: false })).map(said)).toEqual([
      'applied',
    ]);
    expect(await balanceOfC1()).toBe(-(LIMIT + 1n));
    expect(failing(await reconcile(db.prisma))).toEqual([BELOW_LIMIT, ENTRY_BELOW_LIMIT]);
  });
});
