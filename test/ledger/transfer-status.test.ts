// readOperation() on records of every kind, decided for real: a transfer keeps the fields it
// always had (and gains kind, original and refunded); a hold shows its state and what was
// refunded of its capture; a split its legs, each with its refunds; a capture, a void and a
// refund what they refer to.

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { readOperation } from '../../src/ledger/transfer-status.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments, type PaymentOp, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 3n;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_status');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

async function decide(...ops: Omit<PaymentOp, 'fence'>[]): Promise<string[]> {
  return (
    await applyPayments(
      db.pg,
      ops.map((op) => ({ ...op, fence: FENCE })),
    )
  ).map(said);
}

describe('readOperation', () => {
  it('a transfer keeps every field it had, and says what was refunded of it', async () => {
    await applyTransfers(db.prisma, [
      {
        request: { operationId: 't1', from: 'w1', to: 'w2', amountMinor: 100n, currency: 'EUR' },
        fence: FENCE,
        leaseId: leaseIdFor(FENCE),
      },
    ]);
    expect(await decide({ kind: 'refund', operationId: 'r1', from: 'w2', ref: 't1', amount: 30n })).toEqual([
      'applied',
    ]);
    const record = await readOperation(db.prisma, 't1');
    expect(record).toEqual({
      operationId: 't1',
      status: 'applied',
      reason: null,
      from: 'w1',
      to: 'w2',
      amount: '100',
      currency: 'EUR',
      fence: '3',
      createdAt: expect.stringMatching(ISO),
      original: null,
      metadata: null,
      kind: 'transfer',
      refunded: '30',
    });
    // The fields a reader of the old output named come first, in their old order.
    expect(Object.keys(record ?? {}).slice(0, 9)).toEqual([
      'operationId',
      'status',
      'reason',
      'from',
      'to',
      'amount',
      'currency',
      'fence',
      'createdAt',
    ]);
    expect(await readOperation(db.prisma, 'r1')).toMatchObject({
      kind: 'refund',
      original: 't1',
      from: 'w2',
      to: 'w1',
      amount: '30',
      status: 'applied',
    });
  });

  it('a hold: active, then captured in part and refunded in part; its capture names it', async () => {
    expect(
      await decide({ kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 100n, expiresInMs: 60_000 }),
    ).toEqual(['applied']);
    expect(await readOperation(db.prisma, 'h1')).toMatchObject({
      kind: 'hold',
      status: 'applied',
      from: 'w1',
      to: 'w2',
      amount: '100',
      original: null,
      hold: { state: 'active', captured: '0', released: '0', endedBy: null, endedAt: null },
      refunded: '0',
    });
    expect(
      await decide(
        { kind: 'capture', operationId: 'c1', from: 'w1', ref: 'h1', amount: 70n },
        { kind: 'refund', operationId: 'r1', from: 'w2', ref: 'h1', amount: 20n },
      ),
    ).toEqual(['applied', 'applied']);
    const hold = await readOperation(db.prisma, 'h1');
    expect(hold).toMatchObject({
      kind: 'hold',
      hold: { state: 'captured', captured: '70', released: '30', endedBy: 'c1', endedAt: expect.stringMatching(ISO) },
      refunded: '20',
    });
    if (hold?.kind !== 'hold' || hold.hold === null) throw new Error('no hold state');
    const heldMs = Date.parse(hold.hold.expiresAt) - Date.parse(hold.createdAt);
    expect(heldMs).toBeGreaterThan(59_000);
    expect(heldMs).toBeLessThan(61_000);
    expect(await readOperation(db.prisma, 'c1')).toMatchObject({
      kind: 'capture',
      original: 'h1',
      from: 'w1',
      to: 'w2',
      amount: '70',
    });
  });

  it('a rejected hold has no hold state; a void of it is rejected with no amount, crediting its from', async () => {
    expect(
      await decide(
        { kind: 'hold', operationId: 'h-big', from: 'w1', to: 'w2', amount: 5_000n, expiresInMs: 60_000 },
        { kind: 'void', operationId: 'v1', from: 'w1', ref: 'h-big' },
      ),
    ).toEqual(['rejected:insufficient_funds', 'rejected:hold_rejected']);
    expect(await readOperation(db.prisma, 'h-big')).toMatchObject({
      kind: 'hold',
      status: 'rejected',
      reason: 'insufficient_funds',
      hold: null,
      refunded: '0',
    });
    expect(await readOperation(db.prisma, 'v1')).toMatchObject({
      kind: 'void',
      status: 'rejected',
      reason: 'hold_rejected',
      original: 'h-big',
      to: 'w1',
      amount: null,
    });
  });

  it('a split shows its legs in order, each with what its payee refunded', async () => {
    const legs = [
      { to: 'w3', amount: 30n },
      { to: 'w2', amount: 20n },
    ];
    expect(await decide({ kind: 'split', operationId: 's1', from: 'w1', legs })).toEqual(['applied']);
    expect(await decide({ kind: 'refund', operationId: 'r1', from: 'w2', ref: 's1', amount: 5n })).toEqual(['applied']);
    expect(await readOperation(db.prisma, 's1')).toMatchObject({
      kind: 'split',
      from: 'w1',
      to: null,
      amount: '50',
      legs: [
        { leg: 1, to: 'w3', amount: '30', refunded: '0' },
        { leg: 2, to: 'w2', amount: '20', refunded: '5' },
      ],
      refunded: '5',
    });
  });

  it('a wallet operation shows its wallet as it is now; a refused opening of a new id has none', async () => {
    expect(
      await decide(
        { kind: 'open_wallet', operationId: 'o1', from: 'n1', currency: 'EUR', amount: 40n },
        { kind: 'freeze_wallet', operationId: 'f1', from: 'n1', ref: 'refused' },
        { kind: 'close_wallet', operationId: 'c1', from: 'nobody' },
      ),
    ).toEqual(['applied', 'applied', 'rejected:unknown_wallet']);
    expect(await readOperation(db.prisma, 'o1')).toMatchObject({
      kind: 'open_wallet',
      status: 'applied',
      from: 'n1',
      to: null,
      amount: null,
      currency: 'EUR',
      wallet: { status: 'frozen', balance: '0', held: '0', creditLimit: '40' },
    });
    expect(await readOperation(db.prisma, 'c1')).toMatchObject({
      kind: 'close_wallet',
      status: 'rejected',
      reason: 'unknown_wallet',
      wallet: null,
    });
  });

  it('an unknown operation is null', async () => {
    expect(await readOperation(db.prisma, 'never-sent')).toBeNull();
  });
});
