// The durable outcome feed: one event per decided operation (applied or rejected), one per
// give-up, and one per intake request answered conflict (its operation was decided through the
// other door with another body), each with a position 1, 2, 3, … that only grows. Read by
// position, never by time.
//
// Why no event is ever skipped: a decision appends its event to outcome_pending in its own
// commit, with an id drawn from a sequence, and ids drawn by transactions that commit out of
// order become visible out of order. The feed does not hand those ids out. Its sequencer
// (outcome_feed_sequence(), sequenceOutcomeFeed() below) moves the pending events that have
// committed into outcome_events and gives them the next positions, one sequencer at a time under
// a transaction-level advisory lock that is held until those positions commit. So every position
// commits above every position already visible, and "the events after the last position I saw"
// is complete.
//
// Why a position once read never changes: a read only returns positions a sequencer committed.
// Reading does not sequence (it did until the front-door-edges migration, and a reader inside a
// transaction that then rolled back had been handed positions that went to other events). The
// sequencer runs in statements of its own: every worker calls it every
// OUTCOME_SEQUENCE_INTERVAL_MS (src/intake/feed-sequencer.ts), every relay's publisher at each
// round. The read role may not call it, so no reader can hold its lock.
import { serverErrorOf } from '../db/database-errors.ts';
import { OutcomeFeedPrunedError } from '../errors.ts';
import { OPERATION_KINDS, type OperationKind } from '../ledger/transfer-request.ts';
import { type IntakeClient, queryRows } from './intake.ts';

/** The feed's read function, which the read role may execute (`regprocedure`). */
export const OUTCOME_FEED_FUNCTION = 'outcome_events_after(bigint,integer)';
/** Events per read, at most (the function refuses more). */
export const OUTCOME_READ_LIMIT_MAX = 10_000;

/** Every kind of event the feed holds; see OutcomeKind. */
export const OUTCOME_KINDS = ['applied', 'rejected', 'given_up', 'conflict', 'expired'] as const;
/**
 * `applied`, `rejected`: the operation's decision, with the body it was decided with.
 * `given_up`: its job ran out of attempts; the intake's request stays open for `npm run redrive`.
 * `conflict`: an intake request whose operation was decided with another body (through BullMQ
 * straight); the event carries the request's body, and the request is closed.
 * `expired`: a hold nobody captured or voided in time was released (operation `hold`, the hold's
 * id, the amount released).
 */
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

/** SQLSTATE of outcome_events_after() for a pruned position (the front-door-edges migration). */
const PRUNED_SQLSTATE = 'FT001';

/** One event of the outcome feed: an operation's decision, its give-up, a conflict or an expired hold. */
export interface OutcomeEvent {
  /** 1, 2, 3, …: read on from the last one seen. */
  readonly position: bigint;
  readonly operationId: string;
  readonly kind: OutcomeKind;
  /** The rejection reason, or for given_up the last attempt's failure; null when applied. */
  readonly reason: string | null;
  /**
   * The wallet the event debits, for every kind: its balance, or for a capture, a void and an
   * `expired` its holding account (`$held:<from>`). The operation's lock's wallet.
   */
  readonly from: string;
  /**
   * The wallet the event credits, for every kind: a transfer's `to`, a capture's payee, `from`
   * itself for a void and an `expired` (the money goes back), a refund's original source. A hold
   * credits `from`'s holding account and names here the payee it holds for (credited by its
   * capture). Null for a split (each leg is in detail.legs), a refused capture, and a refund
   * refused before its original's source was known. A `given_up` or `conflict` event: the
   * request's `to` (a transfer's or a hold's, else null). Per kind: docs/reference/wire-format.md.
   */
  readonly to: string | null;
  /**
   * What moved from `from` to `to` (held, for a hold; a split's total; a capture's captured part,
   * the rest in detail.released); null for a refused void, and for a refused capture or refund
   * that asked for "all of it". The same name in the publisher's jobs and `npm run outcomes`.
   */
  readonly amountMinor: bigint | null;
  readonly currency: string | null;
  readonly decidedAt: Date;
  /** The operation's kind: one of OPERATION_KINDS. */
  readonly operation: OperationKind;
  /** A capture's or void's hold, a refund's original; null otherwise. */
  readonly originalId: string | null;
  /**
   * What else the decision says, as JSON: a hold's `expiresAt` (UTC, to the microsecond as the
   * database keeps it: a string, never a Date), a capture's `released`, a split's
   * `legs`; for `given_up` and `conflict` of a payment, and its `rejected: invalid_request` (a
   * stored request no worker can decide), the request's body. Null for a transfer,
   * and for a `conflict` the transfer decision wrote (its operation says `transfer`, whatever the
   * request's kind).
   */
  readonly detail: Record<string, unknown> | null;
  /** The operation's metadata as its message carried it; null when it had none (and for `conflict`, `given_up`, `expired`). */
  readonly metadata: Record<string, string> | null;
}

interface EventRow {
  position: string | bigint;
  operation_id: string;
  kind: string;
  reason: string | null;
  from_wallet: string;
  to_wallet: string | null;
  amount: string | bigint | null;
  currency: string | null;
  decided_at: Date | string;
  operation: string;
  original_id: string | null;
  detail: Record<string, unknown> | null;
  metadata: Record<string, string> | null;
}

const READ_SQL = `
  SELECT position::text AS position, operation_id, kind, reason, from_wallet, to_wallet, amount::text AS amount,
         currency, decided_at, operation, original_id, detail, metadata
    FROM outcome_events_after($1::bigint, $2::integer)`;

function eventOf(row: EventRow): OutcomeEvent {
  if (!(OPERATION_KINDS as readonly string[]).includes(row.operation)) {
    throw new Error(`outcome feed: unknown operation ${JSON.stringify(row.operation)} at position ${row.position}`);
  }
  if (!(OUTCOME_KINDS as readonly string[]).includes(row.kind)) {
    throw new Error(`outcome feed: unknown kind ${JSON.stringify(row.kind)} at position ${row.position}`);
  }
  return {
    position: BigInt(row.position),
    operationId: row.operation_id,
    kind: row.kind as OutcomeKind,
    reason: row.reason,
    from: row.from_wallet,
    to: row.to_wallet,
    amountMinor: row.amount === null ? null : BigInt(row.amount),
    currency: row.currency === null ? null : row.currency.trim(),
    decidedAt: row.decided_at instanceof Date ? row.decided_at : new Date(row.decided_at),
    operation: row.operation as OperationKind,
    originalId: row.original_id,
    detail: row.detail,
    metadata: row.metadata,
  };
}

/** What the feed is read through: a `pg` client or pool, or a Prisma transaction client. */
export type FeedClient = IntakeClient;

/**
 * The events after `after` (0 for the start), oldest first, at most `limit` (1,000 unless given,
 * at most OUTCOME_READ_LIMIT_MAX). Store the last position read and read on from it.
 *
 * @throws {@link OutcomeFeedPrunedError} (`OUTCOME_FEED_PRUNED`) when position `after + 1` was
 * pruned; a RangeError for a negative position or a limit out of range; the driver's error else.
 */
export async function readOutcomes(client: FeedClient, after: bigint, limit = 1_000): Promise<OutcomeEvent[]> {
  if (after < 0n) throw new RangeError(`position must be 0 or more, got ${after}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > OUTCOME_READ_LIMIT_MAX) {
    throw new RangeError(`limit must be from 1 to ${OUTCOME_READ_LIMIT_MAX}, got ${limit}`);
  }
  const values = [after.toString(), limit];
  try {
    return (await queryRows<EventRow>(client, READ_SQL, values)).map(eventOf);
  } catch (err) {
    const server = serverErrorOf(err);
    if (server?.sqlState !== PRUNED_SQLSTATE) throw err;
    const firstKept = /positions before (\d+) were pruned/.exec(server.message)?.[1];
    throw new OutcomeFeedPrunedError(after, BigInt(firstKept ?? (after + 2n).toString()));
  }
}

/** Events moved into the feed per sequencer call, at most (the function's own bound is 100,000). */
export const OUTCOME_SEQUENCE_LIMIT = 10_000;

/**
 * Gives the next positions to the decided events that have committed; answers how many it moved
 * (0 when another sequencer holds the lock). Call it on a connection outside any transaction
 * block: its positions commit with the statement. The owner and the worker role may call it.
 */
export async function sequenceOutcomeFeed(client: FeedClient): Promise<number> {
  const sql = 'SELECT outcome_feed_sequence($1::integer) AS moved';
  const rows = await queryRows<{ moved: number }>(client, sql, [OUTCOME_SEQUENCE_LIMIT]);
  return Number(rows[0]?.moved ?? 0);
}

/** How followOutcomes() reads. */
export interface FollowOptions {
  /**
   * Wait this long after a read that found nothing.
   * @defaultValue 500
   */
  readonly pollMs?: number;
  /**
   * Events per read, at most (up to OUTCOME_READ_LIMIT_MAX).
   * @defaultValue 1000
   */
  readonly limit?: number;
  /**
   * Ends the iteration (after the events of the current read). Without it, it never ends.
   * @defaultValue none
   */
  readonly signal?: AbortSignal;
}

/**
 * Every event after `after`, then each new one as it appears, until the signal aborts.
 *
 * @throws as readOutcomes(): {@link OutcomeFeedPrunedError} (`OUTCOME_FEED_PRUNED`) when position
 * `after + 1` was pruned, a RangeError for options out of range, the driver's error else.
 */
export async function* followOutcomes(
  client: FeedClient,
  after: bigint,
  options: FollowOptions = {},
): AsyncGenerator<OutcomeEvent> {
  const pollMs = options.pollMs ?? 500;
  let position = after;
  while (options.signal?.aborted !== true) {
    const events = await readOutcomes(client, position, options.limit ?? 1_000);
    for (const event of events) {
      position = event.position;
      yield event;
    }
    if (events.length === 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, pollMs);
        options.signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            resolve();
          },
          { once: true },
        );
      });
    }
  }
}
