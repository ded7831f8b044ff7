// The checks an intake chaos run adds (`--intake`, `--unsafe direct-enqueue`), on the database
// after the drain, and the intake's figures for the report:
// - none lost: every transfer the producer saw acknowledged (its intake transaction committed;
//   with direct-enqueue or a both-doors pair's straight half, its BullMQ add answered) was decided;
// - the intake: every requested transfer is decided, with exactly one decision (transfers row);
// - the feed: every decision has exactly one applied/rejected event, of its status, and none
//   without a decision; read from position 0 in pages, the positions are 1..N, no gap, no repeat;
// - conflicts reported once: a request whose body differs from its operation's record has
//   exactly one 'conflict' event, with the request's body; a request of the record's body none;
//   a request refused at once (IntakeConflictError) left no row;
// - give-ups: every 'given_up' event has its request's body;
// - observed positions: every (position, event) the feed's readers were shown during the run
//   (feed-readers.ts) is the final feed's event at that position.
// The whole feed is sequenced first (sequenceWholeFeed): reading does not sequence it, and the
// workers and relays that do are stopped by then.
// The figures count the adds lost in lossy failovers (the jobs the new master lacked) and how
// each one's transfer was decided in the end.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import {
  OUTCOME_READ_LIMIT_MAX,
  type OutcomeEvent,
  readOutcomes,
  sequenceOutcomeFeed,
} from '../../src/intake/outcome-feed.ts';
import type { RefusedRequest } from './chaos-intake.ts';
import { Check, type CheckResult } from './checker.ts';
import type { FaultRecord } from './faults.ts';
import { eventFingerprint, type FeedObservation } from './feed-readers.ts';

/** How long sequenceWholeFeed() waits for the sequencer's lock (a session of a stopped process ending). */
export const SEQUENCE_WHOLE_FEED_TIMEOUT_MS = 30_000;
const SEQUENCE_RETRY_MS = 200;

export interface IntakeCheckInput {
  /** The producer added to BullMQ straight (the negative control): no intake rows are expected. */
  readonly direct: boolean;
  /** Operations acknowledged to the producer (by the intake, or by BullMQ for a straight add). */
  readonly acknowledged: ReadonlySet<string>;
  /** Operations whose intake transaction committed, with the bodies (request hashes) it committed. */
  readonly requested: ReadonlyMap<string, ReadonlySet<string>>;
  /** Requests the intake refused at once. */
  readonly refused: readonly RefusedRequest[];
  /** What the feed's readers were shown during the run. */
  readonly observations: readonly FeedObservation[];
}

/** How the transfers of the adds one lossy failover lost were decided in the end. */
export interface FailoverLossFigures {
  readonly faultId: number;
  readonly slots: string;
  /** Job hashes of the queue shards the old master held, and of those the ones the new master lacked. */
  readonly jobsBefore: number;
  readonly jobsLost: number;
  /** Decided after a relay sent it again and found no job (lost_count ≥ 1). */
  readonly resentAndDecided: number;
  /** Decided without a re-send that found it missing (another delivery of the operation decided it). */
  readonly decidedOtherwise: number;
  /** Never decided: lost transfers. */
  readonly neverDecided: number;
}

export interface IntakeFigures {
  readonly producer: 'intake' | 'direct-enqueue';
  readonly acknowledged: number;
  /** transfer_requests rows, decided ones, open ones, given-up ones. */
  readonly requests: number;
  readonly decided: number;
  readonly open: number;
  readonly givenUp: number;
  /** Sends by the relays in all (sum of send_count), and those after the first (re-sends). */
  readonly sends: number;
  readonly resends: number;
  /** Re-sends that found no job (sum of lost_count), and the requests that had at least one. */
  readonly resendsFindingNoJob: number;
  readonly requestsFoundLost: number;
  /** Acknowledged transfers never decided. */
  readonly lostTransfers: number;
  readonly feedEvents: number;
  readonly feedLastPosition: number;
  readonly givenUpEvents: number;
  readonly conflictEvents: number;
  /** Requests whose body differs from their operation's record (each owed one conflict event). */
  readonly requestsOfAnotherBody: number;
  /** Requests refused at once by the intake (IntakeConflictError). */
  readonly refusedAtRequest: number;
  /** Feed events the final sequencing moved (pending when the workers and relays stopped). */
  readonly sequencedAtCheck: number;
  /** (position, event) pairs the readers were shown, and the distinct positions among them. */
  readonly observations: number;
  readonly positionsObserved: number;
  readonly failoverLosses: readonly FailoverLossFigures[];
}

/** A request of the intake, its body with it. */
export interface RequestRow {
  operation_id: string;
  request_hash: string;
  from_wallet: string;
  to_wallet: string;
  /** Decimal, as PostgreSQL prints it. */
  amount: string;
  currency: string | null;
  decided: boolean;
  given_up: boolean;
  send_count: number;
  lost_count: number;
}

/** A decision: its status and the hash of the body it was decided with. */
export interface DecisionRow {
  operation_id: string;
  status: string;
  request_hash: string;
}

/**
 * Sequences every pending event (outcome_feed_sequence() until it moves nothing and nothing is
 * pending); answers how many it moved. For after the workers and the relays are stopped, on a
 * connection outside any transaction. Throws when events stay pending past the timeout (another
 * session holds the sequencer's lock): the feed read after it would be incomplete.
 */
export async function sequenceWholeFeed(
  client: pg.Pool | pg.ClientBase,
  timeoutMs = SEQUENCE_WHOLE_FEED_TIMEOUT_MS,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let moved = 0;
  for (;;) {
    for (let n = await sequenceOutcomeFeed(client); n > 0; n = await sequenceOutcomeFeed(client)) moved += n;
    const { rows } = await client.query<{ pending: string }>('SELECT count(*)::text AS pending FROM outcome_pending');
    const pending = Number(rows[0]?.pending ?? 0);
    if (pending === 0) return moved;
    if (performance.now() > deadline) {
      throw new Error(`the outcome feed still held ${pending} pending events after ${timeoutMs} ms of sequencing`);
    }
    await sleep(SEQUENCE_RETRY_MS);
  }
}

/** Every decision (transfers row). */
export async function readDecisions(client: pg.ClientBase): Promise<DecisionRow[]> {
  return (
    await client.query<DecisionRow>('SELECT operation_id, status, request_hash::text AS request_hash FROM transfers')
  ).rows;
}

/** Every request of the intake, with its body. */
export async function readRequests(client: pg.ClientBase): Promise<RequestRow[]> {
  return (
    await client.query<RequestRow>(
      `SELECT operation_id, request_hash::text AS request_hash, from_wallet, to_wallet, amount::text AS amount,
              currency::text AS currency, decided_at IS NOT NULL AS decided, given_up_at IS NOT NULL AS given_up,
              send_count, lost_count FROM transfer_requests`,
    )
  ).rows;
}

/** The whole feed from position 0, page by page (what is sequenced: see sequenceWholeFeed()). */
export async function readWholeFeed(client: pg.ClientBase, pageSize = OUTCOME_READ_LIMIT_MAX): Promise<OutcomeEvent[]> {
  const out: OutcomeEvent[] = [];
  let after = 0n;
  for (;;) {
    const page = await readOutcomes(client, after, pageSize);
    if (page.length === 0) return out;
    out.push(...page);
    after = page[page.length - 1]?.position ?? after;
  }
}

/** The feed is positions 1..N in order: no gap, no repeat. */
export function feedPositionsCheck(events: readonly OutcomeEvent[]): CheckResult {
  const check = new Check(
    'the outcome feed read from position 0 holds positions 1..N in order, no gap, no repeat',
    'exactly-once',
  );
  const seen = new Set<bigint>();
  events.forEach((e, i) => {
    const want = BigInt(i + 1);
    if (seen.has(e.position)) check.fail({ index: i, position: e.position.toString(), problem: 'repeated' });
    else if (e.position !== want)
      check.fail({ index: i, position: e.position.toString(), expected: want.toString(), problem: 'gap or order' });
    seen.add(e.position);
  });
  return check.result();
}

/** Each decision has exactly one applied/rejected event of its status, and no such event lacks a decision. */
export function decisionEventsCheck(
  decisions: readonly { operation_id: string; status: string }[],
  events: readonly OutcomeEvent[],
): CheckResult {
  const check = new Check(
    'every decision has exactly one outcome event (applied or rejected, as decided), and every such event a decision',
    'exactly-once',
  );
  const byOp = new Map<string, OutcomeEvent[]>();
  for (const e of events) {
    // given_up and conflict events are not decisions: givenUpBodyCheck() and conflictEventsCheck() judge them.
    if (e.kind !== 'applied' && e.kind !== 'rejected') continue;
    byOp.set(e.operationId, [...(byOp.get(e.operationId) ?? []), e]);
  }
  const decided = new Set<string>();
  for (const d of decisions) {
    decided.add(d.operation_id);
    const list = byOp.get(d.operation_id) ?? [];
    if (list.length !== 1 || list[0]?.kind !== d.status) {
      check.fail({
        operationId: d.operation_id,
        status: d.status,
        events: list.map((e) => `${e.position}:${e.kind}`).join(' ') || 'none',
      });
    }
  }
  for (const [op, list] of byOp) {
    if (!decided.has(op)) check.fail({ operationId: op, events: list.length, problem: 'event without a decision' });
  }
  return check.result();
}

/** Every acknowledged transfer has a decision. */
export function noneLostCheck(acknowledged: ReadonlySet<string>, decided: ReadonlySet<string>): CheckResult {
  const check = new Check(
    'every transfer acknowledged to the producer was decided (no acknowledged transfer lost)',
    'exactly-once',
  );
  for (const op of acknowledged) if (!decided.has(op)) check.fail({ operationId: op, problem: 'lost: never decided' });
  return check.result();
}

/**
 * Every requested transfer is decided, not given up, with exactly one decision; every one the
 * intake acknowledged (its transaction committed) is in the intake.
 */
export function intakeDecidedCheck(
  requests: readonly Pick<RequestRow, 'operation_id' | 'decided' | 'given_up'>[],
  decisionCount: ReadonlyMap<string, number>,
  acknowledged: Iterable<string>,
): CheckResult {
  const check = new Check(
    'every requested transfer was decided exactly once (the intake all decided, one transfers row each)',
    'exactly-once',
  );
  const requested = new Set<string>();
  for (const r of requests) {
    requested.add(r.operation_id);
    const n = decisionCount.get(r.operation_id) ?? 0;
    if (!r.decided || r.given_up || n !== 1) {
      check.fail({ operationId: r.operation_id, decided: r.decided, givenUp: r.given_up, decisions: n });
    }
  }
  for (const op of acknowledged) {
    if (!requested.has(op)) check.fail({ operationId: op, problem: 'acknowledged but not in the intake' });
  }
  return check.result();
}

/** The event carries the request's body: wallets, amount and currency. */
function sameBody(e: OutcomeEvent, r: RequestRow): boolean {
  return (
    e.from === r.from_wallet &&
    e.to === r.to_wallet &&
    e.amountMinor === (r.amount === null ? null : BigInt(r.amount)) &&
    (e.currency ?? null) === (r.currency === null ? null : r.currency.trim())
  );
}

function bodyOf(x: { from: string; to: string | null; amount: string | null; currency: string | null }): string {
  return `${x.from}->${x.to ?? ''} ${x.amount ?? ''}${x.currency === null ? '' : ` ${x.currency.trim()}`}`;
}

const eventBody = (e: OutcomeEvent) =>
  bodyOf({ from: e.from, to: e.to, amount: e.amountMinor?.toString() ?? null, currency: e.currency });
const requestBody = (r: RequestRow) =>
  bodyOf({ from: r.from_wallet, to: r.to_wallet, amount: r.amount, currency: r.currency });

/**
 * Conflicts reported once: a request whose body (hash) differs from its operation's record has
 * exactly one 'conflict' event, carrying the request's body; a request of the record's body has
 * none; no conflict event lacks a request. A request refused at once left no row: a row of its
 * operation, if any, has a body the intake acknowledged, and something justified the refusal (a
 * row or a record of another body).
 */
export function conflictEventsCheck(
  requests: readonly RequestRow[],
  decisions: readonly DecisionRow[],
  events: readonly OutcomeEvent[],
  refused: readonly RefusedRequest[],
  requested: ReadonlyMap<string, ReadonlySet<string>>,
): CheckResult {
  const check = new Check(
    "every request of another body than its operation's record has exactly one conflict event, with the request's body; " +
      'a request of the same body none; a request refused at once left no row',
    'exactly-once',
  );
  const recordHash = new Map(decisions.map((d) => [d.operation_id, d.request_hash]));
  const requestOf = new Map(requests.map((r) => [r.operation_id, r]));
  const conflicts = new Map<string, OutcomeEvent[]>();
  for (const e of events) {
    if (e.kind === 'conflict') conflicts.set(e.operationId, [...(conflicts.get(e.operationId) ?? []), e]);
  }
  const positions = (list: readonly OutcomeEvent[]) => list.map((e) => e.position.toString()).join(' ') || 'none';
  for (const r of requests) {
    const list = conflicts.get(r.operation_id) ?? [];
    const record = recordHash.get(r.operation_id);
    if (record === undefined) {
      if (list.length > 0)
        check.fail({ operationId: r.operation_id, events: positions(list), problem: 'conflict event, no decision' });
    } else if (r.request_hash !== record) {
      const only = list[0];
      if (list.length !== 1 || only === undefined) {
        check.fail({
          operationId: r.operation_id,
          request: requestBody(r),
          events: positions(list),
          problem:
            list.length === 0 ? 'request of another body, no conflict event' : 'conflict reported more than once',
        });
      } else if (!sameBody(only, r)) {
        check.fail({
          operationId: r.operation_id,
          position: only.position.toString(),
          event: eventBody(only),
          request: requestBody(r),
          problem: "conflict event without the request's body",
        });
      }
    } else if (list.length > 0) {
      check.fail({
        operationId: r.operation_id,
        events: positions(list),
        problem: "conflict event for a request of the record's body",
      });
    }
  }
  for (const [op, list] of conflicts) {
    if (!requestOf.has(op))
      check.fail({ operationId: op, events: positions(list), problem: 'conflict event without a request' });
  }
  for (const f of refused) {
    const row = requestOf.get(f.operationId);
    const record = recordHash.get(f.operationId);
    if (row !== undefined && !(requested.get(f.operationId)?.has(row.request_hash) ?? false)) {
      check.fail({
        operationId: f.operationId,
        seq: f.seq,
        request: requestBody(row),
        problem: 'refused at once, yet a request row exists that the intake never acknowledged',
      });
    } else if ((row === undefined || row.request_hash === f.hash) && (record === undefined || record === f.hash)) {
      check.fail({
        operationId: f.operationId,
        seq: f.seq,
        problem: 'refused at once, with no request or decision of another body',
      });
    }
  }
  return check.result();
}

/** Every given_up event carries its request's body (the stored one, not a job's). */
export function givenUpBodyCheck(requests: readonly RequestRow[], events: readonly OutcomeEvent[]): CheckResult {
  const check = new Check(
    "every given_up event's body equals its request's (wallets, amount, currency of transfer_requests)",
    'exactly-once',
  );
  const requestOf = new Map(requests.map((r) => [r.operation_id, r]));
  for (const e of events) {
    if (e.kind !== 'given_up') continue;
    const r = requestOf.get(e.operationId);
    if (r === undefined) {
      check.fail({
        operationId: e.operationId,
        position: e.position.toString(),
        problem: 'given_up event without a request',
      });
    } else if (!sameBody(e, r)) {
      check.fail({
        operationId: e.operationId,
        position: e.position.toString(),
        event: eventBody(e),
        request: requestBody(r),
      });
    }
  }
  return check.result();
}

/** Every (position, event) a reader was shown during the run is the final feed's event at that position. */
export function observedPositionsCheck(
  observations: readonly FeedObservation[],
  events: readonly OutcomeEvent[],
): CheckResult {
  const check = new Check(
    'no feed position was ever observed with another event than the final feed holds there (readers during the run)',
    'exactly-once',
  );
  const final = new Map(events.map((e) => [e.position, e]));
  const label = (e: OutcomeEvent) => `${e.operationId} ${e.kind} ${eventBody(e)}`;
  for (const o of observations) {
    const f = final.get(o.position);
    if (f === undefined || eventFingerprint(f) !== eventFingerprint(o.event)) {
      check.fail({
        position: o.position.toString(),
        observed: label(o.event),
        final: f === undefined ? 'no such position' : label(f),
        reader: o.reader,
        ended: o.ended,
        atMs: o.atMs,
      });
    }
  }
  return check.result();
}

export async function runIntakeChecks(
  client: pg.ClientBase,
  input: IntakeCheckInput,
  faults: readonly FaultRecord[],
): Promise<{ checks: CheckResult[]; figures: IntakeFigures }> {
  // The feed first, sequenced whole: the decisions read after it all have their events.
  const sequencedAtCheck = await sequenceWholeFeed(client);
  const events = await readWholeFeed(client);
  const decisions = await readDecisions(client);
  const requests = await readRequests(client);
  const decisionCount = new Map<string, number>();
  for (const d of decisions) decisionCount.set(d.operation_id, (decisionCount.get(d.operation_id) ?? 0) + 1);
  const decided = new Set(decisionCount.keys());

  const checks = [noneLostCheck(input.acknowledged, decided)];
  if (!input.direct) checks.push(intakeDecidedCheck(requests, decisionCount, input.requested.keys()));
  checks.push(decisionEventsCheck(decisions, events), feedPositionsCheck(events));
  if (!input.direct) {
    checks.push(
      conflictEventsCheck(requests, decisions, events, input.refused, input.requested),
      givenUpBodyCheck(requests, events),
    );
  }
  checks.push(observedPositionsCheck(input.observations, events));

  const recordHash = new Map(decisions.map((d) => [d.operation_id, d.request_hash]));
  const byOp = new Map(requests.map((r) => [r.operation_id, r]));
  const failoverLosses: FailoverLossFigures[] = [];
  for (const r of faults) {
    const fo = r.failover;
    if (fo?.kind !== 'lossy' || fo.queueJobsBefore === 0) continue;
    let resentAndDecided = 0;
    let decidedOtherwise = 0;
    let neverDecided = 0;
    for (const op of fo.lostOperations) {
      if (op === null || !decided.has(op)) neverDecided += 1;
      else if ((byOp.get(op)?.lost_count ?? 0) > 0) resentAndDecided += 1;
      else decidedOtherwise += 1;
    }
    failoverLosses.push({
      faultId: r.id,
      slots: fo.slots,
      jobsBefore: fo.queueJobsBefore,
      jobsLost: fo.queueJobsLost,
      resentAndDecided,
      decidedOtherwise,
      neverDecided,
    });
  }
  const sum = (f: (r: RequestRow) => number) => requests.reduce((a, r) => a + f(r), 0);
  const figures: IntakeFigures = {
    producer: input.direct ? 'direct-enqueue' : 'intake',
    acknowledged: input.acknowledged.size,
    requests: requests.length,
    decided: requests.filter((r) => r.decided).length,
    open: requests.filter((r) => !r.decided).length,
    givenUp: requests.filter((r) => r.given_up).length,
    sends: sum((r) => r.send_count),
    resends: sum((r) => Math.max(0, r.send_count - 1)),
    resendsFindingNoJob: sum((r) => r.lost_count),
    requestsFoundLost: requests.filter((r) => r.lost_count > 0).length,
    lostTransfers: [...input.acknowledged].filter((op) => !decided.has(op)).length,
    feedEvents: events.length,
    feedLastPosition: Number(events.at(-1)?.position ?? 0n),
    givenUpEvents: events.filter((e) => e.kind === 'given_up').length,
    conflictEvents: events.filter((e) => e.kind === 'conflict').length,
    requestsOfAnotherBody: requests.filter((r) => {
      const record = recordHash.get(r.operation_id);
      return record !== undefined && record !== r.request_hash;
    }).length,
    refusedAtRequest: input.refused.length,
    sequencedAtCheck,
    observations: input.observations.length,
    positionsObserved: new Set(input.observations.map((o) => o.position)).size,
    failoverLosses,
  };
  return { checks, figures };
}
