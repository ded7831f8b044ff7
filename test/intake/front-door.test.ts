// The front door's edges (issue 31), in SQL against a real PostgreSQL: a feed position once read
// never goes to another event, and no reader's transaction holds the sequencer; the sequencer
// refuses an isolation level it cannot number correctly in; a pruned position is refused; a
// give-up takes the stored request's body, once, and nothing for an operation nobody requested;
// the two doors (intake and BullMQ straight) are serialised on the operation, and a request whose
// operation was decided through the other door is closed, with a conflict event when the bodies
// differ. Each of these failed on the code before the front-door-edges migration.
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IntakeConflictError, OutcomeFeedPrunedError } from '../../src/errors.ts';
import { requestTransfer } from '../../src/intake/intake.ts';
import { type OutcomeEvent, readOutcomes, sequenceOutcomeFeed } from '../../src/intake/outcome-feed.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { TransferRequest, TransferWire } from '../../src/ledger/transfer-request.ts';
import { settledRead } from '../support/feed.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const AMOUNT_MAX = 1_000_000n;
/** Long enough for a call that is not blocked to have finished on this machine. */
const BLOCKED_FOR_MS = 400;
let db: TestDatabase;
const clients: pg.PoolClient[] = [];

async function session(): Promise<pg.PoolClient> {
  const c = await db.pg.connect();
  clients.push(c);
  return c;
}

const body = (operationId: string, amount: bigint, from = 'w1', to = 'w2'): TransferRequest => ({
  operationId,
  from,
  to,
  amountMinor: amount,
  currency: null,
});
const wireOf = (r: TransferRequest): TransferWire => ({
  operationId: r.operationId,
  from: r.from,
  to: r.to,
  amount: r.amountMinor.toString(),
});

/** The decision as a worker sends it, on this session (so a test can hold its transaction open). */
async function decide(client: pg.ClientBase, r: TransferRequest, fence = 1n): Promise<string> {
  const { rows } = await client.query<{ outcome: string }>(
    `SELECT outcome FROM apply_transfers($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
                                         $7::bigint[], $8::uuid[])`,
    [
      [r.operationId],
      [requestHash(r)],
      [r.from],
      [r.to],
      [r.amountMinor.toString()],
      [null],
      [fence.toString()],
      [leaseIdFor(fence)],
    ],
  );
  return rows[0]?.outcome ?? 'none';
}

async function requestState(operationId: string): Promise<{ decided: boolean; givenUp: boolean } | null> {
  const { rows } = await db.pg.query<{ decided: boolean; given_up: boolean }>(
    'SELECT decided_at IS NOT NULL AS decided, given_up_at IS NOT NULL AS given_up FROM transfer_requests WHERE operation_id = $1',
    [operationId],
  );
  const row = rows[0];
  return row === undefined ? null : { decided: row.decided, givenUp: row.given_up };
}

const shape = (e: OutcomeEvent) => [e.position, e.operationId, e.kind, e.amountMinor] as const;

/** Resolves with 'done' or 'blocked', whichever comes first. */
async function settlesWithin<T>(p: Promise<T>, ms: number): Promise<'done' | 'blocked'> {
  return Promise.race([
    p.then(() => 'done' as const),
    new Promise<'blocked'>((r) => setTimeout(() => r('blocked'), ms)),
  ]);
}

beforeAll(async () => {
  db = await createTestDatabase('ft_front');
});

afterAll(async () => {
  for (const c of clients) c.release();
  await db.drop();
});

beforeEach(async () => {
  for (const c of clients.splice(0)) {
    await c.query('ROLLBACK').catch(() => undefined);
    c.release();
  }
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 6, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

describe('a feed position once read never goes to another event', () => {
  it('a reader inside a transaction that rolls back was handed only positions that stay what they were', async () => {
    await decide(db.pg as unknown as pg.ClientBase, body('d0', 1n, 'w5', 'w6'));
    await sequenceOutcomeFeed(db.pg);
    // D1 draws the lower pending id and stays open; D2 commits after it.
    const d1 = await session();
    const d2 = await session();
    await d1.query('BEGIN');
    await d2.query('BEGIN');
    await decide(d1, body('d1', 1n, 'w1', 'w2'));
    await decide(d2, body('d2', 1n, 'w3', 'w4'));
    await d2.query('COMMIT');

    const reader = await session();
    await reader.query('BEGIN');
    const seen = await readOutcomes(reader, 0n);
    await reader.query('ROLLBACK');
    await d1.query('COMMIT');

    const final = await settledRead(db.pg, 0n);
    expect(seen.length).toBeGreaterThanOrEqual(1);
    const byPosition = new Map(final.map((e) => [e.position, shape(e)]));
    for (const e of seen) expect(byPosition.get(e.position), `position ${e.position}`).toEqual(shape(e));
    expect(final.map((e) => e.operationId).sort()).toEqual(['d0', 'd1', 'd2']);
  });

  it("a reader's open transaction does not hold the sequencer: others sequence while it stays open", async () => {
    const reader = await session();
    await reader.query('BEGIN');
    await readOutcomes(reader, 0n);
    await decide(db.pg as unknown as pg.ClientBase, body('after-read', 1n));
    // As a worker's timer would, while the reader idles in its transaction.
    expect(await sequenceOutcomeFeed(db.pg)).toBe(1);
    await reader.query('COMMIT');
    expect((await readOutcomes(db.pg, 0n)).map((e) => e.operationId)).toEqual(['after-read']);
  });
});

describe('the sequencer and the prune say what is wrong', () => {
  it('refuses to sequence in REPEATABLE READ (it would do nothing, and the feed would stall in silence)', async () => {
    await decide(db.pg as unknown as pg.ClientBase, body('rr-1', 1n));
    const c = await session();
    await c.query("SET default_transaction_isolation = 'repeatable read'");
    await expect(sequenceOutcomeFeed(c)).rejects.toThrow(/runs only in READ COMMITTED, not repeatable read/);
    await c.query("SET default_transaction_isolation = 'read committed'");
    expect(await sequenceOutcomeFeed(c)).toBe(1);
  });

  it('answers a pruned position with an error that names the first kept one', async () => {
    for (const n of [1, 2, 3, 4]) await decide(db.pg as unknown as pg.ClientBase, body(`p-${n}`, 1n));
    await sequenceOutcomeFeed(db.pg);
    await db.pg.query('DELETE FROM outcome_events WHERE position < 3');
    const refused = await readOutcomes(db.pg, 1n).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(OutcomeFeedPrunedError);
    expect(refused).toMatchObject({ after: 1n, firstKept: 3n });
    expect((await readOutcomes(db.pg, 2n)).map((e) => e.position)).toEqual([3n, 4n]);
  });
});

describe('a give-up cannot be forged', () => {
  let asWorker: pg.Client;

  beforeAll(async () => {
    const role = await db.workerRole();
    asWorker = new pg.Client({ connectionString: role.url });
    await asWorker.connect();
  });

  afterAll(async () => {
    await asWorker.end();
  });

  // Never sent (send_count 0), unless a test moves the send on.
  const giveUp = async (operationId: string, hash: string, sendCount: number | null = 0) =>
    (
      await asWorker.query<{ recorded: boolean }>('SELECT record_transfer_given_up($1, $2, $3, $4) AS recorded', [
        operationId,
        hash,
        'transient_error: attempts ran out',
        sendCount,
      ])
    ).rows[0]?.recorded;

  it('as a worker role: the event takes the stored body, once, only with the body the request has', async () => {
    const asked = body('g-1', 5n);
    await requestTransfer(db.pg, wireOf(asked), AMOUNT_MAX);
    const forged = body('g-1', 999_999_999n, 'nowhere-1', 'nowhere-2');
    expect(await giveUp('g-1', requestHash(forged))).toBe(false);
    expect(await requestState('g-1')).toEqual({ decided: false, givenUp: false });
    expect(await giveUp('g-1', requestHash(asked))).toBe(true);
    expect(await giveUp('g-1', requestHash(asked))).toBe(false);
    const events = await settledRead(db.pg, 0n);
    expect(events.map((e) => [e.operationId, e.kind, e.from, e.to, e.amountMinor])).toEqual([
      ['g-1', 'given_up', 'w1', 'w2', 5n],
    ]);
    expect(await requestState('g-1')).toEqual({ decided: false, givenUp: true });
  });

  it('as a worker role: nothing for an operation nobody requested, however often it is called', async () => {
    for (let i = 0; i < 3; i++) expect(await giveUp('nobody', requestHash(body('nobody', 999_999_999n)))).toBe(false);
    expect(await settledRead(db.pg, 0n)).toEqual([]);
  });

  it('as a worker role: a give-up without the send it belongs to is refused (22023)', async () => {
    const asked = body('g-3', 5n);
    await requestTransfer(db.pg, wireOf(asked), AMOUNT_MAX);
    await expect(giveUp('g-3', requestHash(asked), null)).rejects.toMatchObject({ code: '22023' });
    expect(await requestState('g-3')).toEqual({ decided: false, givenUp: false });
  });

  it('a give-up seen at an earlier send (before a redrive sent it again) parks nothing', async () => {
    const asked = body('g-2', 5n);
    await requestTransfer(db.pg, wireOf(asked), AMOUNT_MAX);
    await db.pg.query("UPDATE transfer_requests SET send_count = 3 WHERE operation_id = 'g-2'");
    expect(await giveUp('g-2', requestHash(asked), 2)).toBe(false);
    expect(await giveUp('g-2', requestHash(asked), 3)).toBe(true);
  });
});

describe('the two doors are serialised on the operation', () => {
  it('a straight decision waits for the open producer transaction, then closes its request (same body: no extra event)', async () => {
    const producer = await session();
    await producer.query('BEGIN');
    expect(await requestTransfer(producer, wireOf(body('both-1', 5n)), AMOUNT_MAX)).toBe('requested');
    const straight = decide(await session(), body('both-1', 5n));
    expect(await settlesWithin(straight, BLOCKED_FOR_MS)).toBe('blocked');
    await producer.query('COMMIT');
    expect(await straight).toBe('applied');
    expect(await requestState('both-1')).toEqual({ decided: true, givenUp: false });
    expect((await settledRead(db.pg, 0n)).map((e) => [e.operationId, e.kind, e.amountMinor])).toEqual([
      ['both-1', 'applied', 5n],
    ]);
  });

  it('with another body: the straight body is decided, the request closed with one conflict event of its own body', async () => {
    const producer = await session();
    await producer.query('BEGIN');
    await requestTransfer(producer, wireOf(body('both-2', 5n)), AMOUNT_MAX);
    const straight = decide(await session(), body('both-2', 7n));
    await producer.query('COMMIT');
    expect(await straight).toBe('applied');
    expect(await requestState('both-2')).toEqual({ decided: true, givenUp: false });
    // The request's own job, sent by a relay, is a conflict and adds no second conflict event.
    expect(await decide(db.pg as unknown as pg.ClientBase, body('both-2', 5n), 2n)).toBe('conflict');
    expect((await settledRead(db.pg, 0n)).map((e) => [e.operationId, e.kind, e.amountMinor])).toEqual([
      ['both-2', 'applied', 7n],
      ['both-2', 'conflict', 5n],
    ]);
  });

  it('a request made while the other door is deciding waits for it, then answers conflict at once', async () => {
    const decider = await session();
    await decider.query('BEGIN');
    expect(await decide(decider, body('both-3', 7n))).toBe('applied');
    const asked = requestTransfer(await session(), wireOf(body('both-3', 5n)), AMOUNT_MAX);
    const answered = asked.then(
      (a) => a,
      (err: unknown) => err,
    );
    expect(await settlesWithin(answered, BLOCKED_FOR_MS)).toBe('blocked');
    await decider.query('COMMIT');
    expect(await answered).toBeInstanceOf(IntakeConflictError);
    expect(await requestState('both-3')).toBeNull();
  });

  it('a producer in REPEATABLE READ that missed the decision: the next delivery of its job closes the request', async () => {
    const producer = await session();
    await producer.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await producer.query('SELECT 1 FROM wallets LIMIT 1'); // its snapshot, taken before the decision
    await applyTransfers(db.prisma, [{ request: body('rr-2', 5n), fence: 1n, leaseId: leaseIdFor(1n) }]);
    expect(await requestTransfer(producer, wireOf(body('rr-2', 5n)), AMOUNT_MAX)).toBe('requested');
    await producer.query('COMMIT');
    expect(await requestState('rr-2')).toEqual({ decided: false, givenUp: false });
    // The relay sends it; the decision finds the record (a duplicate) and closes the request.
    const [again] = await applyTransfers(db.prisma, [
      { request: body('rr-2', 5n), fence: 2n, leaseId: leaseIdFor(2n) },
    ]);
    expect(again?.outcome).toBe('duplicate');
    expect(await requestState('rr-2')).toEqual({ decided: true, givenUp: false });
    expect((await settledRead(db.pg, 0n)).map((e) => [e.operationId, e.kind])).toEqual([['rr-2', 'applied']]);
  });
});
