// decideOperations(), what the worker's batcher calls: a batch's transfers go to
// apply_transfers(), its payments to apply_payments(), and the answers come back in the batch's
// order. The operations of one batch came from different jobs at once, so it decides those an
// operation may name first: a capture batched before its own hold, or a refund before the
// transfer it refunds, still finds it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decideOperations } from '../../src/ledger/apply-payments.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { OperationRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
let fence = 0n;
const OPTIONS = { holdExpiryMaxMs: 604_800_000 };

beforeAll(async () => {
  db = await createTestDatabase('ft_decideops');
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});
afterAll(async () => {
  await db.drop();
});

async function batch(...requests: OperationRequest[]): Promise<string[]> {
  fence += 1n;
  const results = await decideOperations(
    db.prisma,
    requests.map((request) => ({ request, fence, leaseId: leaseIdFor(fence) })),
    OPTIONS,
  );
  return results.map(
    (r, i) => `${requests[i]?.operationId}:${r.outcome}${r.outcome === 'rejected' ? `:${r.reason}` : ''}`,
  );
}

describe('decideOperations', () => {
  it('a capture and a void listed before their hold find it; the answers keep the batch order', async () => {
    expect(
      await batch(
        { kind: 'capture', operationId: 'c1', from: 'w1', hold: 'h1', amountMinor: null },
        { kind: 'void', operationId: 'v1', from: 'w1', hold: 'h1' },
        {
          kind: 'hold',
          operationId: 'h1',
          from: 'w1',
          to: 'w2',
          amountMinor: 100n,
          currency: null,
          expiresInMs: 60_000,
          expiresAt: null,
        },
      ),
    ).toEqual(['c1:applied', 'v1:rejected:hold_already_captured', 'h1:applied']);
  });

  it('a refund listed before the transfer it refunds, in the same batch, finds it', async () => {
    expect(
      await batch(
        { kind: 'refund', operationId: 'r1', from: 'w4', original: 't1', amountMinor: 30n },
        { operationId: 't1', from: 'w3', to: 'w4', amountMinor: 50n, currency: null },
        { operationId: 't2', from: 'w3', to: 'w1', amountMinor: 5n, currency: null },
      ),
    ).toEqual(['r1:applied', 't1:applied', 't2:applied']);
    const { rows } = await db.pg.query<{ id: string; balance: string }>(
      "SELECT id, balance::text FROM wallets WHERE id IN ('w3', 'w4') ORDER BY id",
    );
    expect(rows).toEqual([
      { id: 'w3', balance: '975' },
      { id: 'w4', balance: '1020' },
    ]);
  });
});
