// The negative control `no-wallet-status`: the variant derived from today's decision
// (harness/chaos/unsafe/unsafe-decisions.ts) with the wallets' statuses switched off lets a frozen
// wallet be debited and a closed one credited, through both wrappers (apply_payments_unsafe() and
// apply_transfers_unsafe(), the worker's two calls), once the install has dropped the closed
// wallets' CHECK as the chaos run's does. The production decision, on the same database, refuses
// the same postings, and the variant with the switch on is today's decision.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPaymentsUnsafe, decidedAs, type PaymentOp, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 3n;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_nostatus');
  await db.installUnsafeDecisions({ withoutClosedCheck: true });
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

const freeze = (operationId: string, wallet: string): PaymentOp => ({
  kind: 'freeze_wallet',
  operationId,
  from: wallet,
  ref: 'refused',
  fence: FENCE,
});
const withdrawal = (operationId: string, from: string, amount: bigint): PaymentOp => ({
  kind: 'withdrawal',
  operationId,
  from,
  amount,
  currency: 'EUR',
  ref: `bank-${operationId}`,
  fence: FENCE,
});
const close = (operationId: string, wallet: string): PaymentOp => ({
  kind: 'close_wallet',
  operationId,
  from: wallet,
  fence: FENCE,
});

async function transfer(operationId: string, from: string, to: string, skipWalletStatus: boolean): Promise<string> {
  const request = { operationId, from, to, amountMinor: 10n, currency: null };
  const [result] = await applyTransfers(db.prisma, [{ request, fence: FENCE, leaseId: leaseIdFor(FENCE) }], {
    skipWalletStatus,
  });
  return result?.outcome === 'rejected' ? `rejected:${result.reason}` : String(result?.outcome);
}

async function balanceOf(wallet: string): Promise<bigint> {
  const { rows } = await db.pg.query<{ balance: string }>('SELECT balance::text FROM wallets WHERE id = $1', [wallet]);
  return BigInt(rows[0]?.balance ?? 'NaN');
}

describe('--unsafe no-wallet-status', () => {
  it('the production decision refuses a frozen wallet its debits, and the variant with the switch on too', async () => {
    expect(await decidedAs(db.pg, [freeze('f1', 'w1')])).toEqual(['applied']);
    expect(await decidedAs(db.pg, [withdrawal('d1', 'w1', 10n)])).toEqual(['rejected:wallet_frozen']);
    expect(await transfer('t1', 'w1', 'w2', false)).toBe('rejected:wallet_frozen');
    expect((await applyPaymentsUnsafe(db.pg, [withdrawal('d2', 'w1', 10n)], {})).map(said)).toEqual([
      'rejected:wallet_frozen',
    ]);
    expect(await balanceOf('w1')).toBe(1_000n);
  });

  it('the variant debits a frozen wallet and credits a closed one', async () => {
    expect(await decidedAs(db.pg, [freeze('f1', 'w1')])).toEqual(['applied']);
    const off = { walletStatus: false };
    expect((await applyPaymentsUnsafe(db.pg, [withdrawal('d1', 'w1', 10n)], off)).map(said)).toEqual(['applied']);
    expect(await transfer('t1', 'w1', 'w2', true)).toBe('applied');
    expect(await balanceOf('w1')).toBe(980n);
    // w2 emptied and closed, then credited: the dropped CHECK no longer stops it.
    expect(await decidedAs(db.pg, [withdrawal('d2', 'w2', 1_010n), close('c1', 'w2')])).toEqual(['applied', 'applied']);
    expect(await transfer('t2', 'w1', 'w2', true)).toBe('applied');
    expect(await balanceOf('w2')).toBe(10n);
  });
});
