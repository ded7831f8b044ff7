// The durable outcome feed: one event per decided operation (applied or rejected) and one per
// give-up, each with a position 1, 2, 3, … that only grows. Read by position, never by time.
//
// Why no event is ever skipped: a decision appends its event to outcome_pending in its own
// commit, with an id drawn from a sequence, and ids drawn by transactions that commit out of
// order become visible out of order. The feed does not hand those ids out. Its sequencer
// (outcome_feed_sequence(), called by every read) moves the pending events that have committed
// into outcome_events and gives them the next positions, one sequencer at a time under a
// transaction-level advisory lock that is held until those positions commit. So every position
// commits above every position already visible, and "the events after the last position I saw"
// is complete. An event whose transaction is still open gets its position after it commits.
import type pg from 'pg';
import type { PrismaTransactionClient } from './intake.ts';

/** The feed's read function, which the read role may execute (`regprocedure`). */
export const OUTCOME_FEED_FUNCTION = 'outcome_events_after(bigint,integer)';
/** Events per read, at most (the function refuses more). */
export const OUTCOME_READ_LIMIT_MAX = 10_000;

export type OutcomeKind = 'applied' | 'rejected' | 'given_up';

export interface OutcomeEvent {
  /** 1, 2, 3, …: read on from the last one seen. */
  readonly position: bigint;
  readonly operationId: string;
  readonly kind: OutcomeKind;
  /** The rejection reason, or for given_up the last attempt's failure; null when applied. */
  readonly reason: string | null;
  readonly from: string;
  readonly to: string;
  readonly amountMinor: bigint;
  readonly currency: string | null;
  readonly decidedAt: Date;
}

interface EventRow {
  position: string | bigint;
  operation_id: string;
  kind: string;
  reason: string | null;
  from_wallet: string;
  to_wallet: string;
  amount: string | bigint;
  currency: string | null;
  decided_at: Date | string;
}

const READ_SQL = `
  SELECT position::text AS position, operation_id, kind, reason, from_wallet, to_wallet, amount::text AS amount,
         currency, decided_at
    FROM outcome_events_after($1::bigint, $2::integer)`;

function eventOf(row: EventRow): OutcomeEvent {
  if (row.kind !== 'applied' && row.kind !== 'rejected' && row.kind !== 'given_up') {
    throw new Error(`outcome feed: unknown kind ${JSON.stringify(row.kind)} at position ${row.position}`);
  }
  return {
    position: BigInt(row.position),
    operationId: row.operation_id,
    kind: row.kind,
    reason: row.reason,
    from: row.from_wallet,
    to: row.to_wallet,
    amountMinor: BigInt(row.amount),
    currency: row.currency === null ? null : row.currency.trim(),
    decidedAt: row.decided_at instanceof Date ? row.decided_at : new Date(row.decided_at),
  };
}

export type FeedClient = pg.ClientBase | pg.Pool | PrismaTransactionClient;

/** The events after `after` (0 for the start), oldest first, at most `limit`. */
export async function readOutcomes(client: FeedClient, after: bigint, limit = 1_000): Promise<OutcomeEvent[]> {
  if (after < 0n) throw new RangeError(`position must be 0 or more, got ${after}`);
  if (!Number.isInteger(limit) || limit < 1 || limit > OUTCOME_READ_LIMIT_MAX) {
    throw new RangeError(`limit must be from 1 to ${OUTCOME_READ_LIMIT_MAX}, got ${limit}`);
  }
  const values = [after.toString(), limit];
  const rows =
    '$queryRawUnsafe' in client
      ? await client.$queryRawUnsafe<EventRow[]>(READ_SQL, ...values)
      : (await client.query<EventRow>(READ_SQL, values)).rows;
  return rows.map(eventOf);
}

export interface FollowOptions {
  /** Wait this long after a read that found nothing. */
  readonly pollMs?: number;
  readonly limit?: number;
  readonly signal?: AbortSignal;
}

/** Every event after `after`, then each new one as it appears, until the signal aborts. */
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
