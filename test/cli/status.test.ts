// `npm run status -- <operationId>` as a user runs it: a plain transfer prints what it always
// did plus kind, original and refunded; a hold prints its state; an unknown id exits 1.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

/** Nothing listens there: the status of one operation must not need Redis. */
const NO_REDIS = 'redis://127.0.0.1:1';

let db: TestDatabase;
const status = (operationId: string) =>
  runSource('src/cli/status.ts', [operationId], { DATABASE_URL: db.url, REDIS_URL: NO_REDIS, LOG_LEVEL: 'silent' });

beforeAll(async () => {
  db = await createTestDatabase('ft_statuscli');
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  await applyTransfers(db.prisma, [
    {
      request: { operationId: 'plain-1', from: 'w1', to: 'w2', amountMinor: 25n, currency: null },
      fence: 1n,
      leaseId: leaseIdFor(1n),
    },
  ]);
  await applyPayments(db.pg, [
    { kind: 'hold', operationId: 'hold-1', from: 'w1', to: 'w3', amount: 40n, expiresInMs: 60_000, fence: 2n },
  ]);
});
afterAll(async () => db.drop());

describe('npm run status -- <operationId>', () => {
  it('a plain transfer: the fields it always printed, then kind, original and refunded', async () => {
    const run = await status('plain-1');
    expect(run.code, describeRun(run)).toBe(0);
    expect(lastJsonLine(run)).toEqual({
      operationId: 'plain-1',
      status: 'applied',
      reason: null,
      from: 'w1',
      to: 'w2',
      amount: '25',
      currency: null,
      fence: '1',
      createdAt: expect.any(String),
      original: null,
      metadata: null,
      kind: 'transfer',
      refunded: '0',
    });
  });

  it('a hold: its kind and its state', async () => {
    const run = await status('hold-1');
    expect(run.code, describeRun(run)).toBe(0);
    expect(lastJsonLine(run)).toMatchObject({
      operationId: 'hold-1',
      kind: 'hold',
      status: 'applied',
      amount: '40',
      original: null,
      hold: { state: 'active', captured: '0', released: '0', endedBy: null, expiresAt: expect.any(String) },
      refunded: '0',
    });
  });

  it('an unknown operation: status unknown, exit 1', async () => {
    const run = await status('nobody-sent-this');
    expect(run.code, describeRun(run)).toBe(1);
    expect(lastJsonLine(run)).toEqual({ operationId: 'nobody-sent-this', status: 'unknown' });
  });
});
