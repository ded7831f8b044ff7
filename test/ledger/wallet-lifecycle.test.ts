// Wallets through the API (issue 43, item 1): open_wallet, freeze_wallet, unfreeze_wallet and
// close_wallet are operations like any other, decided and fenced on their wallet under its row
// lock, so a freeze or a close is decided before or after a debit in flight and never beside it.
// What a wallet's status refuses is judged on the postings a decision would write: a debit of a
// wallet that is not open, a credit to one frozen for credits too or closed.
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import { balancesOf, decidedAs, type PaymentOp, splitOp } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const FENCE = 7n;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_wallet_ops');
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  // p1, p2, p3: balance 100 each.
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 100n, prefix: 'p', currency: 'EUR' });
});

const open = (operationId: string, wallet: string, currency = 'EUR', limit = 0n, fence = FENCE): PaymentOp => ({
  kind: 'open_wallet',
  operationId,
  from: wallet,
  currency,
  amount: limit,
  fence,
});
const freeze = (operationId: string, wallet: string, credits: 'allowed' | 'refused' = 'allowed', fence = FENCE) =>
  ({ kind: 'freeze_wallet', operationId, from: wallet, ref: credits, fence }) as const satisfies PaymentOp;
const unfreeze = (operationId: string, wallet: string): PaymentOp => ({
  kind: 'unfreeze_wallet',
  operationId,
  from: wallet,
  fence: FENCE,
});
const close = (operationId: string, wallet: string): PaymentOp => ({
  kind: 'close_wallet',
  operationId,
  from: wallet,
  fence: FENCE,
});
const deposit = (operationId: string, to: string, amount: bigint): PaymentOp => ({
  kind: 'deposit',
  operationId,
  from: to,
  amount,
  currency: 'EUR',
  ref: `bank-${operationId}`,
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
const hold = (operationId: string, from: string, to: string, amount: bigint): PaymentOp => ({
  kind: 'hold',
  operationId,
  from,
  to,
  amount,
  currency: 'EUR',
  expiresInMs: 60_000,
  fence: FENCE,
});
const split = (operationId: string, from: string, ...legs: [string, bigint][]): PaymentOp =>
  splitOp(operationId, from, legs, FENCE);

const decide = (...ops: PaymentOp[]): Promise<string[]> => decidedAs(db.pg, ops);

async function walletsOf(ids: readonly string[]): Promise<Record<string, string>> {
  const { rows } = await db.pg.query<{ id: string; row: string }>(
    `SELECT id, concat_ws(' ', currency, status, balance, held, credit_limit, last_fence) AS row FROM wallets
      WHERE id = ANY ($1) ORDER BY id`,
    [ids],
  );
  return Object.fromEntries(rows.map((r) => [r.id, r.row]));
}

/** One transfer through apply_transfers(), as the worker decides a batch of transfers. */
async function transfer(sql: Pick<pg.Pool, 'query'>, operationId: string, from: string, to: string, amount: bigint) {
  const { rows } = await sql.query<{ outcome: string; reason: string | null }>(
    `SELECT outcome, reason FROM apply_transfers(ARRAY[$1], ARRAY[repeat('a', 64)], ARRAY[$2], ARRAY[$3],
       ARRAY[$4]::bigint[], ARRAY['EUR'], ARRAY[$5]::bigint[], ARRAY[$6]::uuid[])`,
    [operationId, from, to, amount.toString(), FENCE.toString(), leaseIdFor(FENCE)],
  );
  const [row] = rows;
  return row?.outcome === 'rejected' ? `rejected:${row.reason}` : (row?.outcome ?? 'none');
}

/** One operation through apply_payments() on a client of our own (a transaction held open). */
async function decideOn(client: pg.PoolClient, op: PaymentOp): Promise<string> {
  const { rows } = await client.query<{ outcome: string; reason: string | null }>(
    `SELECT outcome, reason FROM apply_payments(ARRAY[$1], ARRAY[$2], ARRAY[repeat('b', 64)], ARRAY[$3], ARRAY[NULL]::text[],
       ARRAY[$4]::bigint[], ARRAY[$5]::text[], ARRAY[$6]::text[], ARRAY[NULL]::bigint[], ARRAY[NULL]::timestamptz[],
       ARRAY[NULL]::jsonb[], ARRAY[$7]::bigint[], ARRAY[$8]::uuid[], 604800000)`,
    [
      op.kind,
      op.operationId,
      op.from,
      op.amount?.toString() ?? null,
      op.currency ?? null,
      op.ref ?? null,
      FENCE.toString(),
      leaseIdFor(FENCE),
    ],
  );
  const [row] = rows;
  return row?.outcome === 'rejected' ? `rejected:${row.reason}` : (row?.outcome ?? 'none');
}

/** Runs `first` in a transaction held open, starts `second` on another session, and lets `first` commit once `second` waits. */
async function raced(
  first: (c: pg.PoolClient) => Promise<string>,
  second: (c: pg.PoolClient) => Promise<string>,
): Promise<[string, string]> {
  const a = await db.pg.connect();
  const b = await db.pg.connect();
  try {
    await a.query('BEGIN');
    const firstSaid = await first(a);
    const pid = (await b.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
    const late = second(b);
    await waitUntilBlocked(db.pg, pid, 10_000);
    await a.query('COMMIT');
    return [firstSaid, await late];
  } finally {
    a.release();
    b.release();
  }
}

describe('wallets opened, frozen, unfrozen and closed by operations', () => {
  it('opens a wallet once, with its currency and limit; the operations after it in the batch see it', async () => {
    expect(
      await decide(
        split('s0', 'p1', ['n1', 1n], ['p2', 1n]),
        open('o1', 'n1', 'EUR', 50n),
        split('s1', 'p1', ['n1', 10n], ['p2', 1n]),
        open('o2', 'n1', 'USD'),
        split('s2', 'n1', ['p1', 55n], ['p2', 5n]),
        open('o3', 'p1'),
      ),
    ).toEqual([
      'rejected:unknown_wallet',
      'applied',
      'applied',
      'rejected:wallet_exists',
      'applied',
      'rejected:wallet_exists',
    ]);
    // n1: 10 in, 60 out, down to -50, its limit; its fence is the token it was opened under.
    expect(await walletsOf(['n1'])).toEqual({ n1: 'EUR open -50 0 50 7' });
    expect(await decide(open('o1', 'n1', 'EUR', 50n), open('o1', 'n1', 'EUR', 0n))).toEqual(['duplicate', 'conflict']);
    const { rows } = await db.pg.query(
      `SELECT t.kind, t.currency, t.amount, e.detail FROM transfers t
         JOIN outcome_pending e ON e.operation_id = t.operation_id WHERE t.operation_id = 'o1'`,
    );
    expect(rows).toEqual([
      {
        kind: 'open_wallet',
        currency: 'EUR',
        amount: null,
        detail: { status: 'open', currency: 'EUR', creditLimit: '50' },
      },
    ]);
    expect((await reconcile(db.prisma)).invariants.filter((i) => !i.ok)).toEqual([]);
  });

  it('a wallet frozen for debits refuses every kind that debits it and takes credits', async () => {
    expect(await decide(hold('h1', 'p1', 'p2', 30n), freeze('f1', 'p1'))).toEqual(['applied', 'applied']);
    expect(await walletsOf(['p1'])).toEqual({ p1: 'EUR debits_frozen 70 30 0 7' });
    expect(
      await decide(
        split('s1', 'p1', ['p2', 1n], ['p3', 1n]),
        hold('h2', 'p1', 'p2', 1n),
        withdrawal('w1', 'p1', 1n),
        split('s2', 'p2', ['p1', 5n], ['p3', 1n]),
        deposit('d1', 'p1', 5n),
        // The hold placed before the freeze took its money then: its capture proceeds, and the
        // 20 it leaves go back to p1.
        { kind: 'capture', operationId: 'c1', from: 'p1', ref: 'h1', amount: 10n, fence: FENCE },
      ),
    ).toEqual([
      'rejected:wallet_frozen',
      'rejected:wallet_frozen',
      'rejected:wallet_frozen',
      'applied',
      'applied',
      'applied',
    ]);
    expect(await transfer(db.pg, 't1', 'p1', 'p2', 1n)).toBe('rejected:wallet_frozen');
    expect(await transfer(db.pg, 't2', 'p2', 'p1', 1n)).toBe('applied');
    // p1: 70 after the hold, +5 (s2), +5 (d1), +20 (c1's rest), +1 (t2); p2: +10 (c1), -6 (s2), -1 (t2).
    expect(await balancesOf(db.pg, ['p1', '$held:p1', 'p2'])).toEqual({ p1: 101n, '$held:p1': 0n, p2: 103n });
    expect(await decide(unfreeze('u1', 'p1'), split('s3', 'p1', ['p2', 1n], ['p3', 1n]))).toEqual([
      'applied',
      'applied',
    ]);
    expect(await transfer(db.pg, 't3', 'p1', 'p2', 1n)).toBe('applied');
    expect((await reconcile(db.prisma)).invariants.filter((i) => !i.ok)).toEqual([]);
  });

  it('a wallet frozen for credits too refuses them, its own held money back excepted', async () => {
    expect(await decide(hold('h1', 'p1', 'p2', 30n), freeze('f1', 'p1', 'refused'))).toEqual(['applied', 'applied']);
    expect(
      await decide(
        deposit('d1', 'p1', 5n),
        split('s1', 'p2', ['p1', 5n], ['p3', 1n]),
        { kind: 'void', operationId: 'v1', from: 'p1', ref: 'h1', fence: FENCE },
        freeze('f2', 'p1'),
        deposit('d2', 'p1', 5n),
      ),
    ).toEqual(['rejected:wallet_frozen', 'rejected:wallet_frozen', 'applied', 'applied', 'applied']);
    expect(await transfer(db.pg, 't1', 'p2', 'p1', 1n)).toBe('applied');
    expect(await walletsOf(['p1'])).toEqual({ p1: 'EUR debits_frozen 106 0 0 7' });
    expect(await decide(freeze('f3', 'p1', 'refused'))).toEqual(['applied']);
    expect(await transfer(db.pg, 't2', 'p2', 'p1', 1n)).toBe('rejected:wallet_frozen');
  });

  it('closes only an empty wallet, and a closed wallet takes nothing again', async () => {
    expect(await decide(open('o1', 'n1'), deposit('d1', 'n1', 40n), close('c1', 'n1'))).toEqual([
      'applied',
      'applied',
      'rejected:wallet_not_empty',
    ]);
    expect(await decide(withdrawal('w1', 'n1', 40n), close('c2', 'n1'))).toEqual(['applied', 'applied']);
    expect(await walletsOf(['n1'])).toEqual({ n1: 'EUR closed 0 0 0 7' });
    // A status is judged on what the operation would post, after the kind's own checks: a
    // withdrawal of more than a closed wallet can spend is insufficient_funds, as anywhere.
    expect(
      await decide(
        deposit('d2', 'n1', 1n),
        withdrawal('w2', 'n1', 1n),
        freeze('f1', 'n1'),
        unfreeze('u1', 'n1'),
        close('c3', 'n1'),
        { kind: 'credit_limit', operationId: 'l1', from: 'n1', amount: 10n, fence: FENCE },
        open('o2', 'n1'),
        split('s1', 'p1', ['n1', 1n], ['p2', 1n]),
        unfreeze('u2', 'nobody'),
      ),
    ).toEqual([
      'rejected:wallet_closed',
      'rejected:insufficient_funds',
      'rejected:wallet_closed',
      'rejected:wallet_closed',
      'rejected:wallet_closed',
      'rejected:wallet_closed',
      'rejected:wallet_exists',
      'rejected:wallet_closed',
      'rejected:unknown_wallet',
    ]);
    expect(await transfer(db.pg, 't1', 'p1', 'n1', 1n)).toBe('rejected:wallet_closed');
    // The table's CHECK stands behind close_wallet's own refusal.
    await expect(db.pg.query("UPDATE wallets SET status = 'closed' WHERE id = 'p1'")).rejects.toMatchObject({
      code: '23514',
    });
    expect((await reconcile(db.prisma)).invariants.filter((i) => !i.ok)).toEqual([]);
  });

  it('is fenced on its wallet: a token below the wallet fence changes nothing', async () => {
    expect(await decide(freeze('f1', 'p1', 'allowed', 9n))).toEqual(['applied']);
    expect(await decide({ ...unfreeze('u1', 'p1'), fence: 8n })).toEqual(['stale_fence']);
    expect(await decide(open('o1', 'n1', 'EUR', 0n, 3n), { ...freeze('f2', 'n1'), fence: 2n })).toEqual([
      'applied',
      'stale_fence',
    ]);
    expect(await walletsOf(['p1', 'n1'])).toEqual({ p1: 'EUR debits_frozen 100 0 0 9', n1: 'EUR open 0 0 0 3' });
  });

  it('a debit of a wallet frozen between its request and its decision is refused', async () => {
    expect(
      await raced(
        (c) => decideOn(c, freeze('f1', 'p1')),
        (c) => transfer(c, 't1', 'p1', 'p2', 10n),
      ),
    ).toEqual(['applied', 'rejected:wallet_frozen']);
    // The other order: the debit decided first stands, the freeze waits for it.
    expect(
      await raced(
        (c) => transfer(c, 't2', 'p2', 'p1', 10n),
        (c) => decideOn(c, freeze('f2', 'p2')),
      ),
    ).toEqual(['applied', 'applied']);
    expect(await balancesOf(db.pg, ['p1', 'p2'])).toEqual({ p1: 110n, p2: 90n });
  });

  it('a close racing a deposit: whichever commits first, the other sees it', async () => {
    expect(await decide(open('o1', 'n1'), open('o2', 'n2'))).toEqual(['applied', 'applied']);
    expect(
      await raced(
        (c) => decideOn(c, close('c1', 'n1')),
        (c) => decideOn(c, deposit('d1', 'n1', 5n)),
      ),
    ).toEqual(['applied', 'rejected:wallet_closed']);
    expect(
      await raced(
        (c) => decideOn(c, deposit('d2', 'n2', 5n)),
        (c) => decideOn(c, close('c2', 'n2')),
      ),
    ).toEqual(['applied', 'rejected:wallet_not_empty']);
    expect(await walletsOf(['n1', 'n2'])).toEqual({ n1: 'EUR closed 0 0 0 7', n2: 'EUR open 5 0 0 7' });
  });

  it('two opens of one id at once: the second batch fails retryably, and its retry answers wallet_exists', async () => {
    const a = await db.pg.connect();
    const b = await db.pg.connect();
    try {
      await a.query('BEGIN');
      expect(await decideOn(a, open('o1', 'n1'))).toBe('applied');
      const pid = (await b.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid ?? -1;
      const late = decideOn(b, open('o2', 'n1', 'USD'));
      // Its rejection may come in before the COMMIT's answer: handled from now on, asserted below.
      late.catch(() => undefined);
      await waitUntilBlocked(db.pg, pid, 10_000);
      await a.query('COMMIT');
      await expect(late).rejects.toMatchObject({ code: '40001' });
    } finally {
      a.release();
      b.release();
    }
    expect(await decide(open('o2', 'n1', 'USD'))).toEqual(['rejected:wallet_exists']);
    expect(await walletsOf(['n1'])).toEqual({ n1: 'EUR open 0 0 0 7' });
  });

  it('the decision refuses a malformed wallet operation before any lock', async () => {
    await expect(decide({ ...open('o1', 'n1'), currency: undefined })).rejects.toMatchObject({ code: '22023' });
    await expect(decide(open('o2', 'n1', 'EUR', 10n ** 17n + 1n))).rejects.toMatchObject({ code: '22023' });
    await expect(decide({ ...freeze('f1', 'p1'), ref: 'sometimes' })).rejects.toMatchObject({ code: '22023' });
    await expect(decide({ ...open('o3', '$held:p1') })).rejects.toMatchObject({ code: '22023' });
  });
});
