// reconcile() on payments: real decisions of every kind through apply_payments() keep every
// invariant, and each payment invariant fails, with the operation as its counterexample, when
// the data is broken on purpose: by apply_payments_unsafe() with a check off, or by a direct
// UPDATE (with the CHECK constraint that would refuse it dropped for the test, where there is one).

import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { type InvariantResult, type ReconcileReport, reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPaymentsUnsafe, decidedAs, holdsExpire, type PaymentOp, said, splitOp } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const NEGATIVE = 'no balance below minus its credit limit, no negative held';
const SHAPE = 'applied transfers have one debit and one credit; others none';
const RECORDED = 'every money movement has an operation record';
const HOLDING = "each wallet's held equals the sum of its active holds";
const ENDED_ONCE = 'every ended hold has captured + released = amount and ended once';
const HOLD_STATE = 'no applied capture of a voided or expired hold, no applied void of a captured one';
const REFUND_BOUND = "no refund total above its original's refundable amount";
const SPLIT_SUM = "every split's legs sum to its debit";
const PAYMENT_INVARIANTS = [HOLDING, ENDED_ONCE, HOLD_STATE, REFUND_BOUND, SPLIT_SUM];

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_payrec');
  await db.installUnsafeDecisions();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

// One token for every decision of a test: each source wallet sees it never decrease.
const FENCE = 7n;
const hold = (operationId: string, from: string, to: string, amount: bigint, expiresInMs = 60_000): PaymentOp => ({
  kind: 'hold',
  operationId,
  from,
  to,
  amount,
  expiresInMs,
  fence: FENCE,
});
const capture = (operationId: string, from: string, ref: string, amount?: bigint): PaymentOp => ({
  kind: 'capture',
  operationId,
  from,
  ref,
  ...(amount === undefined ? {} : { amount }),
  fence: FENCE,
});
const voidOf = (operationId: string, from: string, ref: string): PaymentOp => ({
  kind: 'void',
  operationId,
  from,
  ref,
  fence: FENCE,
});
const refund = (operationId: string, from: string, ref: string, amount?: bigint): PaymentOp => ({
  kind: 'refund',
  operationId,
  from,
  ref,
  ...(amount === undefined ? {} : { amount }),
  fence: FENCE,
});
const split = (operationId: string, from: string, legs: [string, bigint][]): PaymentOp =>
  splitOp(operationId, from, legs, FENCE);

const decide = (...ops: PaymentOp[]): Promise<string[]> => decidedAs(db.pg, ops);

async function transfer(operationId: string, from: string, to: string, amountMinor: bigint): Promise<void> {
  const [result] = await applyTransfers(db.prisma, [
    { request: { operationId, from, to, amountMinor, currency: null }, fence: FENCE, leaseId: leaseIdFor(FENCE) },
  ]);
  expect(result?.outcome).toBe('applied');
}

const failing = (report: ReconcileReport) => report.invariants.filter((i) => !i.ok).map((i) => i.name);
const named = (report: ReconcileReport, name: string): InvariantResult => {
  const found = report.invariants.find((i) => i.name === name);
  if (found === undefined) throw new Error(`no invariant named ${name}`);
  return found;
};

/**
 * Runs `breakIt` with one CHECK constraint dropped (the reconciler is the second line of
 * defence behind it), then empties the tables and puts the constraint back as it was.
 */
async function withoutConstraint(table: string, constraint: string, breakIt: () => Promise<void>): Promise<void> {
  const { rows } = await db.pg.query<{ def: string }>(
    'SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = $1',
    [constraint],
  );
  const def = rows[0]?.def;
  if (def === undefined) throw new Error(`no constraint ${constraint}`);
  await db.pg.query(`ALTER TABLE ${table} DROP CONSTRAINT ${constraint}`);
  try {
    await breakIt();
  } finally {
    await db.truncateAll();
    await db.pg.query(`ALTER TABLE ${table} ADD CONSTRAINT ${constraint} ${def}`);
  }
}

describe('reconcile() on honest payments', () => {
  it('every kind decided for real, refusals included, keeps every invariant', async () => {
    // w1 holds for w2 and w3; the first hold is captured in part, the second voided.
    expect(await decide(hold('h1', 'w1', 'w2', 300n), hold('h2', 'w1', 'w3', 100n))).toEqual(['applied', 'applied']);
    expect(await decide(capture('c1', 'w1', 'h1', 200n), voidOf('v2', 'w1', 'h2'))).toEqual(['applied', 'applied']);
    // A hold that stays active, one the sweep expires, one a capture finds expired.
    expect(
      await decide(hold('h3', 'w1', 'w4', 50n), hold('h4', 'w2', 'w3', 40n, 1_000), hold('h5', 'w3', 'w4', 30n, 1_000)),
    ).toEqual(['applied', 'applied', 'applied']);
    await transfer('t1', 'w3', 'w4', 100n);
    expect(
      await decide(
        refund('r1', 'w4', 't1', 40n),
        refund('r2', 'w2', 'h1'),
        split('s1', 'w4', [
          ['w1', 10n],
          ['w2', 20n],
          ['w3', 30n],
        ]),
      ),
    ).toEqual(['applied', 'applied', 'applied']);
    expect(await decide(refund('r3', 'w2', 's1', 5n), refund('r4', 'w3', 's1'))).toEqual(['applied', 'applied']);
    // Refusals: they record, and move nothing.
    expect(
      await decide(
        capture('c2', 'w1', 'h2'),
        voidOf('v1', 'w1', 'h1'),
        capture('c3', 'w1', 'h3', 51n),
        refund('r5', 'w4', 't1', 61n),
        refund('r6', 'w3', 's1'),
        hold('h6', 'w1', 'w2', 10_000n),
        split('s2', 'w1', [
          ['w2', 500n],
          ['w3', 10_000n],
        ]),
      ),
    ).toEqual([
      'rejected:hold_already_voided',
      'rejected:hold_already_captured',
      'rejected:exceeds_hold_amount',
      'rejected:refund_exceeds_original',
      'rejected:refund_exceeds_original',
      'rejected:insufficient_funds',
      'rejected:insufficient_funds',
    ]);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await decide(capture('c5', 'w3', 'h5'))).toEqual(['rejected:hold_expired']);
    expect(await holdsExpire(db.pg)).toBe(1);

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([]);
    expect(report.invariants.map((i) => i.name)).toEqual(expect.arrayContaining(PAYMENT_INVARIANTS));
    const held = await db.pg.query('SELECT id, held::int FROM wallets WHERE held <> 0 ORDER BY id');
    expect(held.rows).toEqual([{ id: 'w1', held: 50 }]);
    // No wallets row stands for a holding account.
    expect((await db.pg.query("SELECT id FROM wallets WHERE id LIKE '$%'")).rows).toEqual([]);
  });
});

describe('reconcile() on payments broken on purpose', () => {
  it("a double capture (hold state check off) breaks the wallet's held and the hold ended once", async () => {
    // A second active hold keeps the wallet's held covering the second capture, so the
    // CHECK (held >= 0) does not stop it and only the reconciler can see it.
    expect(await decide(hold('h1', 'w1', 'w2', 100n), hold('h2', 'w1', 'w3', 100n))).toEqual(['applied', 'applied']);
    expect(await decide(capture('c1', 'w1', 'h1'))).toEqual(['applied']);
    expect(
      (await applyPaymentsUnsafe(db.pg, [capture('c1-again', 'w1', 'h1')], { holdState: false })).map(said),
    ).toEqual(['applied']);

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([HOLDING, ENDED_ONCE]);
    expect(named(report, HOLDING).counterexamples).toEqual([{ wallet: 'w1', held: '0', active_holds: '100' }]);
    expect(named(report, ENDED_ONCE).counterexamples).toEqual([
      expect.objectContaining({ hold_id: 'h1', state: 'captured', applied_endings: '2', expiry_releases: '0' }),
    ]);
  });

  it('a void of a captured hold (hold state check off) is an applied void of a captured one', async () => {
    await decide(hold('h1', 'w1', 'w2', 100n), hold('h2', 'w1', 'w3', 100n));
    expect(await decide(voidOf('v1', 'w1', 'h1'))).toEqual(['applied']);
    expect((await applyPaymentsUnsafe(db.pg, [capture('c1', 'w1', 'h1')], { holdState: false })).map(said)).toEqual([
      'applied',
    ]);

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([HOLDING, ENDED_ONCE, HOLD_STATE]);
    expect(named(report, HOLD_STATE).counterexamples).toEqual([
      { operation_id: 'v1', kind: 'void', hold: 'h1', state: 'captured' },
    ]);
  });

  it('over-refunds (refund bound off) of a transfer, a captured hold and a split leg are all found', async () => {
    await transfer('t1', 'w1', 'w2', 100n);
    await decide(hold('h1', 'w1', 'w3', 300n));
    await decide(capture('c1', 'w1', 'h1', 200n));
    await decide(
      split('s1', 'w4', [
        ['w2', 10n],
        ['w3', 20n],
      ]),
    );
    expect(await decide(refund('r1', 'w2', 't1', 60n), refund('r2', 'w3', 'h1'), refund('r3', 'w3', 's1'))).toEqual([
      'applied',
      'applied',
      'applied',
    ]);
    const unbounded = await applyPaymentsUnsafe(
      db.pg,
      [refund('r1-more', 'w2', 't1', 60n), refund('r2-more', 'w3', 'h1', 1n), refund('r3-more', 'w3', 's1', 20n)],
      { refundBound: false },
    );
    expect(unbounded.map(said)).toEqual(['applied', 'applied', 'applied']);

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([REFUND_BOUND]);
    expect(named(report, REFUND_BOUND).counterexamples).toEqual([
      { original_id: 'h1', payer: 'w3', refunds: '2', refunded: '201', original_kind: 'hold', refundable: '200' },
      { original_id: 's1', payer: 'w3', refunds: '2', refunded: '40', original_kind: 'split', refundable: '20' },
      { original_id: 't1', payer: 'w2', refunds: '2', refunded: '120', original_kind: 'transfer', refundable: '100' },
    ]);
  });

  it("a split leg changed after the fact no longer sums to the split's debit", async () => {
    await decide(
      split('s1', 'w1', [
        ['w2', 10n],
        ['w3', 20n],
      ]),
    );
    expect(failing(await reconcile(db.prisma))).toEqual([]);
    await db.pg.query("UPDATE split_legs SET amount = amount + 5 WHERE operation_id = 's1' AND leg = 2");

    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([SHAPE, SPLIT_SUM]);
    expect(named(report, SPLIT_SUM).counterexamples).toEqual([
      { operation_id: 's1', amount: '30', legs_sum: '35', legs: '2', debit: '30' },
    ]);
  });

  it("a hold whose amount no longer matches its wallet's held is found", async () => {
    await decide(hold('h1', 'w1', 'w2', 100n));
    await db.pg.query("UPDATE holds SET amount = 101 WHERE hold_id = 'h1'");
    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([HOLDING]);
  });

  it('an applied capture of a hold marked expired breaks the hold state and ended once', async () => {
    await decide(hold('h1', 'w1', 'w2', 100n));
    await decide(capture('c1', 'w1', 'h1'));
    await db.pg.query("UPDATE holds SET state = 'expired', ended_by = NULL WHERE hold_id = 'h1'");
    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([ENDED_ONCE, HOLD_STATE]);
    expect(named(report, HOLD_STATE).counterexamples).toEqual([
      { operation_id: 'c1', kind: 'capture', hold: 'h1', state: 'expired' },
    ]);
  });

  it("an expiry's release of a hold that is not expired has no operation record", async () => {
    await decide(hold('h1', 'w1', 'w2', 100n, 1_000));
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await holdsExpire(db.pg)).toBe(1);
    expect(failing(await reconcile(db.prisma))).toEqual([]);
    await db.pg.query(
      "UPDATE holds SET state = 'active', released = 0, ended_at = NULL, expires_at = now() + interval '1 hour' WHERE hold_id = 'h1'",
    );
    const report = await reconcile(db.prisma);
    expect(failing(report)).toEqual([RECORDED, HOLDING, ENDED_ONCE]);
    expect(named(report, RECORDED).counterexamples.map((c) => c.operation_id)).toEqual(['$expiry:h1', '$expiry:h1']);
  });

  it('an ended hold whose captured + released is not its amount is found behind its CHECK', async () => {
    await decide(hold('h1', 'w1', 'w2', 100n));
    await decide(capture('c1', 'w1', 'h1', 60n));
    await withoutConstraint('holds', 'holds_ended_once', async () => {
      await db.pg.query("UPDATE holds SET released = released + 1 WHERE hold_id = 'h1'");
      const report = await reconcile(db.prisma);
      expect(failing(report)).toEqual([ENDED_ONCE]);
      expect(named(report, ENDED_ONCE).counterexamples).toEqual([
        expect.objectContaining({ hold_id: 'h1', amount: '100', captured: '60', released: '41' }),
      ]);
    });
  });

  it('a held amount below zero is a negative balance, behind its CHECK', async () => {
    await decide(hold('h1', 'w1', 'w2', 100n));
    await withoutConstraint('wallets', 'wallets_held_non_negative', async () => {
      await db.pg.query("UPDATE wallets SET held = -1 WHERE id = 'w1'");
      const report = await reconcile(db.prisma);
      expect(failing(report)).toContain(NEGATIVE);
      expect(named(report, NEGATIVE).counterexamples).toEqual([
        { wallet: 'w1', balance: '900', credit_limit: '0', held: '-1' },
      ]);
      // And the held amount is no longer what its holding account's entries sum to.
      expect(named(report, 'every wallet balance equals the sum of its entries').counterexamples).toEqual([
        { wallet: 'w1', balance: '900', entries_sum: '900', held: '-1', held_entries_sum: '100' },
      ]);
    });
  });
});

describe('reconcile() on a busy pool', () => {
  it('waits its turn for a connection longer than Prisma would by default (2 s)', async () => {
    // One connection, held 3 s by another query: reconcile's transaction can only start after.
    const prisma = createPrisma({ ...db.config, dbPoolMax: 1 });
    try {
      // A PrismaPromise runs once awaited: Promise.resolve starts it now.
      const busy = Promise.resolve(prisma.$queryRaw`SELECT pg_sleep(3)::text AS slept`);
      await vi.waitFor(
        async () => {
          const { rows } = await db.pg.query(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep(3)%'",
          );
          expect(rows).toHaveLength(1);
        },
        { timeout: 10_000, interval: 50 },
      );
      const report = await reconcile(prisma);
      await busy;
      expect(report.ok).toBe(true);
    } finally {
      await closePrisma(prisma);
    }
  });
});
