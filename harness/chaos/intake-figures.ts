// The intake run's figures for the report: the producer's acknowledgements, the requests and
// their sends and re-sends, the feed's events, the conflicts and refusals, what the feed's readers
// saw, and how the transfers of the adds each lossy failover lost were decided in the end.
import type { FaultRecord } from './faults.ts';
import type { IntakeFacts, RequestRow } from './intake-state.ts';

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

/** How the transfers of each lossy failover's lost adds were decided. */
export function failoverLosses(
  faults: readonly FaultRecord[],
  facts: Pick<IntakeFacts, 'decided' | 'requestOf'>,
): FailoverLossFigures[] {
  const out: FailoverLossFigures[] = [];
  for (const r of faults) {
    const fo = r.failover;
    if (fo?.kind !== 'lossy' || fo.queueJobsBefore === 0) continue;
    let resentAndDecided = 0;
    let decidedOtherwise = 0;
    let neverDecided = 0;
    for (const op of fo.lostOperations) {
      if (op === null || !facts.decided.has(op)) neverDecided += 1;
      else if ((facts.requestOf.get(op)?.lost_count ?? 0) > 0) resentAndDecided += 1;
      else decidedOtherwise += 1;
    }
    out.push({
      faultId: r.id,
      slots: fo.slots,
      jobsBefore: fo.queueJobsBefore,
      jobsLost: fo.queueJobsLost,
      resentAndDecided,
      decidedOtherwise,
      neverDecided,
    });
  }
  return out;
}

export function intakeFigures(
  facts: IntakeFacts,
  sequencedAtCheck: number,
  faults: readonly FaultRecord[],
): IntakeFigures {
  const { requests, events, decided, recordHash } = facts;
  const sum = (f: (r: RequestRow) => number) => requests.reduce((a, r) => a + f(r), 0);
  const count = (p: (r: RequestRow) => boolean) => requests.filter(p).length;
  return {
    producer: facts.direct ? 'direct-enqueue' : 'intake',
    acknowledged: facts.acknowledged.size,
    requests: requests.length,
    decided: count((r) => r.decided),
    open: count((r) => !r.decided),
    givenUp: count((r) => r.given_up),
    sends: sum((r) => r.send_count),
    resends: sum((r) => Math.max(0, r.send_count - 1)),
    resendsFindingNoJob: sum((r) => r.lost_count),
    requestsFoundLost: count((r) => r.lost_count > 0),
    lostTransfers: [...facts.acknowledged].filter((op) => !decided.has(op)).length,
    feedEvents: events.length,
    feedLastPosition: Number(events.at(-1)?.position ?? 0n),
    givenUpEvents: events.filter((e) => e.kind === 'given_up').length,
    conflictEvents: events.filter((e) => e.kind === 'conflict').length,
    requestsOfAnotherBody: count((r) => {
      const record = recordHash.get(r.operation_id);
      return record !== undefined && record !== r.request_hash;
    }),
    refusedAtRequest: facts.refused.length,
    sequencedAtCheck,
    observations: facts.observations.length,
    positionsObserved: new Set(facts.observations.map((o) => o.position)).size,
    failoverLosses: failoverLosses(faults, facts),
  };
}
