// apply_transfer() and the batch, apply_transfers() (decide_batch()), write their records with a plain
// INSERT when the idempotency check is on (the single- and batch-decision-plain-insert
// migrations): a record that appears after the check, written by someone who skipped the
// operation's advisory lock, fails the call with a unique violation and rolls back the money
// it moved (in a batch, every transfer of the call). Each previous body (INSERT ... ON
// CONFLICT DO NOTHING), created from its applied migration under another name, is run through
// the same race as the control: it answers applied, moves the money and leaves only the
// intruder's record, so this test fails against it. With the check off (the negative
// control's variant, apply_transfer_unsafe() and apply_transfers_unsafe(), which the
// production database has not: installed here as the chaos harness does) a second delivery still
// moves the money again and keeps the first record.
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransferOfMigration, functionOfMigration } from '../../harness/bench/first-decision.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { waitUntilBlocked } from '../support/lock-wait.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const PREVIOUS_MIGRATION = '20261206000000_single_decision_one_wallet_update';
const PREVIOUS_FUNCTION = 'previous_apply_transfer';
const PREVIOUS_BATCH_MIGRATION = '20261204000000_intake_and_outcome_feed';
const PREVIOUS_BATCH_FUNCTION = 'previous_transfers_decide_batch';
const BALANCE = 1_000n;
const AMOUNT = 5n;
const FENCE = 1n;
const HASH = 'a'.repeat(64);
const LOCK_WAIT_TIMEOUT_MS = 10_000;
/** What a test counts for one operation: its debit entries, its records, its pending outcome events. */
const DEBITS = "SELECT count(*)::int AS n FROM ledger_entries WHERE operation_id = $1 AND kind = 'debit'";
const RECORDS = 'SELECT count(*)::int AS n FROM transfers WHERE operation_id = $1';
const EVENTS = 'SELECT count(*)::int AS n FROM outcome_pending WHERE operation_id = $1';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_record_insert');
  await db.pg.query(applyTransferOfMigration(PREVIOUS_MIGRATION, PREVIOUS_FUNCTION));
  await db.pg.query(functionOfMigration(PREVIOUS_BATCH_MIGRATION, 'transfers_decide_batch', PREVIOUS_BATCH_FUNCTION));
  await db.installUnsafeDecisions();
});
afterAll(async () => db.drop());

beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: BALANCE, prefix: 'w', currency: 'EUR' });
});

/**
 * The switches a function takes after its arguments: none for today's decisions; the idempotency
 * check's, then the fence's and the lease's on, for the previous bodies and the controls' variants.
 */
function switchesOf(fn: string, checked: boolean): string {
  if (fn === 'apply_transfer' || fn === 'apply_transfers') return '';
  return fn === 'apply_transfers_unsafe' ? `, ${checked}, TRUE, TRUE, TRUE, TRUE` : `, ${checked}, TRUE, TRUE`;
}

function decide(client: pg.PoolClient, fn: string, operationId: string, checked = true) {
  return client.query<{ outcome: string }>(
    `SELECT outcome FROM ${fn}($1::text, $2::text, 'w1', 'w2', $3::bigint, NULL, $4::bigint, $5::uuid${switchesOf(fn, checked)})`,
    [operationId, HASH, AMOUNT.toString(), FENCE.toString(), leaseIdFor(FENCE)],
  );
}

/** One transfer of a batch: its operation, and its route (AMOUNT moves from -> to). */
type Leg = readonly [operationId: string, from: string, to: string];

/** One batch call deciding `legs` in order; its rows in batch order. */
function decideBatch(client: pg.PoolClient, fn: string, legs: readonly Leg[], checked = true) {
  return client.query<{ outcome: string }>(
    `SELECT outcome FROM ${fn}($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[],
       $8::uuid[]${switchesOf(fn, checked)}) ORDER BY ord`,
    [
      legs.map(([op]) => op),
      legs.map(() => HASH),
      legs.map(([, from]) => from),
      legs.map(([, , to]) => to),
      legs.map(() => AMOUNT.toString()),
      legs.map(() => null),
      legs.map(() => FENCE.toString()),
      legs.map(() => leaseIdFor(FENCE)),
    ],
  );
}

async function balanceOf(wallet: string): Promise<bigint> {
  const { rows } = await db.pg.query<{ balance: string }>('SELECT balance::text FROM wallets WHERE id = $1', [wallet]);
  return BigInt(rows[0]?.balance ?? 'NaN');
}

async function count(sql: string, operationId: string): Promise<number> {
  const { rows } = await db.pg.query<{ n: number }>(sql, [operationId]);
  return rows[0]?.n ?? -1;
}

/**
 * An intruder inserts `operationId`'s record without the advisory lock and holds it uncommitted;
 * `call` decides the same operation, passes its check (the row is not visible yet), moves the
 * money and reaches its INSERT, which waits; the intruder commits. Returns what the call did
 * (the outcome of its first row, or the error's code).
 */
async function raceAnIntruder(
  operationId: string,
  call: (client: pg.PoolClient) => Promise<{ rows: { outcome: string }[] }>,
): Promise<{ outcome: string } | { code: string }> {
  const intruder = await db.pg.connect();
  const decider = await db.pg.connect();
  try {
    await intruder.query('BEGIN');
    await intruder.query(
      `INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, status, fence)
       VALUES ($1, $2, 'w1', 'w2', $3, 'applied', $4)`,
      [operationId, HASH, AMOUNT.toString(), FENCE.toString()],
    );
    const pid = (await decider.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    if (pid === undefined) throw new Error('no backend pid');
    const result = call(decider).then(
      ({ rows }) => ({ outcome: rows[0]?.outcome ?? 'none' }),
      (err: { code?: string }) => ({ code: err.code ?? 'none' }),
    );
    await waitUntilBlocked(db.pg, pid, LOCK_WAIT_TIMEOUT_MS);
    await intruder.query('COMMIT');
    return await result;
  } finally {
    intruder.release();
    decider.release();
  }
}

describe("apply_transfer()'s record with the idempotency check on", () => {
  it('fails the call on a record written past the advisory lock, and moves no money', async () => {
    const result = await raceAnIntruder('intruded', (c) => decide(c, 'apply_transfer', 'intruded'));
    expect(result).toEqual({ code: '23505' });
    expect(await balanceOf('w1')).toBe(BALANCE);
    expect(await balanceOf('w2')).toBe(BALANCE);
    expect(await count(DEBITS, 'intruded')).toBe(0);
    expect(await count(EVENTS, 'intruded')).toBe(0);
  });

  it('control: the previous body (ON CONFLICT DO NOTHING) moves the money and keeps no record of its own', async () => {
    const result = await raceAnIntruder('intruded-before', (c) => decide(c, PREVIOUS_FUNCTION, 'intruded-before'));
    expect(result).toEqual({ outcome: 'applied' });
    expect(await balanceOf('w1')).toBe(BALANCE - AMOUNT);
    expect(await count(DEBITS, 'intruded-before')).toBe(1);
    expect(await count(EVENTS, 'intruded-before')).toBe(0);
  });

  it('records a first delivery and answers a second as a duplicate', async () => {
    const client = await db.pg.connect();
    try {
      expect((await decide(client, 'apply_transfer', 'once')).rows[0]?.outcome).toBe('applied');
      expect((await decide(client, 'apply_transfer', 'once')).rows[0]?.outcome).toBe('duplicate');
    } finally {
      client.release();
    }
    expect(await balanceOf('w1')).toBe(BALANCE - AMOUNT);
    expect(await count(RECORDS, 'once')).toBe(1);
  });
});

describe("apply_transfer()'s record with the idempotency check off (the negative control)", () => {
  it('moves the money again on a second delivery and keeps the first record', async () => {
    const client = await db.pg.connect();
    try {
      expect((await decide(client, 'apply_transfer_unsafe', 'twice', false)).rows[0]?.outcome).toBe('applied');
      expect((await decide(client, 'apply_transfer_unsafe', 'twice', false)).rows[0]?.outcome).toBe('applied');
    } finally {
      client.release();
    }
    expect(await balanceOf('w1')).toBe(BALANCE - 2n * AMOUNT);
    expect(await count(RECORDS, 'twice')).toBe(1);
    expect(await count(EVENTS, 'twice')).toBe(1);
  });
});

describe("apply_transfers()'s records with the idempotency check on", () => {
  it('fails the whole call on a record written past an advisory lock, and moves no money', async () => {
    const result = await raceAnIntruder('b-intruded', (c) =>
      decideBatch(c, 'apply_transfers', [
        ['b-intruded', 'w1', 'w2'],
        ['b-clean', 'w3', 'w4'],
      ]),
    );
    expect(result).toEqual({ code: '23505' });
    for (const wallet of ['w1', 'w2', 'w3', 'w4']) expect(await balanceOf(wallet)).toBe(BALANCE);
    expect(await count(DEBITS, 'b-intruded')).toBe(0);
    expect(await count(RECORDS, 'b-clean')).toBe(0);
    expect(await count(EVENTS, 'b-clean')).toBe(0);
  });

  it('control: the previous body (ON CONFLICT DO NOTHING) moves the money and keeps no record of its own', async () => {
    const result = await raceAnIntruder('b-before', (c) =>
      decideBatch(c, PREVIOUS_BATCH_FUNCTION, [
        ['b-before', 'w1', 'w2'],
        ['b-clean-before', 'w3', 'w4'],
      ]),
    );
    expect(result).toEqual({ outcome: 'applied' });
    expect(await balanceOf('w1')).toBe(BALANCE - AMOUNT);
    expect(await count(DEBITS, 'b-before')).toBe(1);
    expect(await count(EVENTS, 'b-before')).toBe(0);
  });

  it('answers a twin inside the batch and a later delivery as duplicates, one record each', async () => {
    const client = await db.pg.connect();
    try {
      const first = await decideBatch(client, 'apply_transfers', [
        ['b-twin', 'w1', 'w2'],
        ['b-twin', 'w1', 'w2'],
        ['b-other', 'w3', 'w4'],
      ]);
      expect(first.rows.map((r) => r.outcome)).toEqual(['applied', 'duplicate', 'applied']);
      const again = await decideBatch(client, 'apply_transfers', [
        ['b-twin', 'w1', 'w2'],
        ['b-other', 'w3', 'w4'],
      ]);
      expect(again.rows.map((r) => r.outcome)).toEqual(['duplicate', 'duplicate']);
    } finally {
      client.release();
    }
    expect(await balanceOf('w1')).toBe(BALANCE - AMOUNT);
    expect(await balanceOf('w3')).toBe(BALANCE - AMOUNT);
    expect(await count(RECORDS, 'b-twin')).toBe(1);
    expect(await count(EVENTS, 'b-twin')).toBe(1);
  });
});

describe("apply_transfers()'s records with the idempotency check off (the negative control)", () => {
  it('moves the money again for a twin and keeps the first record', async () => {
    const client = await db.pg.connect();
    try {
      const twice = await decideBatch(
        client,
        'apply_transfers_unsafe',
        [
          ['b-twice', 'w1', 'w2'],
          ['b-twice', 'w1', 'w2'],
        ],
        false,
      );
      expect(twice.rows.map((r) => r.outcome)).toEqual(['applied', 'applied']);
    } finally {
      client.release();
    }
    expect(await balanceOf('w1')).toBe(BALANCE - 2n * AMOUNT);
    expect(await count(RECORDS, 'b-twice')).toBe(1);
    expect(await count(EVENTS, 'b-twice')).toBe(1);
  });
});
