// The checks an intake chaos run adds (`--intake`, `--unsafe direct-enqueue`), on the facts read
// once after the drain (intake-state.ts), and the list that runs them, INTAKE_CHECKS:
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
// With direct-enqueue there is no intake: the checks of its rows do not apply.
// The figures (intake-figures.ts) count the adds lost in lossy failovers (the jobs the new master
// lacked) and how each one's transfer was decided in the end.
import type pg from 'pg';
import type { OutcomeEvent } from '../../src/intake/outcome-feed.ts';
import type { RefusedRequest } from './chaos-intake.ts';
import { type CheckResult, type Counterexample, type Invariant, runInvariants } from './check-result.ts';
import type { FaultRecord } from './faults.ts';
import { eventFingerprint } from './feed-readers.ts';
import { type IntakeFigures, intakeFigures } from './intake-figures.ts';
import { type IntakeCheckInput, type IntakeFacts, type RequestRow, readIntakeFacts } from './intake-state.ts';

type Fail = (example: Counterexample) => void;

/** The run had an intake (not the direct-enqueue control): the checks of its rows apply. */
const withIntake = ({ direct }: Pick<IntakeFacts, 'direct'>) => !direct;

/** The feed is positions 1..N in order: no gap, no repeat. */
export const feedPositionsCheck: Invariant<Pick<IntakeFacts, 'events'>> = {
  name: 'the outcome feed read from position 0 holds positions 1..N in order, no gap, no repeat',
  group: 'exactly-once',
  find: ({ events }, fail) => {
    const seen = new Set<bigint>();
    events.forEach((e, i) => {
      const want = BigInt(i + 1);
      if (seen.has(e.position)) fail({ index: i, position: e.position.toString(), problem: 'repeated' });
      else if (e.position !== want)
        fail({ index: i, position: e.position.toString(), expected: want.toString(), problem: 'gap or order' });
      seen.add(e.position);
    });
  },
};

/** Each decision has exactly one applied/rejected event of its status, and no such event lacks a decision. */
export const decisionEventsCheck: Invariant<Pick<IntakeFacts, 'decisions' | 'events'>> = {
  name: 'every decision has exactly one outcome event (applied or rejected, as decided), and every such event a decision',
  group: 'exactly-once',
  find: ({ decisions, events }, fail) => {
    const byOp = new Map<string, OutcomeEvent[]>();
    for (const e of events) {
      // given_up and conflict events are not decisions: givenUpBodyCheck and conflictEventsCheck judge them.
      if (e.kind !== 'applied' && e.kind !== 'rejected') continue;
      byOp.set(e.operationId, [...(byOp.get(e.operationId) ?? []), e]);
    }
    const decided = new Set<string>();
    for (const d of decisions) {
      decided.add(d.operation_id);
      const list = byOp.get(d.operation_id) ?? [];
      if (list.length !== 1 || list[0]?.kind !== d.status) {
        const listed = list.map((e) => `${e.position}:${e.kind}`).join(' ') || 'none';
        fail({ operationId: d.operation_id, status: d.status, events: listed });
      }
    }
    for (const [op, list] of byOp) {
      if (!decided.has(op)) fail({ operationId: op, events: list.length, problem: 'event without a decision' });
    }
  },
};

/** Every acknowledged transfer has a decision. */
export const noneLostCheck: Invariant<Pick<IntakeFacts, 'acknowledged' | 'decided'>> = {
  name: 'every transfer acknowledged to the producer was decided (no acknowledged transfer lost)',
  group: 'exactly-once',
  find: ({ acknowledged, decided }, fail) => {
    for (const op of acknowledged) if (!decided.has(op)) fail({ operationId: op, problem: 'lost: never decided' });
  },
};

/**
 * Every requested transfer is decided, not given up, with exactly one decision; every one the
 * intake acknowledged (its transaction committed) is in the intake.
 */
export const intakeDecidedCheck: Invariant<Pick<IntakeFacts, 'direct' | 'requests' | 'decisionCount' | 'requested'>> = {
  name: 'every requested transfer was decided exactly once (the intake all decided, one transfers row each)',
  group: 'exactly-once',
  appliesTo: withIntake,
  find: ({ requests, decisionCount, requested }, fail) => {
    const inIntake = new Set<string>();
    for (const r of requests) {
      inIntake.add(r.operation_id);
      const n = decisionCount.get(r.operation_id) ?? 0;
      if (!r.decided || r.given_up || n !== 1)
        fail({ operationId: r.operation_id, decided: r.decided, givenUp: r.given_up, decisions: n });
    }
    for (const op of requested.keys()) {
      if (!inIntake.has(op)) fail({ operationId: op, problem: 'acknowledged but not in the intake' });
    }
  },
};

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
const positions = (list: readonly OutcomeEvent[]) => list.map((e) => e.position.toString()).join(' ') || 'none';

/** One request's conflict events against its operation's record (`record`: the decided hash, if any). */
function judgeConflicts(r: RequestRow, list: readonly OutcomeEvent[], record: string | undefined, fail: Fail): void {
  const operationId = r.operation_id;
  if (record === undefined) {
    if (list.length > 0) fail({ operationId, events: positions(list), problem: 'conflict event, no decision' });
  } else if (r.request_hash === record) {
    if (list.length > 0)
      fail({ operationId, events: positions(list), problem: "conflict event for a request of the record's body" });
  } else {
    const only = list[0];
    if (list.length !== 1 || only === undefined) {
      const problem =
        list.length === 0 ? 'request of another body, no conflict event' : 'conflict reported more than once';
      fail({ operationId, request: requestBody(r), events: positions(list), problem });
    } else if (!sameBody(only, r)) {
      const position = only.position.toString();
      const problem = "conflict event without the request's body";
      fail({ operationId, position, event: eventBody(only), request: requestBody(r), problem });
    }
  }
}

/** A request refused at once left no row the intake did not acknowledge, and something justified the refusal. */
function judgeRefused(
  f: RefusedRequest,
  facts: Pick<IntakeFacts, 'requestOf' | 'recordHash' | 'requested'>,
  fail: Fail,
): void {
  const row = facts.requestOf.get(f.operationId);
  const record = facts.recordHash.get(f.operationId);
  if (row !== undefined && !(facts.requested.get(f.operationId)?.has(row.request_hash) ?? false)) {
    const problem = 'refused at once, yet a request row exists that the intake never acknowledged';
    fail({ operationId: f.operationId, seq: f.seq, request: requestBody(row), problem });
  } else if ((row === undefined || row.request_hash === f.hash) && (record === undefined || record === f.hash)) {
    fail({
      operationId: f.operationId,
      seq: f.seq,
      problem: 'refused at once, with no request or decision of another body',
    });
  }
}

/**
 * Conflicts reported once: a request whose body (hash) differs from its operation's record has
 * exactly one 'conflict' event, carrying the request's body; a request of the record's body has
 * none; no conflict event lacks a request. A request refused at once left no row: a row of its
 * operation, if any, has a body the intake acknowledged, and something justified the refusal (a
 * row or a record of another body).
 */
export const conflictEventsCheck: Invariant<
  Pick<IntakeFacts, 'direct' | 'requests' | 'requestOf' | 'recordHash' | 'events' | 'refused' | 'requested'>
> = {
  name:
    "every request of another body than its operation's record has exactly one conflict event, with the request's body; " +
    'a request of the same body none; a request refused at once left no row',
  group: 'exactly-once',
  appliesTo: withIntake,
  find: (facts, fail) => {
    const conflicts = new Map<string, OutcomeEvent[]>();
    for (const e of facts.events) {
      if (e.kind === 'conflict') conflicts.set(e.operationId, [...(conflicts.get(e.operationId) ?? []), e]);
    }
    for (const r of facts.requests)
      judgeConflicts(r, conflicts.get(r.operation_id) ?? [], facts.recordHash.get(r.operation_id), fail);
    for (const [op, list] of conflicts) {
      if (!facts.requestOf.has(op))
        fail({ operationId: op, events: positions(list), problem: 'conflict event without a request' });
    }
    for (const f of facts.refused) judgeRefused(f, facts, fail);
  },
};

/** Every given_up event carries its request's body (the stored one, not a job's). */
export const givenUpBodyCheck: Invariant<Pick<IntakeFacts, 'direct' | 'requestOf' | 'events'>> = {
  name: "every given_up event's body equals its request's (wallets, amount, currency of transfer_requests)",
  group: 'exactly-once',
  appliesTo: withIntake,
  find: ({ requestOf, events }, fail) => {
    for (const e of events) {
      if (e.kind !== 'given_up') continue;
      const r = requestOf.get(e.operationId);
      const position = e.position.toString();
      if (r === undefined) fail({ operationId: e.operationId, position, problem: 'given_up event without a request' });
      else if (!sameBody(e, r))
        fail({ operationId: e.operationId, position, event: eventBody(e), request: requestBody(r) });
    }
  },
};

/** Every (position, event) a reader was shown during the run is the final feed's event at that position. */
export const observedPositionsCheck: Invariant<Pick<IntakeFacts, 'observations' | 'events'>> = {
  name: 'no feed position was ever observed with another event than the final feed holds there (readers during the run)',
  group: 'exactly-once',
  find: ({ observations, events }, fail) => {
    const final = new Map(events.map((e) => [e.position, e]));
    const label = (e: OutcomeEvent) => `${e.operationId} ${e.kind} ${eventBody(e)}`;
    for (const o of observations) {
      const f = final.get(o.position);
      if (f !== undefined && eventFingerprint(f) === eventFingerprint(o.event)) continue;
      fail({
        position: o.position.toString(),
        observed: label(o.event),
        final: f === undefined ? 'no such position' : label(f),
        reader: o.reader,
        ended: o.ended,
        atMs: o.atMs,
      });
    }
  },
};

/** The intake run's checks, in the report's order. */
export const INTAKE_CHECKS: readonly Invariant<IntakeFacts>[] = [
  noneLostCheck,
  intakeDecidedCheck,
  decisionEventsCheck,
  feedPositionsCheck,
  conflictEventsCheck,
  givenUpBodyCheck,
  observedPositionsCheck,
];

export async function runIntakeChecks(
  client: pg.ClientBase,
  input: IntakeCheckInput,
  faults: readonly FaultRecord[],
): Promise<{ checks: CheckResult[]; figures: IntakeFigures }> {
  const { facts, sequencedAtCheck } = await readIntakeFacts(client, input);
  return { checks: runInvariants(INTAKE_CHECKS, facts), figures: intakeFigures(facts, sequencedAtCheck, faults) };
}
