// The intake run's checker rules (harness/chaos/intake-checks.ts) on synthetic data in a
// private database: requests through the real intake, decisions through the real decision
// (which marks the request decided and appends its event), the feed sequenced and read back from
// position 0. Each rule passes on the whole data and fails, naming what broke, when its property
// is broken: a transfer acknowledged and never decided, a decision whose event is missing, a gap
// and a repeat in the feed's positions, a conflict not reported or reported twice or with the
// wrong body, a request the intake refused that left a row, a give-up with another body than its
// request's, and a feed position a reader saw with another event than the final feed holds.
// The same rules on hand-made rows alone, with no database: intake-invariants.test.ts.
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { RefusedRequest } from '../../../harness/chaos/chaos-intake.ts';
import { runInvariant } from '../../../harness/chaos/check-result.ts';
import { type FeedObservation, FeedReaders } from '../../../harness/chaos/feed-readers.ts';
import {
  conflictEventsCheck,
  givenUpBodyCheck,
  observedPositionsCheck,
  runIntakeChecks,
} from '../../../harness/chaos/intake-checks.ts';
import {
  buildIntakeFacts,
  type IntakeCheckInput,
  readDecisions,
  readRequests,
  readWholeFeed,
  sequenceWholeFeed,
} from '../../../harness/chaos/intake-state.ts';
import { IntakeConflictError } from '../../../src/errors.ts';
import { requestTransfers } from '../../../src/intake/intake.ts';
import { type OutcomeEvent, readOutcomes, sequenceOutcomeFeed } from '../../../src/intake/outcome-feed.ts';
import { applyTransfers } from '../../../src/ledger/apply-transfer.ts';
import { requestHash } from '../../../src/ledger/request-hash.ts';
import { seedWallets } from '../../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../../support/test-db.ts';

let db: TestDatabase;
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase('ft_intake_checks');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client.end();
  await db.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 10_000n, prefix: 'w', currency: 'EUR' });
});

const OPS = ['op-a', 'op-b', 'op-c'];
const hashOf = (amount: bigint) =>
  requestHash({ operationId: 'x', from: 'w1', to: 'w2', amountMinor: amount, currency: null });

async function request(ops: readonly string[], amount = '10'): Promise<void> {
  await client.query('BEGIN');
  try {
    await requestTransfers(
      client,
      ops.map((operationId) => ({ operationId, from: 'w1', to: 'w2', amount })),
      1_000_000n,
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK');
    throw err;
  }
}

const requestAll = () => request(OPS);

async function decide(ops: readonly string[], amountMinor = 10n): Promise<void> {
  await applyTransfers(
    db.prisma,
    ops.map((operationId) => ({
      request: { operationId, from: 'w1', to: 'w2', amountMinor, currency: null },
      fence: 1n,
      leaseId: leaseIdFor(1n),
    })),
  );
}

/** The checker's input for operations the intake acknowledged with the body of 10. */
function input(
  acknowledged: readonly string[],
  extra: Partial<IntakeCheckInput> = {},
  requestedOps: readonly string[] = acknowledged,
): IntakeCheckInput {
  return {
    direct: false,
    acknowledged: new Set(acknowledged),
    requested: new Map(requestedOps.map((op) => [op, new Set([hashOf(10n)])])),
    refused: [],
    observations: [],
    ...extra,
  };
}

const failing = (checks: { name: string; ok: boolean; violations: number }[]) =>
  checks.filter((c) => !c.ok).map((c) => [c.name.split(' (')[0], c.violations]);

const event = (
  position: number,
  operationId: string,
  kind: OutcomeEvent['kind'] = 'applied',
  amountMinor = 10n,
): OutcomeEvent => ({
  position: BigInt(position),
  operationId,
  kind,
  reason: null,
  from: 'w1',
  to: 'w2',
  amountMinor,
  currency: null,
  decidedAt: new Date(0),
  operation: 'transfer',
  originalId: null,
  detail: null,
  metadata: null,
});

const observation = (e: OutcomeEvent, ended: FeedObservation['ended'] = 'rollback'): FeedObservation => ({
  position: e.position,
  event: e,
  reader: 1,
  ended,
  atMs: 5,
});

describe('intake checks', () => {
  it('pass when every acknowledged transfer is decided once with one event, and the feed is 1..N', async () => {
    await requestAll();
    await decide(OPS);
    const { checks, figures } = await runIntakeChecks(client, input(OPS), []);
    expect(failing(checks)).toEqual([]);
    expect(checks).toHaveLength(7);
    expect(figures).toMatchObject({ requests: 3, decided: 3, open: 0, lostTransfers: 0, feedEvents: 3 });
    expect(figures).toMatchObject({ sequencedAtCheck: 3, conflictEvents: 0, requestsOfAnotherBody: 0 });
    expect(figures.feedLastPosition).toBe(3);
  });

  it('sequence the whole feed first: reading alone no longer gives positions', async () => {
    await requestAll();
    await decide(OPS);
    expect(await readWholeFeed(client)).toEqual([]);
    expect(await sequenceWholeFeed(client)).toBe(3);
    expect(await sequenceWholeFeed(client)).toBe(0);
    expect((await readWholeFeed(client)).map((e) => e.position)).toEqual([1n, 2n, 3n]);
  });

  it('report an acknowledged transfer never decided as lost, and the intake row still open', async () => {
    await requestAll();
    await decide(['op-a', 'op-b']);
    const { checks, figures } = await runIntakeChecks(client, input(OPS), []);
    expect(failing(checks)).toEqual([
      ['every transfer acknowledged to the producer was decided', 1],
      ['every requested transfer was decided exactly once', 1],
    ]);
    expect(checks[0]?.counterexamples).toEqual([{ operationId: 'op-c', problem: 'lost: never decided' }]);
    expect(figures.lostTransfers).toBe(1);
  });

  it('report lost transfers of a direct-enqueue producer, which has no intake rows', async () => {
    await decide(['op-a']);
    const { checks } = await runIntakeChecks(client, { ...input(OPS, {}, []), direct: true }, []);
    expect(checks).toHaveLength(4);
    expect(failing(checks)).toEqual([['every transfer acknowledged to the producer was decided', 2]]);
  });

  it('report a decision whose event is gone, and the gap it leaves in the feed', async () => {
    await requestAll();
    await decide(OPS);
    await sequenceWholeFeed(client);
    expect((await readWholeFeed(client)).map((e) => e.position)).toEqual([1n, 2n, 3n]);
    // The owner may; no role of the product can: the feed is append-only in use.
    await client.query('DELETE FROM outcome_events WHERE position = 2');
    const { checks } = await runIntakeChecks(client, input(OPS), []);
    expect(failing(checks)).toEqual([
      ['every decision has exactly one outcome event', 1],
      ['the outcome feed read from position 0 holds positions 1..N in order, no gap, no repeat', 1],
    ]);
  });
});

describe('both doors: conflicts reported once', () => {
  // op-x: requested with 10, decided straight with 11 (a conflict event, with the request's body);
  // op-y: requested with 10, decided straight with 10 (closed, one decision event, no conflict);
  // op-z: decided straight with 11, then requested with 10 (refused at once, no row);
  // op-w: decided straight with 10, then requested with 10 (a row, decided at once).
  async function bothDoors(): Promise<{ refused: RefusedRequest[] }> {
    await request(['op-x', 'op-y']);
    await decide(['op-x', 'op-z'], 11n);
    await decide(['op-y', 'op-w'], 10n);
    await expect(request(['op-z'])).rejects.toBeInstanceOf(IntakeConflictError);
    await request(['op-w']);
    return { refused: [{ operationId: 'op-z', hash: hashOf(10n), seq: 7 }] };
  }
  const ACKED = ['op-x', 'op-y', 'op-z', 'op-w'];

  it('pass on what the two doors leave: every request closed, one conflict event for the request of another body', async () => {
    const { refused } = await bothDoors();
    const { checks, figures } = await runIntakeChecks(client, input(ACKED, { refused }, ['op-x', 'op-y', 'op-w']), []);
    expect(failing(checks)).toEqual([]);
    expect(figures).toMatchObject({ requests: 3, decided: 3, open: 0, conflictEvents: 1, requestsOfAnotherBody: 1 });
    expect(figures).toMatchObject({ refusedAtRequest: 1, feedEvents: 5 });
    const conflict = (await readWholeFeed(client)).filter((e) => e.kind === 'conflict');
    expect(conflict).toMatchObject([{ operationId: 'op-x', amountMinor: 10n }]);
  });

  it('catch a conflict event missing, reported twice, with the record body, or for a request of the same body', async () => {
    const { refused } = await bothDoors();
    await sequenceWholeFeed(client);
    const events = await readWholeFeed(client);
    const requests = await readRequests(client);
    const decisions = await readDecisions(client);
    const facts = buildIntakeFacts({ ...input(['op-x', 'op-y', 'op-w']), refused }, { requests, decisions, events });
    const judge = (list: readonly OutcomeEvent[]) => runInvariant(conflictEventsCheck, { ...facts, events: list });
    expect(judge(events).ok).toBe(true);

    const conflict = events.find((e) => e.kind === 'conflict') as OutcomeEvent;
    const others = events.filter((e) => e !== conflict);
    expect(judge(others).counterexamples).toMatchObject([
      { operationId: 'op-x', problem: 'request of another body, no conflict event' },
    ]);
    expect(judge([...events, { ...conflict, position: 99n }]).counterexamples).toMatchObject([
      { operationId: 'op-x', events: `${conflict.position} 99`, problem: 'conflict reported more than once' },
    ]);
    expect(judge([...others, { ...conflict, amountMinor: 11n }]).counterexamples).toMatchObject([
      {
        operationId: 'op-x',
        event: 'w1->w2 11',
        request: 'w1->w2 10',
        problem: "conflict event without the request's body",
      },
    ]);
    expect(judge([...events, event(99, 'op-y', 'conflict')]).counterexamples).toMatchObject([
      { operationId: 'op-y', problem: "conflict event for a request of the record's body" },
    ]);
    expect(judge([...events, event(99, 'op-q', 'conflict')]).counterexamples).toMatchObject([
      { operationId: 'op-q', problem: 'conflict event without a request' },
    ]);
  });

  it('catch a refused request that left a row, and a refusal nothing justified', async () => {
    const { refused } = await bothDoors();
    // The row the refusal rolled back, as if it had stayed (the owner may write it).
    await client.query(
      `INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount, decided_at)
       VALUES ('op-z', $1, 'w1', 'w2', 10, now())`,
      [hashOf(10n)],
    );
    const { checks } = await runIntakeChecks(client, input(ACKED, { refused }, ['op-x', 'op-y', 'op-w']), []);
    // The row is also a request of another body than the record's that no conflict event answers.
    expect(failing(checks).map(([name, n]) => [String(name).slice(0, 29), n])).toEqual([
      ['every request of another body', 2],
    ]);
    const check = checks.find((c) => c.name.startsWith('every request of another body'));
    expect(check?.counterexamples).toMatchObject([
      { operationId: 'op-z', problem: 'request of another body, no conflict event' },
      { operationId: 'op-z', problem: 'refused at once, yet a request row exists that the intake never acknowledged' },
    ]);
  });
});

describe('give-ups carry the request body', () => {
  it('pass on a give-up recorded by the product, and catch one with another body or without a request', async () => {
    await request(['op-g']);
    const { rows } = await client.query<{ recorded: boolean }>(
      'SELECT record_transfer_given_up($1, $2, $3, 0) AS recorded',
      ['op-g', hashOf(10n), 'attempts exhausted'],
    );
    expect(rows[0]?.recorded).toBe(true);
    await sequenceWholeFeed(client);
    const events = await readWholeFeed(client);
    expect(events).toMatchObject([{ operationId: 'op-g', kind: 'given_up', amountMinor: 10n }]);
    const requests = await readRequests(client);
    const judge = (list: readonly OutcomeEvent[]) =>
      runInvariant(givenUpBodyCheck, buildIntakeFacts(input([]), { requests, decisions: [], events: list }));
    expect(judge(events).ok).toBe(true);

    const forged = judge([{ ...(events[0] as OutcomeEvent), amountMinor: 11n }]);
    expect(forged.counterexamples).toEqual([
      { operationId: 'op-g', position: '1', event: 'w1->w2 11', request: 'w1->w2 10' },
    ]);
    const orphan = judge([event(2, 'op-h', 'given_up')]);
    expect(orphan.counterexamples).toEqual([
      { operationId: 'op-h', position: '2', problem: 'given_up event without a request' },
    ]);
  });
});

describe('feed positions observed during the run', () => {
  it('readers of the read role see only committed positions, and a reader that sequences in its transaction is caught', async () => {
    await request(['op-1', 'op-2', 'op-3']);
    await decide(['op-1', 'op-2']);
    const readers = await FeedReaders.start(db.url, 1);
    try {
      await sequenceWholeFeed(client);
      await decide(['op-3']);
      await sequenceWholeFeed(client);
      const deadline = performance.now() + 10_000;
      while (readers.figures().positionsObserved < 3 && performance.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await readers.stop();
    }
    const figures = readers.figures();
    expect(figures).toMatchObject({ readers: 2, positionsObserved: 3, lastPositionObserved: 3 });
    expect(figures.reads).toBeGreaterThan(0);
    const final = await readWholeFeed(client);
    expect(runInvariant(observedPositionsCheck, { observations: readers.observations(), events: final }).ok).toBe(true);

    // What reading used to do (sequencing inside the reader's transaction), done by the owner:
    // an event whose id came first commits after the reader was handed a position, and the
    // reader's rollback gives that position to it.
    await db.truncateAll();
    await seedWallets(db.prisma, { wallets: 3, balanceMinor: 10_000n, prefix: 'w', currency: 'EUR' });
    const late = new pg.Client({ connectionString: db.url });
    await late.connect();
    try {
      await late.query('BEGIN');
      await late.query(
        `INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
         VALUES ('op-early-id', 'applied', NULL, 'w1', 'w2', 10, NULL)`,
      );
      await decide(['op-later-id']);
      await client.query('BEGIN');
      expect(await sequenceOutcomeFeed(client)).toBe(1);
      const shown = await readOutcomes(client, 0n);
      await client.query('ROLLBACK');
      await late.query('COMMIT');
      await sequenceWholeFeed(client);
      const after = await readWholeFeed(client);
      expect(shown.map((e) => [e.position, e.operationId])).toEqual([[1n, 'op-later-id']]);
      expect(after.map((e) => [e.position, e.operationId])).toEqual([
        [1n, 'op-early-id'],
        [2n, 'op-later-id'],
      ]);
      const observations = shown.map((e) => observation(e));
      const caught = runInvariant(observedPositionsCheck, { observations, events: after });
      expect(caught.counterexamples).toMatchObject([
        { position: '1', observed: 'op-later-id applied w1->w2 10', final: 'op-early-id applied w1->w2 10' },
      ]);
    } finally {
      await late.query('ROLLBACK').catch(() => undefined);
      await late.end();
    }
  });
});
