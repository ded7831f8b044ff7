// The payment decisions racing each other at the SQL level, on real concurrent connections:
// each race has exactly one winner, the loser's reason is the one the rule names, and the
// balances are exact. Where a race matters, the second transaction is shown to wait for the
// first (pg_stat_activity: waiting on a lock) before the first commits, so the order is the one
// asserted, not a lucky one; the same pair is also sent at once, many times. Each safety rule
// that apply_payments_unsafe() can switch off has a negative control showing that, off, the bad
// thing does happen: the test of the safe function cannot pass because the race never ran.

import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import {
  applyPayments,
  applyPaymentsUnsafe,
  balancesOf,
  entriesOf,
  holdOf,
  holdsExpire,
  type PaymentAnswer,
  type PaymentOp,
  type Sql,
  said,
} from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const BLOCKED_WAIT_MS = 5_000;
/** Rounds of the capture-against-expiry race, and how many run side by side. */
const EXPIRY_ROUNDS = 20;
const EXPIRY_LANES = 4;

let db: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('ft_payrace');
  await db.installUnsafeDecisions();
  pool = new pg.Pool({ connectionString: db.url, max: 2 * EXPIRY_LANES + 4 });
  pool.on('error', () => undefined);
});
afterAll(async () => {
  // Set-up may have failed part way: the database is dropped whatever came after it.
  await pool?.end();
  await db?.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

let token = 0n;
/** A fresh token: every source wallet sees its tokens increase. */
const next = () => {
  token += 1n;
  return token;
};
const hold = (operationId: string, amount: bigint, fence = next(), expiresInMs = 60_000, from = 'w1', to = 'w2') =>
  ({ kind: 'hold', operationId, from, to, amount, expiresInMs, fence }) satisfies PaymentOp;
const capture = (operationId: string, ref: string, fence = next(), amount?: bigint, from = 'w1'): PaymentOp => ({
  kind: 'capture',
  operationId,
  from,
  ref,
  fence,
  ...(amount === undefined ? {} : { amount }),
});
const voidOf = (operationId: string, ref: string, fence = next(), from = 'w1'): PaymentOp => ({
  kind: 'void',
  operationId,
  from,
  ref,
  fence,
});
const refund = (operationId: string, ref: string, fence = next(), amount?: bigint, from = 'w2'): PaymentOp => ({
  kind: 'refund',
  operationId,
  from,
  ref,
  fence,
  ...(amount === undefined ? {} : { amount }),
});

async function decide(...ops: PaymentOp[]): Promise<string[]> {
  return (await applyPayments(pool, ops)).map(said);
}
const one = async (call: Promise<PaymentAnswer[]>): Promise<string> => said((await call)[0]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

async function transfer(operationId: string, from: string, to: string, amountMinor: bigint, fence = next()) {
  const [result] = await applyTransfers(db.prisma, [
    { request: { operationId, from, to, amountMinor, currency: null }, fence, leaseId: leaseIdFor(fence) },
  ]);
  return result?.outcome === 'rejected' ? `rejected:${result.reason}` : result?.outcome;
}

/**
 * Two transactions on two connections: the first decides and keeps its locks; the second is
 * sent and seen waiting on a lock; then the first commits, and the second decides on what the
 * first left. Both answers, in that order.
 */
async function secondWaitsForFirst<T>(first: (c: Sql) => Promise<T>, second: (c: Sql) => Promise<T>): Promise<[T, T]> {
  const a = await pool.connect();
  const b = await pool.connect();
  try {
    const pid = (await b.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
    await a.query('BEGIN');
    await b.query('BEGIN');
    const firstAnswer = await first(a);
    const pending = second(b);
    // Until it is awaited below, a failure of the second must not count as unhandled.
    pending.catch(() => undefined);
    await waitUntilBlocked(db.pg, pid, BLOCKED_WAIT_MS);
    await a.query('COMMIT');
    const secondAnswer = await pending;
    await b.query('COMMIT');
    return [firstAnswer, secondAnswer];
  } catch (err) {
    await a.query('ROLLBACK').catch(() => undefined);
    await b.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    a.release();
    b.release();
  }
}

describe('(a) a capture and a void of one hold', () => {
  it('the void waiting for the capture finds it captured; the capture waiting for the void finds it voided', async () => {
    await decide(hold('h1', 100n), hold('h2', 100n));
    const fence = next();
    expect(
      await secondWaitsForFirst(
        (c) => one(applyPayments(c, [capture('c1', 'h1', fence, 70n)])),
        (c) => one(applyPayments(c, [voidOf('v1', 'h1', fence)])),
      ),
    ).toEqual(['applied', 'rejected:hold_already_captured']);
    expect(
      await secondWaitsForFirst(
        (c) => one(applyPayments(c, [voidOf('v2', 'h2', fence)])),
        (c) => one(applyPayments(c, [capture('c2', 'h2', fence)])),
      ),
    ).toEqual(['applied', 'rejected:hold_already_voided']);
    // w1 paid 70 of h1 and got 30 back; h2 came back whole.
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 930n, w2: 1_070n, '$held:w1': 0n });
    expect(await holdOf(pool, 'h1')).toMatchObject({
      state: 'captured',
      captured: '70',
      released: '30',
      ended_by: 'c1',
    });
    expect(await holdOf(pool, 'h2')).toMatchObject({ state: 'voided', captured: '0', released: '100', ended_by: 'v2' });
    expect(await entriesOf(pool, 'v1')).toBe(0);
    expect(await entriesOf(pool, 'c2')).toBe(0);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('sent at once, many times: exactly one of the two applies, the other names why', async () => {
    const rounds = 12;
    await decide(...Array.from({ length: rounds }, (_, i) => hold(`h${i}`, 10n)));
    let captured = 0n;
    for (let i = 0; i < rounds; i += 1) {
      const fence = next();
      const ops = [capture(`c${i}`, `h${i}`, fence), voidOf(`v${i}`, `h${i}`, fence)];
      // Alternate who is sent first, so neither always wins by being first on the wire.
      const order = i % 2 === 0 ? ops : [...ops].reverse();
      const answers = await Promise.all(order.map((op) => one(applyPayments(pool, [op]))));
      const [c, v] = i % 2 === 0 ? answers : [...answers].reverse();
      expect([c, v]).toContainEqual('applied');
      if (c === 'applied') {
        expect(v).toBe('rejected:hold_already_captured');
        captured += 10n;
      } else {
        expect([c, v]).toEqual(['rejected:hold_already_voided', 'applied']);
      }
    }
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({
      w1: 1_000n - captured,
      w2: 1_000n + captured,
      '$held:w1': 0n,
    });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('negative control: with the hold state check off, the capture and the void both apply', async () => {
    // h2 keeps the holding wallet covering the second ending, so only the state check could stop it.
    await decide(hold('h1', 100n), hold('h2', 100n));
    const fence = next();
    expect(
      await secondWaitsForFirst(
        (c) => one(applyPaymentsUnsafe(c, [capture('c1', 'h1', fence)], { holdState: false })),
        (c) => one(applyPaymentsUnsafe(c, [voidOf('v1', 'h1', fence)], { holdState: false })),
      ),
    ).toEqual(['applied', 'applied']);
    // 100 held, 200 let out: w2 got the capture and w1 the void, of one hold.
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 900n, w2: 1_100n, '$held:w1': 0n });
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok).map((i) => i.name)).toEqual([
      "each wallet's held equals the sum of its active holds",
      'every ended hold has captured + released = amount and ended once',
      'no applied capture of a voided or expired hold, no applied void of a captured one',
    ]);
  });
});

describe('(b) a capture above its hold', () => {
  it('is exceeds_hold_amount and moves nothing; the hold stays whole and capturable', async () => {
    await decide(hold('h1', 100n));
    expect(await decide(capture('c-over', 'h1', next(), 101n))).toEqual(['rejected:exceeds_hold_amount']);
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 900n, w2: 1_000n, '$held:w1': 100n });
    expect(await holdOf(pool, 'h1')).toMatchObject({ state: 'active', captured: '0', released: '0' });
    expect(await entriesOf(pool, 'c-over')).toBe(0);
    expect(await decide(capture('c-all', 'h1', next(), 100n))).toEqual(['applied']);
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 900n, w2: 1_100n, '$held:w1': 0n });
  });
});

describe('(c) refunds of one original', () => {
  it('two that together exceed it, the second waiting for the first: one applies, one is refund_exceeds_original', async () => {
    expect(await transfer('t1', 'w1', 'w2', 100n)).toBe('applied');
    const fence = next();
    expect(
      await secondWaitsForFirst(
        (c) => one(applyPayments(c, [refund('r1', 't1', fence, 60n)])),
        (c) => one(applyPayments(c, [refund('r2', 't1', fence, 60n)])),
      ),
    ).toEqual(['applied', 'rejected:refund_exceeds_original']);
    // Amount absent: what is left, then nothing is left.
    expect(await decide(refund('r3', 't1'))).toEqual(['applied']);
    expect(await decide(refund('r4', 't1'))).toEqual(['rejected:refund_exceeds_original']);
    const { rows } = await pool.query(
      "SELECT operation_id, amount::int FROM transfers WHERE kind = 'refund' ORDER BY 1",
    );
    expect(rows).toEqual([
      { operation_id: 'r1', amount: 60 },
      { operation_id: 'r2', amount: 60 },
      { operation_id: 'r3', amount: 40 },
      { operation_id: 'r4', amount: null },
    ]);
    expect(await balancesOf(pool, ['w1', 'w2'])).toEqual({ w1: 1_000n, w2: 1_000n });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('sent at once, many times: never more refunded than the original', async () => {
    const rounds = 10;
    for (let i = 0; i < rounds; i += 1) expect(await transfer(`t${i}`, 'w1', 'w2', 100n)).toBe('applied');
    for (let i = 0; i < rounds; i += 1) {
      const fence = next();
      const answers = await Promise.all([
        one(applyPayments(pool, [refund(`ra${i}`, `t${i}`, fence, 70n)])),
        one(applyPayments(pool, [refund(`rb${i}`, `t${i}`, fence, 50n)])),
      ]);
      expect(answers.filter((a) => a === 'applied')).toHaveLength(1);
      expect(answers.filter((a) => a === 'rejected:refund_exceeds_original')).toHaveLength(1);
    }
    const { rows } = await pool.query<{ refunded: string }>(
      "SELECT coalesce(sum(amount), 0)::text AS refunded FROM transfers WHERE kind = 'refund' AND status = 'applied'",
    );
    const refunded = BigInt(rows[0]?.refunded ?? '-1');
    expect(await balancesOf(pool, ['w1', 'w2'])).toEqual({ w1: 1_000n - 1_000n + refunded, w2: 2_000n - refunded });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('negative control: with the refund bound off, both apply and refund 120 of 100', async () => {
    expect(await transfer('t1', 'w1', 'w2', 100n)).toBe('applied');
    const fence = next();
    expect(
      await secondWaitsForFirst(
        (c) => one(applyPaymentsUnsafe(c, [refund('r1', 't1', fence, 60n)], { refundBound: false })),
        (c) => one(applyPaymentsUnsafe(c, [refund('r2', 't1', fence, 60n)], { refundBound: false })),
      ),
    ).toEqual(['applied', 'applied']);
    expect(await balancesOf(pool, ['w1', 'w2'])).toEqual({ w1: 1_020n, w2: 980n });
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok).map((i) => i.name)).toEqual([
      "no refund total above its original's refundable amount",
    ]);
  });
});

describe('(d) a capture of a rejected hold', () => {
  it('is hold_rejected, and the source is never overdrawn', async () => {
    expect(await decide(hold('h-big', 5_000n))).toEqual(['rejected:insufficient_funds']);
    expect(await decide(capture('c1', 'h-big'), voidOf('v1', 'h-big'))).toEqual([
      'rejected:hold_rejected',
      'rejected:hold_rejected',
    ]);
    expect(await balancesOf(pool, ['w1', 'w2'])).toEqual({ w1: 1_000n, w2: 1_000n });
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE kind IN ('debit', 'credit')",
    );
    expect(rows).toEqual([{ n: 0 }]);
    expect(await holdOf(pool, 'h-big')).toBeUndefined();
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});

describe('(e) a split the source cannot cover', () => {
  it('covering all but the last leg is insufficient_funds, and nothing moves', async () => {
    const legs = [
      { to: 'w2', amount: 400n },
      { to: 'w3', amount: 500n },
      { to: 'w4', amount: 200n },
    ];
    expect(await decide({ kind: 'split', operationId: 's1', from: 'w1', legs, fence: next() })).toEqual([
      'rejected:insufficient_funds',
    ]);
    expect(await balancesOf(pool, ['w1', 'w2', 'w3', 'w4'])).toEqual({
      w1: 1_000n,
      w2: 1_000n,
      w3: 1_000n,
      w4: 1_000n,
    });
    expect(await entriesOf(pool, 's1')).toBe(0);
    expect((await pool.query("SELECT 1 FROM split_legs WHERE operation_id = 's1'")).rowCount).toBe(0);
    expect((await pool.query("SELECT status, amount::int FROM transfers WHERE operation_id = 's1'")).rows).toEqual([
      { status: 'rejected', amount: 1_100 },
    ]);
  });
});

describe('(f) a capture and the expiry', () => {
  it(`racing at the expiry moment, ${EXPIRY_ROUNDS} times: one winner each time, each hold ended once`, async () => {
    await seedWallets(db.prisma, { wallets: EXPIRY_LANES, balanceMinor: 1_000n, prefix: 'src', currency: 'EUR' });
    await seedWallets(db.prisma, { wallets: EXPIRY_LANES, balanceMinor: 1_000n, prefix: 'pay', currency: 'EUR' });
    const wins = { capture: 0, expiry: 0 };
    let swept = 0;
    const lane = async (n: number) => {
      const [from, to] = [`src${n}`, `pay${n}`];
      let captured = 0n;
      for (let round = n - 1; round < EXPIRY_ROUNDS; round += EXPIRY_LANES) {
        const id = `race-${round}`;
        expect(await decide(hold(id, 10n, next(), 1_000, from, to))).toEqual(['applied']);
        const expiresAtMs = (await holdOf(pool, id))?.expires_at.getTime() ?? 0;
        // Around the boundary, from 15 ms before to 15 ms after, so both sides get to win.
        await sleep(expiresAtMs - Date.now() + ((round * 7) % 31) - 15);
        const [released, answer] = await Promise.all([
          holdsExpire(pool),
          one(applyPayments(pool, [capture(`cap-${round}`, id, next(), undefined, from)])),
        ]);
        swept += released;
        const state = await holdOf(pool, id);
        if (answer === 'applied') {
          wins.capture += 1;
          captured += 10n;
          expect(state).toMatchObject({ state: 'captured', captured: '10', released: '0' });
          expect(await entriesOf(pool, `$expiry:${id}`)).toBe(0);
        } else {
          wins.expiry += 1;
          expect(answer).toBe('rejected:hold_expired');
          expect(state).toMatchObject({ state: 'expired', captured: '0', released: '10', ended_by: null });
          expect(await entriesOf(pool, `$expiry:${id}`)).toBe(2);
          expect(await entriesOf(pool, `cap-${round}`)).toBe(0);
        }
      }
      expect(await balancesOf(pool, [from, to, `$held:${from}`])).toEqual({
        [from]: 1_000n - captured,
        [to]: 1_000n + captured,
        [`$held:${from}`]: 0n,
      });
    };
    await Promise.all(Array.from({ length: EXPIRY_LANES }, (_, i) => lane(i + 1)));
    expect(wins.capture + wins.expiry).toBe(EXPIRY_ROUNDS);
    // A sweep released at most the holds that expired; a capture that came first released the rest.
    expect(swept).toBeLessThanOrEqual(wins.expiry);
    expect(await holdsExpire(pool)).toBe(0);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('a capture after the expiry is hold_expired and releases the hold itself; a later sweep releases nothing', async () => {
    await decide(hold('h1', 100n, next(), 1_000));
    await sleep(1_100);
    expect(await decide(capture('c1', 'h1'))).toEqual(['rejected:hold_expired']);
    expect(await holdOf(pool, 'h1')).toMatchObject({ state: 'expired', released: '100', ended_by: null });
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 1_000n, w2: 1_000n, '$held:w1': 0n });
    expect(await entriesOf(pool, '$expiry:h1')).toBe(2);
    expect(await holdsExpire(pool)).toBe(0);
    expect(await decide(voidOf('v1', 'h1'))).toEqual(['rejected:hold_expired']);
    expect(await entriesOf(pool, '$expiry:h1')).toBe(2);
    expect(await balancesOf(pool, ['w1', '$held:w1'])).toEqual({ w1: 1_000n, '$held:w1': 0n });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('a capture sent before the expiry that gets its locks after it is hold_expired: expiry is judged once locked', async () => {
    await decide(hold('h1', 100n, next(), 1_000));
    const blocker = await pool.connect();
    const waiter = await pool.connect();
    try {
      const pid = (await waiter.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      await blocker.query('BEGIN');
      await blocker.query("SELECT 1 FROM wallets WHERE id = 'w1' FOR UPDATE");
      const expiresAt = (await holdOf(pool, 'h1'))?.expires_at as Date;
      expect(expiresAt.getTime()).toBeGreaterThan(Date.now());
      const pending = one(applyPayments(waiter, [capture('c1', 'h1')]));
      pending.catch(() => undefined);
      await waitUntilBlocked(db.pg, pid, BLOCKED_WAIT_MS);
      await sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 200);
      await blocker.query('COMMIT');
      expect(await pending).toBe('rejected:hold_expired');
    } finally {
      blocker.release();
      waiter.release();
    }
    expect(await holdOf(pool, 'h1')).toMatchObject({ state: 'expired', released: '100', ended_by: null });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('negative control: with the hold state check off, a capture after the sweep moves the money again', async () => {
    await decide(hold('h1', 100n, next(), 1_000), hold('h2', 100n));
    await sleep(1_100);
    expect(await holdsExpire(pool)).toBe(1);
    expect(await one(applyPaymentsUnsafe(pool, [capture('c1', 'h1')], { holdState: false }))).toBe('applied');
    // h1's 100 went back to w1 and to w2 as well: out of h2's money.
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1'])).toEqual({ w1: 900n, w2: 1_100n, '$held:w1': 0n });
    // The late capture re-ended an expired hold: its release and the capture both stand.
    const report = await reconcile(db.prisma);
    expect(report.invariants.filter((i) => !i.ok).map((i) => i.name)).toEqual([
      'every money movement has an operation record',
      "each wallet's held equals the sum of its active holds",
      'every ended hold has captured + released = amount and ended once',
    ]);
  });
});

describe('(g) two expiry sweeps at once', () => {
  it('never release one hold twice: the second waits for the first and finds nothing left', async () => {
    const holds = 30;
    const fence = next();
    await decide(...Array.from({ length: holds }, (_, i) => hold(`h${i}`, 10n, fence, 1_000, i % 2 ? 'w1' : 'w3')));
    await sleep(1_100);
    expect(
      await secondWaitsForFirst(
        (c) => holdsExpire(c),
        (c) => holdsExpire(c),
      ),
    ).toEqual([holds, 0]);
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM ledger_entries WHERE operation_id LIKE '$expiry:%' AND kind = 'debit'",
    );
    expect(rows).toEqual([{ n: holds }]);
    expect(await balancesOf(pool, ['w1', 'w3', '$held:w1', '$held:w3'])).toEqual({
      w1: 1_000n,
      w3: 1_000n,
      '$held:w1': 0n,
      '$held:w3': 0n,
    });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('sent at once, many sweeps release each hold exactly once between them', async () => {
    const holds = 40;
    const fence = next();
    await decide(...Array.from({ length: holds }, (_, i) => hold(`h${i}`, 10n, fence, 1_000, i % 2 ? 'w1' : 'w3')));
    await sleep(1_100);
    const released = await Promise.all(Array.from({ length: 4 }, () => holdsExpire(pool)));
    expect(released.reduce((a, b) => a + b, 0)).toBe(holds);
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n FROM (SELECT operation_id FROM ledger_entries WHERE operation_id LIKE '$expiry:%' AND kind = 'debit' GROUP BY operation_id HAVING count(*) = 1) once",
    );
    expect(rows).toEqual([{ n: holds }]);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});

describe('(h) a transfer and held money', () => {
  beforeEach(async () => {
    await seedWallets(db.prisma, { wallets: 1, balanceMinor: 100n, prefix: 'small', currency: 'EUR' });
  });

  it('held money cannot be spent: hold 80 of 100, then a transfer of 50 is insufficient_funds', async () => {
    expect(await decide(hold('h1', 80n, next(), 60_000, 'small1', 'w2'))).toEqual(['applied']);
    expect(await transfer('t1', 'small1', 'w3', 50n)).toBe('rejected:insufficient_funds');
    expect(await transfer('t2', 'small1', 'w3', 20n)).toBe('applied');
    expect(await balancesOf(pool, ['small1', '$held:small1', 'w3'])).toEqual({
      small1: 0n,
      '$held:small1': 80n,
      w3: 1_020n,
    });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('a hold and a transfer sent at once cannot both spend the same money', async () => {
    const fence = next();
    const [held, moved] = await Promise.all([
      one(applyPayments(pool, [hold('h1', 80n, fence, 60_000, 'small1', 'w2')])),
      transfer('t1', 'small1', 'w3', 50n, fence),
    ]);
    expect([held, moved].filter((a) => a === 'applied')).toHaveLength(1);
    expect([held, moved].filter((a) => a === 'rejected:insufficient_funds')).toHaveLength(1);
    const balances = await balancesOf(pool, ['small1', '$held:small1', 'w3']);
    expect(balances).toEqual(
      held === 'applied'
        ? { small1: 20n, '$held:small1': 80n, w3: 1_000n }
        : { small1: 50n, '$held:small1': 0n, w3: 1_050n },
    );
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});

describe('(i) a capture and its hold decided at once', () => {
  it('the capture waiting for its hold to commit captures it, and the rest of its batch is decided', async () => {
    // Sent before the hold commits: it reads no hold, so no payee, and waits for w1's lock.
    const fence = next();
    expect(
      await secondWaitsForFirst(
        (c) => applyPayments(c, [hold('h1', 100n, fence)]).then((a) => a.map(said)),
        (c) =>
          applyPayments(c, [capture('c1', 'h1', fence, 70n), hold('h2', 50n, next(), 60_000, 'w3', 'w4')]).then((a) =>
            a.map(said),
          ),
      ),
    ).toEqual([['applied'], ['applied', 'applied']]);
    expect(await holdOf(pool, 'h1')).toMatchObject({
      state: 'captured',
      captured: '70',
      released: '30',
      ended_by: 'c1',
    });
    expect(await balancesOf(pool, ['w1', 'w2', '$held:w1', 'w3', '$held:w3', 'w4'])).toEqual({
      w1: 930n,
      w2: 1_070n,
      '$held:w1': 0n,
      w3: 950n,
      '$held:w3': 50n,
      w4: 1_000n,
    });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});
