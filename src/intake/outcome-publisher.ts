// Publishes the outcome feed (outcome-feed.ts) to a BullMQ queue, at least once: reads the events
// after a cursor kept in outcome_cursors, adds each one with job id `outcome-<position>-<event>`, then
// advances the cursor and commits. The cursor's row is taken FOR UPDATE SKIP LOCKED for the whole
// round, so of any number of relays one publishes at a time and the others skip the round. A
// relay that dies after the adds and before the commit publishes those events again from the
// old cursor: the same job ids, which BullMQ ignores while it still holds the jobs, and which a
// consumer dedupes by otherwise. The id names the event as well as its position: should the
// database ever go back in time (an asynchronous standby promoted, its last commits lost), a
// position handed out again to another event gets another job id, and is published, not taken
// for the earlier event's job (docs/operating/postgres-ha.md). The round uses one connection from the pool for everything
// (sequencing, the cursor, the read), so it works with DB_POOL_MAX=1. The cursor is reached only
// through the outcome_cursor_* functions (the relay-role migration), so the relay's role may move
// it, forward only, without any right on the table.
import { createHash } from 'node:crypto';
import type { Queue } from 'bullmq';
import type pg from 'pg';
import {
  contextOfCarrier,
  contextWithSpan,
  endSpan,
  jobTelemetryOf,
  type Span,
  SpanKind,
  startSpan,
  traceCarrierFrom,
  traceCarrierOf,
} from '../tracing/spans.ts';
import { tracingOn } from '../tracing/tracing.ts';
import { type OutcomeEvent, readOutcomes, sequenceOutcomeFeed } from './outcome-feed.ts';

/** The cursor row of the outcomes queue's publisher. */
export const OUTCOMES_QUEUE_CURSOR = 'outcomes-queue';
/**
 * The names outcome_cursor_open() takes (the relay-give-up-binding migration checks the same
 * pattern): `outcomes-` and 1-55 more of [a-z0-9-], starting with a letter or a digit.
 */
export const OUTCOME_CURSOR_NAME_PATTERN = /^outcomes-[a-z0-9][a-z0-9-]{0,54}$/;
/** Cursors of that pattern outcome_cursor_open() makes at most; past it, it raises 54000. */
export const OUTCOME_CURSORS_MAX = 8;
/** The BullMQ job name of an outcome event. */
export const OUTCOME_JOB_NAME = 'outcome';

/** The cursor's functions (`regprocedure`), granted to the relay's role (src/db/relay-role-grants.ts). */
/** The relay-trace-lookup migration's function: the trace contexts of the events' requests. */
export const RELAY_TRACE_CONTEXTS_FUNCTION = 'relay_trace_contexts(text[])';

export const OUTCOME_CURSOR_FUNCTIONS: readonly string[] = Object.freeze([
  'outcome_cursor_open(text)',
  'outcome_cursor_take(text)',
  'outcome_cursor_move(text,bigint)',
  'outcome_cursor_position(text)',
]);

/** Hex digits of the event's digest in its job id. */
const EVENT_DIGEST_HEX = 16;

/**
 * The job id of an event: `outcome-<position>-<digest of its operation and kind>`. Stable, so a
 * second publish of the same event is a no-op or a visible duplicate; another event at the same
 * position (a position reused after lost commits) is another job. The digest keeps the id free
 * of the `:` an operation id may hold and BullMQ refuses in an id.
 */
export function outcomeJobIdOf(event: Pick<OutcomeEvent, 'position' | 'operationId' | 'kind'>): string {
  const digest = createHash('sha256')
    .update(`${event.operationId}\n${event.kind}`)
    .digest('hex')
    .slice(0, EVENT_DIGEST_HEX);
  return `outcome-${event.position}-${digest}`;
}

/** An event as the job's data: JSON, the bigints as decimal strings, the time in ISO 8601. */
export interface OutcomeJobData {
  readonly position: string;
  readonly operationId: string;
  readonly kind: OutcomeEvent['kind'];
  readonly reason: string | null;
  readonly from: string;
  readonly to: string | null;
  readonly amountMinor: string | null;
  readonly currency: string | null;
  readonly decidedAt: string;
  readonly operation: OutcomeEvent['operation'];
  readonly originalId: string | null;
  readonly detail: Record<string, unknown> | null;
  readonly metadata: Record<string, string> | null;
}

export function outcomeJobDataOf(event: OutcomeEvent): OutcomeJobData {
  return {
    position: event.position.toString(),
    operationId: event.operationId,
    kind: event.kind,
    reason: event.reason,
    from: event.from,
    to: event.to,
    amountMinor: event.amountMinor === null ? null : event.amountMinor.toString(),
    currency: event.currency,
    decidedAt: event.decidedAt.toISOString(),
    operation: event.operation,
    originalId: event.originalId,
    detail: event.detail,
    metadata: event.metadata,
  };
}

export interface PublishResult {
  /** Events added this round (0 when another publisher holds the cursor or nothing is new). */
  readonly published: number;
  /** The cursor after the round; null when another publisher held it. */
  readonly position: bigint | null;
}

/** The publisher's cursor: the last position published (0 before the first). */
export async function outcomesCursor(pool: pg.Pool | pg.ClientBase, name = OUTCOMES_QUEUE_CURSOR): Promise<bigint> {
  const { rows } = await pool.query<{ position: string }>('SELECT outcome_cursor_position($1)::text AS position', [
    name,
  ]);
  return BigInt(rows[0]?.position ?? '0');
}

/**
 * One round: up to `limit` events after the cursor, added to `queue`, the cursor moved past them.
 * `hooks.afterAdd` runs after the adds and before the commit (for tests of a publisher killed there).
 */
export async function publishOutcomes(
  pool: pg.Pool,
  queue: Queue,
  limit: number,
  hooks: { afterAdd?: () => Promise<void> } = {},
  name = OUTCOMES_QUEUE_CURSOR,
): Promise<PublishResult> {
  const client = await pool.connect();
  let release: Error | undefined;
  // The session sits idle in its transaction while the jobs are added: a server that ends it
  // then (a failover, pg_terminate_backend) makes the client emit 'error', which with no
  // listener would end the process. The next query of this round fails instead, and the
  // client is discarded.
  const onError = (err: Error) => {
    release = err;
  };
  client.on('error', onError);
  try {
    await client.query('SELECT outcome_cursor_open($1)', [name]);
    // In a statement of its own, before the round's transaction: the positions commit at once
    // and the sequencer's lock is not held while the jobs are added.
    await sequenceOutcomeFeed(client);
    await client.query('BEGIN');
    try {
      // Locks the cursor's row until COMMIT; NULL when another publisher holds it.
      const { rows } = await client.query<{ position: string | null }>(
        'SELECT outcome_cursor_take($1)::text AS position',
        [name],
      );
      const row = rows[0];
      if (row === undefined || row.position === null) {
        await client.query('COMMIT');
        return { published: 0, position: null };
      }
      const after = BigInt(row.position);
      const events = await readOutcomes(client, after, limit);
      if (events.length === 0) {
        await client.query('COMMIT');
        return { published: 0, position: after };
      }
      const spans = tracingOn() ? await publicationSpans(client, events, queue.name) : new Map<OutcomeEvent, Span>();
      try {
        await queue.addBulk(
          events.map((event) => {
            const span = spans.get(event);
            const carried = span === undefined ? null : traceCarrierOf(contextWithSpan(span));
            return {
              name: OUTCOME_JOB_NAME,
              data: outcomeJobDataOf(event),
              opts: {
                jobId: outcomeJobIdOf(event),
                ...(carried === null ? {} : { telemetry: jobTelemetryOf(carried) }),
              },
            };
          }),
        );
      } catch (err) {
        for (const span of spans.values()) endSpan(span, err);
        throw err;
      }
      for (const span of spans.values()) endSpan(span);
      await hooks.afterAdd?.();
      const last = (events[events.length - 1] as OutcomeEvent).position;
      await client.query('SELECT outcome_cursor_move($1, $2::bigint)', [name, last.toString()]);
      await client.query('COMMIT');
      return { published: events.length, position: last };
    } catch (err) {
      await client.query('ROLLBACK').catch((rollbackErr: Error) => {
        release = rollbackErr;
      });
      throw err;
    }
  } finally {
    client.off('error', onError);
    client.release(release);
  }
}

/**
 * A `publish outcome` span for each event whose request carried the producer's trace context
 * (relay_trace_contexts(), which reads transfer_requests.trace_context), under the producer's request: the transfer's trace ends with
 * the publication of its outcome, and the job carries the span's context to the feed's consumer.
 * Asked only when this process traces; none when the lookup fails.
 */
async function publicationSpans(
  client: pg.ClientBase,
  events: readonly OutcomeEvent[],
  queueName: string,
): Promise<Map<OutcomeEvent, Span>> {
  // Inside the round's transaction, behind a savepoint: a lookup that fails (a database migrated
  // before the relay-trace-lookup migration) costs the spans, never the round.
  let rows: { operation_id: string; trace_context: unknown }[];
  await client.query('SAVEPOINT trace_lookup');
  try {
    rows = (
      await client.query<{ operation_id: string; trace_context: unknown }>(
        `SELECT operation_id, trace_context FROM relay_trace_contexts($1::text[])`,
        [events.map((e) => e.operationId)],
      )
    ).rows;
    await client.query('RELEASE SAVEPOINT trace_lookup');
  } catch {
    await client.query('ROLLBACK TO SAVEPOINT trace_lookup');
    return new Map();
  }
  const carriers = new Map(rows.map((r) => [r.operation_id, traceCarrierFrom(r.trace_context)]));
  const spans = new Map<OutcomeEvent, Span>();
  for (const event of events) {
    const carrier = carriers.get(event.operationId);
    if (carrier === undefined || carrier === null) continue;
    const span = startSpan(
      'publish outcome',
      {
        'transfer.operation_id': event.operationId,
        'outcome.kind': event.kind,
        'outcome.position': event.position.toString(),
        'messaging.destination.name': queueName,
      },
      { kind: SpanKind.PRODUCER, parent: contextOfCarrier(carrier) },
    );
    if (span !== null) spans.set(event, span);
  }
  return spans;
}
