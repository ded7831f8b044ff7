// One meaning for an outcome event's fields, whatever its kind (issue 41, item 4.7): `from` is
// the wallet whose money the event takes (its balance, or for a capture, a void and an expiry its
// holding account), `to` the wallet the event gives that money to (a hold: the payee it is held
// for), `amountMinor` what moved. One operation of every kind is decided in SQL, as the worker and
// the sweep decide it, and the feed is read against the per-kind table of the wire format
// (docs/reference/wire-format.md#who-is-debited-and-who-is-credited). A hold's expiresAt keeps
// the database's microseconds. Before the decision-edges migration an `expired` event named the hold's
// payee in `to`, a void named nobody, and expiresAt was cut to the millisecond.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { requestTransfer } from '../../src/intake/intake.ts';
import type { OutcomeEvent } from '../../src/intake/outcome-feed.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { settledRead } from '../support/feed.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments, holdsExpire, type PaymentOp, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const AMOUNT_MAX = 1_000_000n;
let db: TestDatabase;
let token = 0n;
const next = () => {
  token += 1n;
  return token;
};

beforeAll(async () => {
  db = await createTestDatabase('ft_feedfields');
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 5, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

async function pay(ops: readonly Omit<PaymentOp, 'fence'>[]): Promise<string[]> {
  return (
    await applyPayments(
      db.pg,
      ops.map((op) => ({ ...op, fence: next() }) as PaymentOp),
    )
  ).map(said);
}

async function transfer(request: TransferRequest): Promise<void> {
  const fence = next();
  await applyTransfers(db.prisma, [{ request, fence, leaseId: leaseIdFor(fence) }]);
}

/** The hold's expiry as PostgreSQL keeps it, to the microsecond, in the form the feed uses. */
async function storedExpiry(holdId: string): Promise<string> {
  const { rows } = await db.pg.query<{ at: string }>(
    `SELECT to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at FROM holds WHERE hold_id = $1`,
    [holdId],
  );
  return rows[0]?.at ?? 'none';
}

const pastExpiry = () => new Promise((r) => setTimeout(r, 20));

/** An event as the per-kind table reads it. */
const row = (e: OutcomeEvent) => [e.operationId, e.kind, e.operation, e.from, e.to, e.amountMinor];

describe('outcome events: one meaning of from, to and amountMinor for every kind', () => {
  it('every kind names the wallet debited, the wallet credited and what moved; expiresAt keeps microseconds', async () => {
    await transfer({ operationId: 't1', from: 'w1', to: 'w2', amountMinor: 10n, currency: null });
    expect(
      await pay([
        { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 50n, expiresInMs: 60_000 },
        { kind: 'hold', operationId: 'h2', from: 'w1', to: 'w3', amount: 40n, expiresInMs: 60_000 },
        {
          kind: 'split',
          operationId: 's1',
          from: 'w1',
          legs: [
            { to: 'w3', amount: 7n },
            { to: 'w4', amount: 3n },
          ],
        },
        { kind: 'hold', operationId: 'h3', from: 'w1', to: 'w5', amount: 20n, expiresInMs: 1 },
        { kind: 'hold', operationId: 'h4', from: 'w1', to: 'w5', amount: 15n, expiresInMs: 2 },
      ]),
    ).toEqual(['applied', 'applied', 'applied', 'applied', 'applied']);
    expect(
      await pay([
        { kind: 'capture', operationId: 'c1', from: 'w1', ref: 'h1', amount: 30n },
        { kind: 'void', operationId: 'v2', from: 'w1', ref: 'h2' },
        { kind: 'void', operationId: 'v-none', from: 'w1', ref: 'no-such-hold' },
      ]),
    ).toEqual(['applied', 'applied', 'rejected:hold_not_found']);
    expect(await pay([{ kind: 'refund', operationId: 'r1', from: 'w2', ref: 'h1', amount: 5n }])).toEqual(['applied']);
    await pastExpiry();
    // h3 released by the sweep; h4 by the capture that comes too late.
    expect(await holdsExpire(db.pg, 1)).toBe(1);
    expect(await pay([{ kind: 'capture', operationId: 'c4', from: 'w1', ref: 'h4' }])).toEqual([
      'rejected:hold_expired',
    ]);
    // A request given up, and one whose operation was decided straight with another amount.
    await requestTransfer(db.pg, { operationId: 'g1', from: 'w1', to: 'w2', amount: '4' }, AMOUNT_MAX);
    const given = { operationId: 'g1', from: 'w1', to: 'w2', amountMinor: 4n, currency: null };
    await db.pg.query("SELECT record_transfer_given_up('g1', $1, 'transient_error: attempts ran out', 0)", [
      requestHash(given),
    ]);
    await requestTransfer(db.pg, { operationId: 'k1', from: 'w1', to: 'w2', amount: '5' }, AMOUNT_MAX);
    await transfer({ operationId: 'k1', from: 'w1', to: 'w2', amountMinor: 6n, currency: null });

    const events = await settledRead(db.pg, 0n);
    // The table of docs/reference/wire-format.md: operation, from (debited), to (credited), amount.
    expect.soft(events.map(row)).toEqual([
      ['t1', 'applied', 'transfer', 'w1', 'w2', 10n],
      ['h1', 'applied', 'hold', 'w1', 'w2', 50n],
      ['h2', 'applied', 'hold', 'w1', 'w3', 40n],
      ['s1', 'applied', 'split', 'w1', null, 10n],
      ['h3', 'applied', 'hold', 'w1', 'w5', 20n],
      ['h4', 'applied', 'hold', 'w1', 'w5', 15n],
      ['c1', 'applied', 'capture', 'w1', 'w2', 30n],
      ['v2', 'applied', 'void', 'w1', 'w1', 40n],
      ['v-none', 'rejected', 'void', 'w1', 'w1', null],
      ['r1', 'applied', 'refund', 'w2', 'w1', 5n],
      ['h3', 'expired', 'hold', 'w1', 'w1', 20n],
      ['c4', 'rejected', 'capture', 'w1', null, null],
      ['h4', 'expired', 'hold', 'w1', 'w1', 15n],
      ['g1', 'given_up', 'transfer', 'w1', 'w2', 4n],
      ['k1', 'applied', 'transfer', 'w1', 'w2', 6n],
      ['k1', 'conflict', 'transfer', 'w1', 'w2', 5n],
    ]);
    const byId = (id: string, kind = 'applied') => events.find((e) => e.operationId === id && e.kind === kind);
    expect(byId('c1')?.detail).toEqual({ released: '20' });
    expect(byId('s1')?.detail).toEqual({
      legs: [
        { to: 'w3', amount: '7' },
        { to: 'w4', amount: '3' },
      ],
    });
    for (const hold of ['h1', 'h2', 'h3', 'h4']) {
      const expiresAt = byId(hold)?.detail?.expiresAt;
      expect(expiresAt, hold).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
      expect(expiresAt, hold).toBe(await storedExpiry(hold));
    }
  });
});
