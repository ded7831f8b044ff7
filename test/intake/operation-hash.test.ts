// The intake hashes a payment's body in SQL (request_operation()), the worker in TypeScript
// (requestHash()): the two must agree for every kind, or a request decided through its own job
// would look decided with another body (a spurious conflict event, a give-up refused).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestOperation } from '../../src/intake/intake.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { type OperationWire, validateOperationRequest } from '../../src/ledger/transfer-request.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_ophash');
});
afterAll(async () => {
  await db.drop();
});

const BODIES: OperationWire[] = [
  { operationId: 'x-t', from: 'a', to: 'b', amount: '007', currency: 'EUR' },
  { kind: 'transfer', operationId: 'x-tk', from: 'a', to: 'b', amount: '5' },
  { operationId: 'x-tm', from: 'a', to: 'b', amount: '05', metadata: { order: '8812', note: 'a b' } },
  { kind: 'hold', operationId: 'x-h1', from: 'a', to: 'b', amount: '10', expiresInMs: 60_000 },
  {
    kind: 'hold',
    operationId: 'x-h2',
    from: 'a',
    to: 'b',
    amount: '10',
    currency: 'EUR',
    expiresAt: '2099-01-01T00:00:00.5Z',
  },
  { kind: 'capture', operationId: 'x-c1', from: 'a', hold: 'x-h1' },
  { kind: 'capture', operationId: 'x-c2', from: 'a', hold: 'x-h1', amount: '0010' },
  { kind: 'void', operationId: 'x-v', from: 'a', hold: 'x-h1' },
  { kind: 'refund', operationId: 'x-r1', from: 'b', original: 'x-t' },
  { kind: 'refund', operationId: 'x-r2', from: 'b', original: 'x-t', amount: '3' },
  {
    kind: 'split',
    operationId: 'x-s',
    from: 'a',
    currency: 'EUR',
    legs: [
      { to: 'b', amount: '097' },
      { to: 'c:1', amount: '3' },
    ],
  },
  { kind: 'credit_limit', operationId: 'x-l1', from: 'a', limit: '0' },
  { kind: 'credit_limit', operationId: 'x-l2', from: 'a', limit: '000250' },
  { kind: 'deposit', operationId: 'x-d', to: 'a', amount: '0042', currency: 'EUR', reference: 'ch_1:"x"/2' },
  { kind: 'withdrawal', operationId: 'x-w', from: 'a', amount: '7', currency: 'USD', reference: 'SEPA~88' },
  { kind: 'open_wallet', operationId: 'x-o1', wallet: 'n', currency: 'EUR' },
  { kind: 'open_wallet', operationId: 'x-o2', wallet: 'n', currency: 'EUR', creditLimit: '0030' },
  { kind: 'freeze_wallet', operationId: 'x-f1', wallet: 'a' },
  { kind: 'freeze_wallet', operationId: 'x-f2', wallet: 'a', credits: 'refused' },
  { kind: 'unfreeze_wallet', operationId: 'x-u', wallet: 'a' },
  { kind: 'close_wallet', operationId: 'x-c', wallet: 'a' },
  {
    kind: 'hold',
    operationId: 'x-hm',
    from: 'a',
    to: 'b',
    amount: '5',
    expiresInMs: 60_000,
    metadata: { z: '1', a: 'é=☕' },
  },
  { kind: 'void', operationId: 'x-vm', from: 'a', hold: 'x-hm', metadata: {} },
];

describe('request_operation() and requestHash()', () => {
  it.each(BODIES.map((b) => [b.operationId, b] as const))('agree on %s', async (_, body) => {
    const verdict = validateOperationRequest(body, 10n ** 18n, 604_800_000);
    if (!verdict.ok) throw new Error(verdict.reason);
    expect(await requestOperation(db.pg, body, 10n ** 18n, 604_800_000)).toBe('requested');
    const { rows } = await db.pg.query<{ request_hash: string }>(
      'SELECT request_hash::text FROM transfer_requests WHERE operation_id = $1',
      [body.operationId],
    );
    expect(rows[0]?.request_hash).toBe(requestHash(verdict.request));
  });
});
