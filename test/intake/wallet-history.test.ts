// balanceAt() and statement() (src/intake/wallet-history.ts) over a ledger the real decisions
// wrote, each in its own transaction a pause apart: the balance before the first entry, between
// entries and now, a hold in `held`; the statement walked page by page, entries decided within
// one millisecond included, against the ledger read straight; the refusals before any query;
// an unknown wallet; and the read role, which may call both and read nothing else.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIntakeRole, expectedIntakeRolePrivileges, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { isFencedTransfersError, UnknownWalletError } from '../../src/errors.ts';
import { OPERATIONS_MATCHING_FUNCTION } from '../../src/intake/operation-query.ts';
import {
  balanceAt,
  type HistoryClient,
  type StatementEntry,
  type StatementOptions,
  statement,
  WALLET_BALANCE_AT_FUNCTION,
  WALLET_STATEMENT_FUNCTION,
} from '../../src/intake/wallet-history.ts';
import { decideOperations } from '../../src/ledger/apply-payments.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { OperationRequest, TransferRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

/** Long enough apart that an instant taken between two decisions falls between their entries. */
const PAUSE_MS = 15;
const FAR = new Date('2100-01-01T00:00:00Z');

let db: TestDatabase;
let fence = 0n;
/** Instants between the decisions: before the seed, after it, after each decision. */
const at = {} as Record<'beforeSeed' | 'seeded' | 't1' | 't2' | 'hold' | 'batch', Date>;

async function instant(): Promise<Date> {
  await sleep(PAUSE_MS);
  const now = new Date();
  await sleep(PAUSE_MS);
  return now;
}

async function decide(...requests: OperationRequest[]): Promise<void> {
  fence += 1n;
  const results = await decideOperations(
    db.prisma,
    requests.map((request) => ({ request, fence, leaseId: leaseIdFor(fence) })),
    { holdExpiryMaxMs: 604_800_000 },
  );
  expect(results.map((r) => r.outcome)).toEqual(requests.map(() => 'applied'));
}

const transfer = (operationId: string, from: string, to: string, amountMinor: bigint): TransferRequest => ({
  operationId,
  from,
  to,
  amountMinor,
  currency: null,
});

/** The account's entries read straight from the table, in the statement's order. */
async function ledgerOf(accounts: readonly string[]) {
  const { rows } = await db.pg.query<{ id: string; amount: string; balance_after: string; account: string }>(
    `SELECT id::text AS id, amount::text AS amount, balance_after::text AS balance_after, wallet_id AS account
       FROM ledger_entries WHERE wallet_id = ANY($1::text[]) ORDER BY created_at, id`,
    [accounts],
  );
  return rows;
}

/** Every page of the statement, following nextCursor until null. */
async function walk(client: HistoryClient, wallet: string, options: StatementOptions) {
  const entries: StatementEntry[] = [];
  const sizes: number[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page += 1) {
    const got = await statement(client, wallet, { ...options, ...(cursor === undefined ? {} : { cursor }) });
    entries.push(...got.entries);
    sizes.push(got.entries.length);
    if (got.nextCursor === null) return { entries, sizes };
    cursor = got.nextCursor;
  }
  throw new Error('more than 100 pages');
}

async function refusedWith(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected a refusal');
}

beforeAll(async () => {
  db = await createTestDatabase('ft_history');
  at.beforeSeed = await instant();
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  at.seeded = await instant();
  await decide(transfer('t1', 'w1', 'w2', 100n));
  at.t1 = await instant();
  await decide(transfer('t2', 'w2', 'w1', 30n));
  at.t2 = await instant();
  await decide({
    kind: 'hold',
    operationId: 'h1',
    from: 'w1',
    to: 'w3',
    amountMinor: 200n,
    currency: null,
    expiresInMs: 600_000,
    expiresAt: null,
  });
  at.hold = await instant();
  // One batch, one statement: w1's five credits are written microseconds apart, most within one millisecond.
  await applyTransfers(
    db.prisma,
    [1, 2, 3, 4, 5].map((n) => ({ request: transfer(`b${n}`, 'w3', 'w1', 1n), fence, leaseId: leaseIdFor(fence) })),
  );
  at.batch = await instant();
  await decide(transfer('t3', 'w1', 'w3', 50n));
});

afterAll(async () => {
  await db.drop();
});

describe('balanceAt', () => {
  it('is 0 before the first entry, the running balance between entries, and the hold in held', async () => {
    const seen = async (instantAt: Date) => {
      const b = await balanceAt(db.pg, 'w1', instantAt);
      return { balance: b.balance, held: b.held };
    };
    const before = await balanceAt(db.pg, 'w1', at.beforeSeed);
    expect(before).toEqual({
      wallet: 'w1',
      currency: 'EUR',
      balance: 0n,
      held: 0n,
      lastEntry: null,
      at: at.beforeSeed,
    });
    expect(await seen(at.seeded)).toEqual({ balance: 1_000n, held: 0n });
    expect(await seen(at.t1)).toEqual({ balance: 900n, held: 0n });
    expect(await seen(at.t2)).toEqual({ balance: 930n, held: 0n });
    expect(await seen(at.hold)).toEqual({ balance: 730n, held: 200n });
    expect(await seen(at.batch)).toEqual({ balance: 735n, held: 200n });
  });

  it('now: the wallet row, its latest entry, through pg and through Prisma alike', async () => {
    const { rows } = await db.pg.query<{ balance: string; held: string }>(
      "SELECT balance::text AS balance, held::text AS held FROM wallets WHERE id = 'w1'",
    );
    const last = await db.pg.query<{ id: string }>(
      "SELECT max(id)::text AS id FROM ledger_entries WHERE wallet_id IN ('w1', '$held:w1')",
    );
    const now = new Date(Date.now() + 1_000);
    const viaPg = await balanceAt(db.pg, 'w1', now);
    expect(viaPg).toMatchObject({ balance: 685n, held: 200n, lastEntry: BigInt(last.rows[0]?.id ?? '0'), at: now });
    expect({ balance: viaPg.balance.toString(), held: viaPg.held.toString() }).toEqual(rows[0]);
    expect(await balanceAt(db.prisma, 'w1', now)).toEqual(viaPg);
  });
});

describe('statement', () => {
  it('pages of 2 walk every entry once, in order, with the balance after each, and end with a null cursor', async () => {
    const { entries, sizes } = await walk(db.pg, 'w1', { from: at.beforeSeed, to: FAR, limit: 2 });
    const ledger = await ledgerOf(['w1']);
    expect(ledger.length).toBe(10); // opening, t1, t2, h1 (the hold debits w1), five credits, t3
    expect(entries.map((e) => e.entryId.toString())).toEqual(ledger.map((r) => r.id));
    expect(entries.map((e) => e.balanceAfter.toString())).toEqual(ledger.map((r) => r.balance_after));
    expect(sizes.slice(0, -1).every((n) => n === 2)).toBe(true);
    let running = 0n;
    for (const e of entries) {
      running += e.amount;
      expect(e.balanceAfter, `entry ${e.entryId}`).toBe(running);
      expect(e.account).toBe('w1');
      expect(e.atText).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
      expect(e.at.getTime()).toBe(Date.parse(e.atText));
    }
    const credits5 = ['credit', 'credit', 'credit', 'credit', 'credit'];
    expect(entries.map((e) => e.kind)).toEqual(['opening', 'debit', 'credit', 'debit', ...credits5, 'debit']);
    // The batch's credits: some share a millisecond, which a cursor of Dates would split wrongly.
    const credits = entries.filter((e) => e.operationId.startsWith('b'));
    const sameMs = credits.slice(1).some((e, i) => e.at.getTime() === credits[i]?.at.getTime());
    expect(sameMs, credits.map((e) => e.atText).join(' ')).toBe(true);
    expect(await walk(db.prisma, 'w1', { from: at.beforeSeed, to: FAR, limit: 2 })).toEqual({ entries, sizes });
  });

  it('the range is from <= time < to; held adds the holding account, in the same order', async () => {
    const between = await statement(db.pg, 'w1', { from: at.t1, to: at.hold });
    expect(between.nextCursor).toBeNull();
    expect(between.entries.map((e) => `${e.operationId}:${e.amount}:${e.balanceAfter}`)).toEqual([
      't2:30:930',
      'h1:-200:730',
    ]);
    const { entries } = await walk(db.pg, 'w1', { from: at.beforeSeed, to: FAR, limit: 3, held: true });
    const ledger = await ledgerOf(['w1', '$held:w1']);
    expect(entries.map((e) => e.entryId.toString())).toEqual(ledger.map((r) => r.id));
    const held = entries.filter((e) => e.account === '$held:w1');
    expect(held.map((e) => `${e.operationId}:${e.kind}:${e.amount}:${e.balanceAfter}`)).toEqual(['h1:credit:200:200']);
    const full = await statement(db.pg, 'w1', { from: at.beforeSeed, to: FAR, limit: entries.length });
    expect(full.entries.length).toBe(entries.length - 1);
    expect(full.nextCursor).toBeNull();
  });

  it('a full last page hands a cursor whose page is empty with a null cursor', async () => {
    const { entries } = await walk(db.pg, 'w2', { from: at.beforeSeed, to: FAR, limit: 1 });
    expect(entries.map((e) => e.operationId)).toEqual(['$opening:w2', 't1', 't2']);
    const page = await statement(db.pg, 'w2', { from: at.beforeSeed, to: FAR, limit: 3 });
    expect(page.entries.length).toBe(3);
    expect(page.nextCursor).not.toBeNull();
    const after = await statement(db.pg, 'w2', {
      from: at.beforeSeed,
      to: FAR,
      limit: 3,
      cursor: page.nextCursor ?? '',
    });
    expect(after).toEqual({ entries: [], nextCursor: null });
  });
});

describe('refusals', () => {
  const range = () => ({ from: at.beforeSeed, to: FAR });

  it('a malformed cursor, a limit out of range, an empty or inverted range: RangeError, before any query', async () => {
    const valid = (await statement(db.pg, 'w1', { ...range(), limit: 1 })).nextCursor ?? '';
    const forged = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
    const bad: [string, StatementOptions][] = [
      ['not base64url', { ...range(), cursor: 'not a cursor!' }],
      ['empty cursor', { ...range(), cursor: '' }],
      ['no id', { ...range(), cursor: forged('2026-12-19T10:00:00.000000Z|') }],
      ['milliseconds only', { ...range(), cursor: forged('2026-12-19T10:00:00.000Z|5') }],
      ['id 0', { ...range(), cursor: forged('2026-12-19T10:00:00.000000Z|0') }],
      ['id above bigint', { ...range(), cursor: forged('2026-12-19T10:00:00.000000Z|9223372036854775808') }],
      ['month 13', { ...range(), cursor: forged('2026-13-19T10:00:00.000000Z|5') }],
      ['too long', { ...range(), cursor: `${valid}${'A'.repeat(64)}` }],
      ['limit 0', { ...range(), limit: 0 }],
      ['limit 1001', { ...range(), limit: 1_001 }],
      ['limit 1.5', { ...range(), limit: 1.5 }],
      ['from = to', { from: at.t1, to: at.t1 }],
      ['from > to', { from: at.t2, to: at.t1 }],
      ['invalid from', { from: new Date(Number.NaN), to: FAR }],
      ['year 10000', { from: at.t1, to: new Date('+010000-01-01T00:00:00Z') }],
    ];
    for (const [name, options] of bad) {
      // An unknown wallet: a query would answer UnknownWalletError, so the RangeError came first.
      const err = await refusedWith(statement(db.pg, 'nobody', options));
      expect(err, name).toBeInstanceOf(RangeError);
    }
    expect(await refusedWith(statement(db.pg, 'nobody', { ...range(), cursor: 'x' }))).toMatchObject({
      message: expect.stringMatching(/^cursor is not one statement\(\) handed out/),
    });
    expect(await refusedWith(balanceAt(db.pg, 'nobody', new Date(Number.NaN)))).toBeInstanceOf(RangeError);
    expect(await refusedWith(balanceAt(db.pg, '', at.t1))).toBeInstanceOf(RangeError);
    expect(await refusedWith(balanceAt(db.pg, 'x'.repeat(129), at.t1))).toBeInstanceOf(RangeError);
  });

  it('an unknown wallet: UnknownWalletError (UNKNOWN_WALLET), through pg and Prisma', async () => {
    for (const client of [db.pg, db.prisma] as HistoryClient[]) {
      for (const call of [balanceAt(client, 'nobody', at.t1), statement(client, 'nobody', range())]) {
        const err = await refusedWith(call);
        expect(err).toBeInstanceOf(UnknownWalletError);
        expect(isFencedTransfersError(err)).toBe(true);
        expect(err).toMatchObject({ code: 'UNKNOWN_WALLET', wallet: 'nobody', message: 'no wallet "nobody"' });
      }
    }
  });
});

describe('the read role', () => {
  it('may call both functions, and reads no table', async () => {
    const role = uniqueName('ft_hist_r');
    const password = randomBytes(16).toString('hex');
    try {
      const made = await ensureIntakeRole(INTAKE_ROLES.read, db.url, role, password, db.config);
      expect(made.privileges).toEqual(expectedIntakeRolePrivileges(INTAKE_ROLES.read, db.name, 'public'));
      expect(made.privileges).toEqual([
        `DATABASE ${db.name} CONNECT`,
        `FUNCTION public.${OPERATIONS_MATCHING_FUNCTION} EXECUTE`,
        'FUNCTION public.outcome_events_after(bigint,integer) EXECUTE',
        `FUNCTION public.${WALLET_BALANCE_AT_FUNCTION} EXECUTE`,
        `FUNCTION public.${WALLET_STATEMENT_FUNCTION} EXECUTE`,
        'SCHEMA public USAGE',
      ]);
      const reader = new pg.Client({ connectionString: roleUrl(db.url, role, password) });
      await reader.connect();
      try {
        const now = new Date(Date.now() + 1_000);
        expect(await balanceAt(reader, 'w1', now)).toEqual(await balanceAt(db.pg, 'w1', now));
        const asReader = await walk(reader, 'w1', { from: at.beforeSeed, to: FAR, limit: 4, held: true });
        expect(asReader).toEqual(await walk(db.pg, 'w1', { from: at.beforeSeed, to: FAR, limit: 4, held: true }));
        expect(await refusedWith(balanceAt(reader, 'nobody', now))).toBeInstanceOf(UnknownWalletError);
        for (const sql of ['SELECT 1 FROM ledger_entries LIMIT 1', 'SELECT 1 FROM wallets LIMIT 1']) {
          expect(await refusedWith(reader.query(sql)), sql).toMatchObject({ code: '42501' });
        }
      } finally {
        await reader.end();
      }
    } finally {
      await dropWorkerRole(db.url, role);
    }
  });
});
