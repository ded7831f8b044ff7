// The intake run's facts for its checks, read once after the drain: the whole outcome feed
// (sequenced first: reading does not sequence it, and the workers and relays that do are stopped
// by then), the decisions and the intake's requests, beside what the producer and the feed's
// readers saw during the run; and the indexes the checks compare them by.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import {
  OUTCOME_READ_LIMIT_MAX,
  type OutcomeEvent,
  readOutcomes,
  sequenceOutcomeFeed,
} from '../../src/intake/outcome-feed.ts';
import type { RefusedRequest } from './chaos-intake.ts';
import type { FeedObservation } from './feed-readers.ts';

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

/** What the intake checks read: what the run saw, the database after it, and indexes of both. */
export interface IntakeFacts extends IntakeCheckInput {
  readonly events: readonly OutcomeEvent[];
  readonly decisions: readonly DecisionRow[];
  readonly requests: readonly RequestRow[];
  /** Operation id → how many decisions (transfers rows) it has. */
  readonly decisionCount: ReadonlyMap<string, number>;
  readonly decided: ReadonlySet<string>;
  /** Operation id → its request (the intake keeps one per operation). */
  readonly requestOf: ReadonlyMap<string, RequestRow>;
  /** Operation id → the hash of the body it was decided with. */
  readonly recordHash: ReadonlyMap<string, string>;
}

/** The facts, from what the run saw and the rows read after it. */
export function buildIntakeFacts(
  input: IntakeCheckInput,
  read: { events: readonly OutcomeEvent[]; decisions: readonly DecisionRow[]; requests: readonly RequestRow[] },
): IntakeFacts {
  const decisionCount = new Map<string, number>();
  for (const d of read.decisions) decisionCount.set(d.operation_id, (decisionCount.get(d.operation_id) ?? 0) + 1);
  return {
    ...input,
    ...read,
    decisionCount,
    decided: new Set(decisionCount.keys()),
    requestOf: new Map(read.requests.map((r) => [r.operation_id, r])),
    recordHash: new Map(read.decisions.map((d) => [d.operation_id, d.request_hash])),
  };
}

/** Sequences the whole feed, then reads it, the decisions and the requests; answers how many events it sequenced. */
export async function readIntakeFacts(
  client: pg.ClientBase,
  input: IntakeCheckInput,
): Promise<{ facts: IntakeFacts; sequencedAtCheck: number }> {
  // The feed first, sequenced whole: the decisions read after it all have their events.
  const sequencedAtCheck = await sequenceWholeFeed(client);
  const events = await readWholeFeed(client);
  const decisions = await readDecisions(client);
  const requests = await readRequests(client);
  return { facts: buildIntakeFacts(input, { events, decisions, requests }), sequencedAtCheck };
}
