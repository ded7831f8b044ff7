// The intake run's checks on hand-made feeds, decisions and requests, with no database (the same
// rules on data the real intake and decision wrote: intake-checks.test.ts). Each holds on a
// consistent history and fails, naming what broke, when its property is switched off.
import { describe, expect, it } from 'vitest';
import { runInvariant } from '../../../harness/chaos/check-result.ts';
import type { FeedObservation } from '../../../harness/chaos/feed-readers.ts';
import {
  conflictEventsCheck,
  decisionEventsCheck,
  feedPositionsCheck,
  givenUpBodyCheck,
  INTAKE_CHECKS,
  intakeDecidedCheck,
  noneLostCheck,
  observedPositionsCheck,
} from '../../../harness/chaos/intake-checks.ts';
import {
  buildIntakeFacts,
  type DecisionRow,
  type IntakeCheckInput,
  type RequestRow,
} from '../../../harness/chaos/intake-state.ts';
import type { OutcomeEvent } from '../../../src/intake/outcome-feed.ts';

const event = (position: number, operationId: string, kind: OutcomeEvent['kind'] = 'applied', amountMinor = 10n) =>
  ({
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
  }) satisfies OutcomeEvent;

const observation = (e: OutcomeEvent): FeedObservation => ({
  position: e.position,
  event: e,
  reader: 1,
  ended: 'rollback',
  atMs: 5,
});

const request = (operation_id: string, hash = 'h10', extra: Partial<RequestRow> = {}): RequestRow => ({
  operation_id,
  request_hash: hash,
  from_wallet: 'w1',
  to_wallet: 'w2',
  amount: '10',
  currency: null,
  decided: true,
  given_up: false,
  send_count: 1,
  lost_count: 0,
  ...extra,
});

const decision = (operation_id: string, request_hash = 'h10', status = 'applied'): DecisionRow => ({
  operation_id,
  status,
  request_hash,
});

function facts(
  read: { events?: OutcomeEvent[]; decisions?: DecisionRow[]; requests?: RequestRow[] },
  input: Partial<IntakeCheckInput> = {},
) {
  const requests = read.requests ?? [];
  return buildIntakeFacts(
    {
      direct: false,
      acknowledged: new Set(requests.map((r) => r.operation_id)),
      requested: new Map(requests.map((r) => [r.operation_id, new Set([r.request_hash])])),
      refused: [],
      observations: [],
      ...input,
    },
    { events: read.events ?? [], decisions: read.decisions ?? [], requests },
  );
}

const judge = (check: (typeof INTAKE_CHECKS)[number], f: ReturnType<typeof facts>) =>
  runInvariant(check, f).counterexamples;

describe('the feed and the decisions', () => {
  it('the feed rule finds a gap and a repeat', () => {
    expect(judge(feedPositionsCheck, facts({ events: [event(1, 'a'), event(2, 'b'), event(3, 'c')] }))).toEqual([]);
    expect(judge(feedPositionsCheck, facts({ events: [event(1, 'a'), event(2, 'b'), event(2, 'c')] }))).toEqual([
      { index: 2, position: '2', problem: 'repeated' },
    ]);
    expect(judge(feedPositionsCheck, facts({ events: [event(1, 'a'), event(3, 'b')] }))).toEqual([
      { index: 1, position: '3', expected: '2', problem: 'gap or order' },
    ]);
  });

  it('the event rule finds an event twice, an event of another status, and an event without a decision', () => {
    const decisions = [decision('a'), decision('b', 'h10', 'rejected')];
    const ok = (events: OutcomeEvent[]) => judge(decisionEventsCheck, facts({ decisions, events }));
    expect(ok([event(1, 'a'), event(2, 'b', 'rejected')])).toEqual([]);
    // A conflict or a give-up is no decision: neither counts as the operation's event.
    expect(ok([event(1, 'a'), event(2, 'b', 'rejected'), event(3, 'a', 'conflict')])).toEqual([]);
    expect(ok([event(1, 'a'), event(2, 'b', 'conflict')])).toHaveLength(1);
    expect(ok([event(1, 'a'), event(2, 'a'), event(3, 'b', 'rejected')])).toHaveLength(1);
    expect(ok([event(1, 'a'), event(2, 'b', 'applied')])).toHaveLength(1);
    expect(ok([event(1, 'a'), event(2, 'b', 'rejected'), event(3, 'x')])).toEqual([
      { operationId: 'x', events: 1, problem: 'event without a decision' },
    ]);
  });
});

describe('the intake', () => {
  it('none lost: every acknowledged transfer has a decision', () => {
    const acknowledged = new Set(['a', 'b']);
    expect(judge(noneLostCheck, facts({ decisions: [decision('a'), decision('b')] }, { acknowledged }))).toEqual([]);
    expect(judge(noneLostCheck, facts({ decisions: [decision('a')] }, { acknowledged }))).toEqual([
      { operationId: 'b', problem: 'lost: never decided' },
    ]);
  });

  it('every request decided exactly once; a request still open, or decided twice, fails', () => {
    const requests = [request('a'), request('b')];
    expect(judge(intakeDecidedCheck, facts({ requests, decisions: [decision('a'), decision('b')] }))).toEqual([]);
    const broken = facts({
      requests: [request('a'), request('b', 'h10', { decided: false })],
      decisions: [decision('a'), decision('a')],
    });
    expect(judge(intakeDecidedCheck, broken)).toEqual([
      { operationId: 'a', decided: true, givenUp: false, decisions: 2 },
      { operationId: 'b', decided: false, givenUp: false, decisions: 0 },
    ]);
  });

  it('the checks of intake rows do not apply to a direct-enqueue run', () => {
    const direct = facts({}, { direct: true });
    expect(INTAKE_CHECKS.filter((c) => c.appliesTo?.(direct) ?? true).map((c) => c.name)).toEqual([
      noneLostCheck.name,
      decisionEventsCheck.name,
      feedPositionsCheck.name,
      observedPositionsCheck.name,
    ]);
  });
});

describe('conflicts and give-ups', () => {
  // x: requested with h10, decided with h11 (owed one conflict event with the request's body).
  const requests = [request('x'), request('y')];
  const decisions = [decision('x', 'h11'), decision('y')];

  it('one conflict event with the request body holds; none, or one with the record body, fails', () => {
    const judged = (events: OutcomeEvent[]) => judge(conflictEventsCheck, facts({ requests, decisions, events }));
    expect(judged([event(1, 'x'), event(2, 'y'), event(3, 'x', 'conflict')])).toEqual([]);
    expect(judged([event(1, 'x'), event(2, 'y')])).toMatchObject([
      { operationId: 'x', problem: 'request of another body, no conflict event' },
    ]);
    expect(judged([event(1, 'x'), event(2, 'y'), event(3, 'x', 'conflict', 11n)])).toMatchObject([
      {
        operationId: 'x',
        event: 'w1->w2 11',
        request: 'w1->w2 10',
        problem: "conflict event without the request's body",
      },
    ]);
  });

  it('a refusal at once that nothing justified fails', () => {
    const refused = [{ operationId: 'n', hash: 'h10', seq: 1 }];
    expect(judge(conflictEventsCheck, facts({}, { refused }))).toMatchObject([
      { operationId: 'n', problem: 'refused at once, with no request or decision of another body' },
    ]);
  });

  it("a given_up event carries its request's body", () => {
    const judged = (events: OutcomeEvent[]) => judge(givenUpBodyCheck, facts({ requests: [request('g')], events }));
    expect(judged([event(1, 'g', 'given_up')])).toEqual([]);
    expect(judged([event(1, 'g', 'given_up', 11n)])).toEqual([
      { operationId: 'g', position: '1', event: 'w1->w2 11', request: 'w1->w2 10' },
    ]);
    expect(judged([event(2, 'h', 'given_up')])).toEqual([
      { operationId: 'h', position: '2', problem: 'given_up event without a request' },
    ]);
  });
});

describe('feed positions observed during the run', () => {
  const final = [event(1, 'a'), event(2, 'b'), event(3, 'c', 'conflict')];
  const observed = (o: OutcomeEvent[]) =>
    judge(observedPositionsCheck, facts({ events: final }, { observations: o.map(observation) }));

  it('passes on observations of the final events and catches another event at a position, or a position gone', () => {
    expect(observed(final)).toEqual([]);
    expect(observed([event(2, 'c')])).toEqual([
      {
        position: '2',
        observed: 'c applied w1->w2 10',
        final: 'b applied w1->w2 10',
        reader: 1,
        ended: 'rollback',
        atMs: 5,
      },
    ]);
    expect(observed([event(2, 'b', 'applied', 11n)])).toHaveLength(1);
    expect(observed([event(3, 'c', 'applied')])).toHaveLength(1);
    expect(observed([event(4, 'd')])).toMatchObject([{ position: '4', final: 'no such position' }]);
  });
});
