// The checks an intake chaos run adds (`--intake`, `--unsafe direct-enqueue`), on the database
// after the drain, and the intake's figures for the report:
// - none lost: every transfer the producer saw acknowledged (its intake transaction committed;
//   with direct-enqueue, its BullMQ add answered) was decided;
// - the intake: every requested transfer is decided, with exactly one decision (transfers row);
// - the feed: every decision has exactly one applied/rejected event, of its status, and none
//   without a decision; read from position 0 in pages, the positions are 1..N, no gap, no repeat.
// The figures count the adds lost in lossy failovers (the jobs the new master lacked) and how
// each one's transfer was decided in the end.
import type pg from 'pg';
import { OUTCOME_READ_LIMIT_MAX, type OutcomeEvent, readOutcomes } from '../../intake/outcome-feed.ts';
import { Check, type CheckResult } from './checker.ts';
import type { FaultRecord } from './faults.ts';

export interface IntakeCheckInput {
  /** The producer added to BullMQ straight (the negative control): no intake rows are expected. */
  readonly direct: boolean;
  /** Operations acknowledged to the producer. */
  readonly acknowledged: ReadonlySet<string>;
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
  readonly failoverLosses: readonly FailoverLossFigures[];
}

interface RequestRow {
  operation_id: string;
  decided: boolean;
  given_up: boolean;
  send_count: number;
  lost_count: number;
}

/** The whole feed from position 0, page by page (each read sequences what committed meanwhile). */
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
    if (e.kind === 'given_up') continue;
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

/** Every requested transfer is decided, not given up, with exactly one decision; every acknowledged one was requested. */
export function intakeDecidedCheck(
  requests: readonly RequestRow[],
  decisionCount: ReadonlyMap<string, number>,
  acknowledged: ReadonlySet<string>,
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

export async function runIntakeChecks(
  client: pg.ClientBase,
  input: IntakeCheckInput,
  faults: readonly FaultRecord[],
): Promise<{ checks: CheckResult[]; figures: IntakeFigures }> {
  // The feed first: its reads sequence every pending event, so the decisions read after it all have theirs.
  const events = await readWholeFeed(client);
  const decisions = (
    await client.query<{ operation_id: string; status: string }>('SELECT operation_id, status FROM transfers')
  ).rows;
  const requests = (
    await client.query<RequestRow>(
      `SELECT operation_id, decided_at IS NOT NULL AS decided, given_up_at IS NOT NULL AS given_up,
              send_count, lost_count FROM transfer_requests`,
    )
  ).rows;
  const decisionCount = new Map<string, number>();
  for (const d of decisions) decisionCount.set(d.operation_id, (decisionCount.get(d.operation_id) ?? 0) + 1);
  const decided = new Set(decisionCount.keys());

  const checks = [noneLostCheck(input.acknowledged, decided)];
  if (!input.direct) checks.push(intakeDecidedCheck(requests, decisionCount, input.acknowledged));
  checks.push(decisionEventsCheck(decisions, events), feedPositionsCheck(events));

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
    failoverLosses,
  };
  return { checks, figures };
}
