// The database decision on its own (no queue, no lock), against a real PostgreSQL.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfer } from '../../src/ledger/apply-transfer.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_apply');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  await seedWallets(db.prisma, { wallets: 1, balanceMinor: 1_000n, prefix: 'usd', currency: 'USD' });
});

const req = (over: Partial<TransferRequest> = {}): TransferRequest => ({
  operationId: 'op',
  from: 'w1',
  to: 'w2',
  amountMinor: 100n,
  currency: null,
  ...over,
});

/** The single-transfer decision under the lease that owns `fence` (one lease per token). */
const apply = (request: TransferRequest, fence: bigint) => applyTransfer(db.prisma, request, fence, leaseIdFor(fence));

async function balance(id: string): Promise<bigint> {
  return BigInt(
    (await db.pg.query<{ balance: string }>('SELECT balance FROM wallets WHERE id = $1', [id])).rows[0]?.balance ??
      '-1',
  );
}

describe('apply_transfer', () => {
  it('applies once and writes a balanced pair of entries carrying the fence', async () => {
    expect(await apply(req(), 7n)).toEqual({ outcome: 'applied', operationId: 'op', fence: '7' });
    const entries = (
      await db.pg.query(
        "SELECT wallet_id, kind, amount, fence FROM ledger_entries WHERE operation_id = 'op' ORDER BY amount",
      )
    ).rows;
    expect(entries).toEqual([
      { wallet_id: 'w1', kind: 'debit', amount: '-100', fence: '7' },
      { wallet_id: 'w2', kind: 'credit', amount: '100', fence: '7' },
    ]);
    expect(await apply(req(), 8n)).toEqual({
      outcome: 'duplicate',
      operationId: 'op',
      stored: { status: 'applied', fence: '7' },
    });
    expect(await balance('w1')).toBe(900n);
  });

  it("refuses a token below the source wallet's last fence and records nothing", async () => {
    await apply(req({ operationId: 'first' }), 10n);
    expect(await apply(req({ operationId: 'late' }), 9n)).toEqual({
      outcome: 'stale_fence',
      operationId: 'late',
      walletFence: 10n,
    });
    expect((await db.pg.query("SELECT 1 FROM transfers WHERE operation_id = 'late'")).rowCount).toBe(0);
    expect(await balance('w1')).toBe(900n);
  });

  it('never fences the credit: a destination that has seen higher tokens of its own still receives', async () => {
    // w2 has debited with token 500 of its own counter; w1's token 3 must still credit it.
    await apply(req({ operationId: 'w2-out', from: 'w2', to: 'w3' }), 500n);
    expect(await apply(req({ operationId: 'w1-out' }), 3n)).toMatchObject({ outcome: 'applied' });
    expect(await balance('w2')).toBe(1_000n);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('records terminal rejections, and a duplicate answers with the stored rejection', async () => {
    expect(await apply(req({ operationId: 'big', amountMinor: 1_001n }), 1n)).toMatchObject({
      outcome: 'rejected',
      reason: 'insufficient_funds',
    });
    expect(await apply(req({ operationId: 'big', amountMinor: 1_001n }), 2n)).toEqual({
      outcome: 'duplicate',
      operationId: 'big',
      stored: { status: 'rejected', reason: 'insufficient_funds', fence: '1' },
    });
    expect(await apply(req({ operationId: 'ghost-to', to: 'nobody' }), 3n)).toMatchObject({
      outcome: 'rejected',
      reason: 'unknown_wallet',
    });
    expect(await apply(req({ operationId: 'ghost-from', from: 'nobody' }), 1n)).toMatchObject({
      outcome: 'rejected',
      reason: 'unknown_wallet',
    });
    expect(await apply(req({ operationId: 'fx', to: 'usd1' }), 4n)).toMatchObject({
      outcome: 'rejected',
      reason: 'currency_mismatch',
    });
    expect(await apply(req({ operationId: 'cur', currency: 'USD' }), 5n)).toMatchObject({
      outcome: 'rejected',
      reason: 'currency_mismatch',
    });
    expect(await apply(req({ operationId: 'eur', currency: 'EUR' }), 6n)).toMatchObject({
      outcome: 'applied',
    });
    expect(await balance('w1')).toBe(900n);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('answers conflict for the same id with another request, and moves nothing', async () => {
    await apply(req(), 1n);
    expect(await apply(req({ amountMinor: 101n }), 2n)).toEqual({
      outcome: 'conflict',
      operationId: 'op',
      stored: { status: 'applied', fence: '1' },
    });
    expect(await balance('w1')).toBe(900n);
  });

  it('opposite transfers in parallel neither deadlock nor lose money (rows locked in id order)', async () => {
    const calls = Array.from({ length: 200 }, (_, i) =>
      i % 2 === 0
        ? apply(req({ operationId: `ab${i}`, amountMinor: 3n }), BigInt(i + 1))
        : apply(req({ operationId: `ba${i}`, from: 'w2', to: 'w1', amountMinor: 3n }), BigInt(i + 1)),
    );
    const results = await Promise.allSettled(calls);
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});
