// The relay: moves requested transfers from the intake (transfer_requests) to the queue shard of
// their source wallet, and sends again any that stay undecided. Any number of relays may run:
// each claims its rows with FOR UPDATE SKIP LOCKED and marks them sent in a short transaction of
// its own, then adds the jobs. A relay killed between the two leaves rows marked sent but not
// in the queue; they are sent again after INTAKE_RESEND_AFTER_MS, like a job the queue lost.
//
// A job's id is derived from its operation (jobIdOf), so a second send of a job the queue still
// holds (waiting, active, delayed, completed and kept) is a no-op in BullMQ. A send that finds
// no job at all is an add the queue lost (a lossy failover, a flush): it is counted in
// lost_count and the job is added again. A send that finds the job completed asks the database
// whether the request is decided now (its job may have completed after the claim): only one
// still undecided is a lost decision. A send that finds the job failed for good records the
// give-up (the worker could not) and stops: `npm run redrive` sends it again.
//
// A batch is never all first sends while re-sends are due: RELAY_RESEND_SHARE of it (at least one
// request) is claimed for due re-sends first, then first sends fill it, then more due re-sends if
// room is left. Without the share, a backlog of RELAY_BATCH_MAX or more never-sent requests took
// every batch, and no lost add was sent again nor any failed job found until it drained.
//
// The give-up a relay records is bound to the send it claimed (send_count) and to its claim (a UUID
// each claim marks its rows with, relay_record_given_up()): a redrive between the relay's look at
// the failed job and its record has sent the request again (send_count moved on), and the record
// is then refused, so the relay cannot park a request that has a fresh job; nor can its role park
// a request it did not claim, and one claim takes at most RELAY_CLAIM_MAX requests.
//
// A redrive goes one operation at a time, in an order that is safe to die in at any point: the
// failed job is removed, the fresh one added, and only then is the request un-parked (still given
// up until that last step, so no relay touches it meanwhile). A redrive that dies midway leaves
// every request it did not finish parked, with or without a fresh job, and the next redrive
// finishes them; no request is ever open with only its old failed job in the queue.
import { createHash } from 'node:crypto';
import type { Job } from 'bullmq';
import type pg from 'pg';
import type { OperationWire, TransferWire } from '../ledger/transfer-request.ts';
import { TRANSFER_JOB_NAME } from '../queue/job-options.ts';
import type { TransferQueues } from '../queue/producer.ts';
import {
  contextOfCarrier,
  contextWithSpan,
  endSpan,
  jobTelemetryOf,
  SpanKind,
  startSpan,
  type TraceCarrier,
  traceCarrierFrom,
  traceCarrierOf,
} from '../tracing/spans.ts';

/** The BullMQ job id of an operation's transfer: stable, and free of ':' (which BullMQ refuses). */
export function jobIdOf(operationId: string): string {
  return `op-${createHash('sha256').update(operationId).digest('hex').slice(0, 40)}`;
}

export interface RelayBatchResult {
  /** Requests claimed and added to the queue (first sends and re-sends). */
  readonly sent: number;
  /** Of those, sends after the first. */
  readonly resent: number;
  /** Re-sends that found no job: adds the queue had lost, now added again. */
  readonly lost: number;
  /**
   * Re-sends that found the job completed although its request is undecided (asked after the job
   * was seen completed, so a job that completed since the claim is not one): the decision that
   * job answered is not in the database any more (it went back in time: an asynchronous standby
   * promoted, docs/operating/postgres-ha.md). The completed job is removed and the request added
   * again, so it is decided again; counted and logged, for an operator to know.
   */
  readonly undone: number;
  /**
   * Re-sends that found the job failed for good: not added, and recorded as given up unless the
   * request moved on since the claim (a redrive sent it again: its fresh job stands).
   */
  readonly givenUp: number;
}

interface ClaimedRow {
  operation_id: string;
  request_hash: string;
  from_wallet: string;
  to_wallet: string;
  amount: string;
  currency: string | null;
  send_count: number;
  kind: string;
  body: Record<string, unknown> | null;
  /** The producer's W3C trace context (`traceparent`, `tracestate`), or null when it traced nothing. */
  trace_context: Record<string, unknown> | null;
  /** The claim that took this send (a UUID per claim): the key to its give-up; null for a redrive's row. */
  claim: string | null;
}

/**
 * The share of every batch kept for due re-sends (RELAY_BATCH_MAX × this, rounded up: at least one
 * request, so a batch of one takes a due re-send before a first send). First sends take the rest,
 * and any part of the share that no due re-send needs.
 */
export const RELAY_RESEND_SHARE = 0.25;

/** Requests of a batch of batchMax kept for due re-sends (see RELAY_RESEND_SHARE). */
export function resendsReserved(batchMax: number): number {
  return Math.min(batchMax, Math.max(1, Math.ceil(batchMax * RELAY_RESEND_SHARE)));
}

// Two claims, each an index range scan on transfer_requests_open_idx (sent_at below the
// threshold, or sent_at IS NULL), so a claim never walks the requests that were sent recently and
// are still waiting for their decision. Each is a function of the relay-role migration (SECURITY
// DEFINER), so the relay's role may claim and mark rows without any right on the table.
const CLAIMED_COLUMNS =
  'operation_id, request_hash, from_wallet, to_wallet, amount::text AS amount, currency, send_count, kind, body, trace_context, claim::text AS claim';
const CLAIM_FIRST_SENDS_SQL = `SELECT ${CLAIMED_COLUMNS} FROM relay_claim_first_sends($1::integer)`;
const CLAIM_DUE_SQL = `SELECT ${CLAIMED_COLUMNS} FROM relay_claim_resends($1::integer, $2::double precision)`;

/** The relay-role migration's functions for the intake (`regprocedure`); src/db/relay-role-grants.ts grants them. */
export const RELAY_CLAIM_FIRST_SENDS_FUNCTION = 'relay_claim_first_sends(integer)';
export const RELAY_CLAIM_RESENDS_FUNCTION = 'relay_claim_resends(integer,double precision)';
export const RELAY_COUNT_LOST_FUNCTION = 'relay_count_lost(text[])';
export const RELAY_BACKLOG_FUNCTION = 'relay_intake_backlog()';
/** The relay-give-up-binding migration's: a give-up of a re-send the caller's claim took. */
export const RELAY_RECORD_GIVEN_UP_FUNCTION = 'relay_record_given_up(text,text,integer,uuid)';
/** Also the relay-give-up-binding migration's: which requests are decided (a completed job is lost only if not). */
export const RELAY_REQUESTS_DECIDED_FUNCTION = 'relay_requests_decided(text[])';
/** Requests one claim takes at most (the claim functions refuse more; RELAY_BATCH_MAX's bound). */
export const RELAY_CLAIM_MAX = 1_000;

/**
 * Due re-sends up to their reserved share, then first sends up to the batch, then due re-sends
 * again if the first sends left room. Each claim commits on its own; a row claimed by the first
 * is sent now, so the third cannot take it again.
 */
async function claim(pool: pg.Pool, options: RelayOptions): Promise<ClaimedRow[]> {
  const claimDue = async (limit: number) =>
    (await pool.query<ClaimedRow>(CLAIM_DUE_SQL, [limit, options.resendAfterMs])).rows;
  const reserved = resendsReserved(options.batchMax);
  const due = await claimDue(reserved);
  const firstMax = options.batchMax - due.length;
  const first = firstMax > 0 ? (await pool.query<ClaimedRow>(CLAIM_FIRST_SENDS_SQL, [firstMax])).rows : [];
  const room = options.batchMax - due.length - first.length;
  // Fewer due than reserved: none is left (but rows another relay holds).
  const more = room > 0 && due.length === reserved ? await claimDue(room) : [];
  return [...due, ...first, ...more];
}

/**
 * The job's data: a transfer's columns, or the body as the producer requested it (a payment's, a
 * transfer's with metadata).
 */
function wireOf(row: ClaimedRow): OperationWire {
  if (row.body !== null) return row.body as unknown as OperationWire;
  const wire: TransferWire = {
    operationId: row.operation_id,
    from: row.from_wallet,
    to: row.to_wallet,
    amount: row.amount,
  };
  if (row.currency !== null) wire.currency = row.currency.trim();
  return wire;
}

/**
 * A request's send, as its trace sees it: a `relay send` span under the producer's request (when
 * the producer traced and this relay traces), whose context the job carries to its consumer
 * span; the producer's context itself when this relay does not trace; nothing when the producer
 * did not trace.
 */
function sendOf(
  row: ClaimedRow,
  queueName: string,
): { span: ReturnType<typeof startSpan>; jobOptions?: { telemetry: { metadata: string } } } {
  const producer: TraceCarrier | null = traceCarrierFrom(row.trace_context ?? null);
  if (producer === null) return { span: null };
  const span = startSpan(
    'relay send',
    {
      'transfer.operation_id': row.operation_id,
      'transfer.wallet': row.from_wallet,
      'relay.send_count': row.send_count,
      'messaging.destination.name': queueName,
    },
    { kind: SpanKind.PRODUCER, parent: contextOfCarrier(producer) },
  );
  const carried = span === null ? producer : (traceCarrierOf(contextWithSpan(span)) ?? producer);
  return { span, jobOptions: { telemetry: jobTelemetryOf(carried) } };
}

export interface RelayOptions {
  /** Requests claimed per batch. */
  readonly batchMax: number;
  /** An undecided request sent longer ago than this is sent again. */
  readonly resendAfterMs: number;
}

export interface RelayBatchHooks {
  /** After the jobs are added, before the give-ups of failed jobs are recorded (tests). */
  readonly beforeGiveUps?: () => Promise<void>;
}

/**
 * One batch: claims up to batchMax requests that are unsent or due again (RELAY_RESEND_SHARE of
 * it kept for due re-sends), and adds their jobs. Answers what it did; sends nothing (sent = 0)
 * when nothing is due.
 */
export async function relayBatch(
  pool: pg.Pool,
  queues: TransferQueues,
  options: RelayOptions,
  hooks: RelayBatchHooks = {},
): Promise<RelayBatchResult> {
  if (options.batchMax > RELAY_CLAIM_MAX) throw new RangeError(`batchMax ${options.batchMax} > ${RELAY_CLAIM_MAX}`);
  const rows = await claim(pool, options);
  if (rows.length === 0) return { sent: 0, resent: 0, lost: 0, givenUp: 0, undone: 0 };

  const resends = rows.filter((r) => r.send_count > 1);
  const found = await lookAtResends(queues, resends);
  // Counted when found, before the add: an add that fails in its turn is still a lost one.
  if (found.lost.length > 0) {
    await pool.query('SELECT relay_count_lost($1::text[])', [found.lost]);
  }
  const { undone, decided } = await lostDecisions(pool, found.completed);

  const byQueue = new Map<ReturnType<TransferQueues['queueOf']>, ClaimedRow[]>();
  for (const row of rows) {
    if (found.failed.has(row.operation_id) || decided.has(row.operation_id)) continue;
    const queue = queues.queueOf(row.from_wallet);
    const list = byQueue.get(queue) ?? [];
    list.push(row);
    byQueue.set(queue, list);
  }
  await Promise.all([...byQueue].map(([queue, list]) => addJobs(queue, list)));

  if (found.failed.size > 0) await hooks.beforeGiveUps?.();
  for (const { row, reason } of found.failed.values()) {
    // Only while the request is still at the send this claim made: a redrive since sent it again.
    await pool.query('SELECT relay_record_given_up($1, $2, $3::integer, $4::uuid)', [
      row.operation_id,
      reason,
      row.send_count,
      row.claim,
    ]);
  }
  const notSent = found.failed.size + decided.size;
  return {
    sent: rows.length - notSent,
    resent: resends.length - notSent,
    lost: found.lost.length,
    givenUp: found.failed.size,
    undone: undone.length,
  };
}

interface ResendsSeen {
  /** Re-sends with no job: adds the queue lost. */
  readonly lost: string[];
  /** Re-sends whose job failed for good, with its reason. */
  readonly failed: Map<string, { row: ClaimedRow; reason: string }>;
  /** Re-sends whose job is completed, by operation: a lost decision only if the request is undecided. */
  readonly completed: Map<string, Job>;
}

/** Where each re-send's job is: none (lost), failed for good, completed, or anything else (sent again: a no-op). */
async function lookAtResends(queues: TransferQueues, resends: readonly ClaimedRow[]): Promise<ResendsSeen> {
  const seen: ResendsSeen = { lost: [], failed: new Map(), completed: new Map() };
  await Promise.all(
    resends.map(async (row) => {
      const queue = queues.queueOf(row.from_wallet);
      const job: Job | undefined = await queue.getJob(jobIdOf(row.operation_id));
      if (job === undefined || job === null) {
        seen.lost.push(row.operation_id);
        return;
      }
      const state = await job.getState();
      if (state === 'failed') {
        seen.failed.set(row.operation_id, {
          row,
          reason: `job failed for good: ${job.failedReason ?? 'no reason kept'}`,
        });
      } else if (state === 'completed') {
        seen.completed.set(row.operation_id, job);
      }
    }),
  );
  return seen;
}

/**
 * Of the re-sends whose job is completed, those whose request is still undecided (asked now,
 * after the job was seen completed): a job completes only after its decision commits, which marks
 * the request decided, so completed and undecided means the database lost that commit. Kept, the
 * completed job would swallow every add of this id; removed, the add goes through. The others
 * completed after the claim: decided, they are neither removed nor added again.
 */
async function lostDecisions(
  pool: pg.Pool,
  completed: ReadonlyMap<string, Job>,
): Promise<{ undone: string[]; decided: Set<string> }> {
  if (completed.size === 0) return { undone: [], decided: new Set() };
  const { rows } = await pool.query<{ operation_id: string }>(
    'SELECT operation_id FROM relay_requests_decided($1::text[]) AS d(operation_id)',
    [[...completed.keys()]],
  );
  const decided = new Set(rows.map((r) => r.operation_id));
  const undone = [...completed.keys()].filter((op) => !decided.has(op));
  await Promise.all(undone.map((op) => completed.get(op)?.remove()));
  return { undone, decided };
}

/** Adds one queue's jobs in one call, each under its send's span. */
async function addJobs(queue: ReturnType<TransferQueues['queueOf']>, list: readonly ClaimedRow[]): Promise<void> {
  const sends = list.map((row) => sendOf(row, queue.name));
  try {
    await queue.addBulk(
      list.map((row, i) => ({
        name: TRANSFER_JOB_NAME,
        data: wireOf(row),
        opts: { jobId: jobIdOf(row.operation_id), ...sends[i]?.jobOptions },
      })),
    );
  } catch (err) {
    for (const send of sends) endSpan(send.span, err);
    throw err;
  }
  for (const send of sends) endSpan(send.span);
}

export interface IntakeBacklog {
  /** Requests not yet decided (given-up ones included). */
  readonly open: number;
  /** Requests never sent yet. */
  readonly unsent: number;
  /** Given up: waiting for `npm run redrive`. */
  readonly givenUp: number;
  /** Age of the oldest request never sent, in seconds (0 when there is none): the relay's lag. */
  readonly lagSeconds: number;
}

/** The backlog, through relay_intake_backlog() (the relay's role may read no table). */
export async function intakeBacklog(pool: pg.Pool | pg.ClientBase): Promise<IntakeBacklog> {
  const { rows } = await pool.query<{ open: string; unsent: string; given_up: string; lag: number | null }>(
    'SELECT "open"::text AS open, unsent::text AS unsent, given_up::text AS given_up, lag_seconds AS lag FROM relay_intake_backlog()',
  );
  const row = rows[0];
  return {
    open: Number(row?.open ?? 0),
    unsent: Number(row?.unsent ?? 0),
    givenUp: Number(row?.given_up ?? 0),
    lagSeconds: Math.max(0, row?.lag ?? 0),
  };
}

export interface RedriveResult {
  /** The operations this call sent again (un-parked), in the order it did them. */
  readonly operationIds: string[];
}

// The redrive is an operator's command (`npm run redrive`), run as the owner: the relay's role
// may not read or change a request but through its functions, and has no redrive among them.
const GIVEN_UP_SQL = `
  SELECT q.operation_id, q.request_hash, q.from_wallet, q.to_wallet, q.amount::text AS amount, q.currency, q.send_count,
         q.kind, q.body, q.trace_context, q.relay_claim::text AS claim
    FROM transfer_requests q
   WHERE q.decided_at IS NULL AND q.given_up_at IS NOT NULL AND ($1::text[] IS NULL OR q.operation_id = ANY($1::text[]))
   ORDER BY q.given_up_at, q.operation_id`;

// The last step of one operation's redrive, once its fresh job is in the queue: the request is no
// longer given up, and its send is counted (no relay's claim: relay_claim cleared), so a give-up
// seen before this is refused (bound to the send_count its worker read or its relay claimed). Only a request still
// parked (a redrive beside this one may have done it); one the fresh job has decided already is
// un-parked too, since it was sent.
const UNPARK_SQL = `
  UPDATE transfer_requests q
     SET given_up_at = NULL, sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = NULL
   WHERE q.operation_id = $1 AND q.given_up_at IS NOT NULL
  RETURNING q.operation_id`;

/**
 * Sends given-up requests again (all of them, or those named), one at a time: the job BullMQ may
 * still keep is removed (the failed one; a job a worker holds is left to finish, and a fresh one
 * a dead redrive added is replaced by its equal), a fresh job is added with the same id, and only
 * then is the request marked open. Dying at any point leaves the requests not finished still
 * given up, which no relay touches, so running it again finishes them. The decision then answers
 * each once (or as a duplicate if it was decided meanwhile).
 */
export async function redrive(
  pool: pg.Pool,
  queues: Pick<TransferQueues, 'queueOf'>,
  operationIds: readonly string[] | 'all',
): Promise<RedriveResult> {
  const { rows } = await pool.query<ClaimedRow>(GIVEN_UP_SQL, [operationIds === 'all' ? null : [...operationIds]]);
  const done: string[] = [];
  for (const row of rows) {
    const queue = queues.queueOf(row.from_wallet);
    const jobId = jobIdOf(row.operation_id);
    // 0 when there is no job, or a worker holds it (locked): the add below is then a no-op.
    await queue.remove(jobId);
    await queue.add(TRANSFER_JOB_NAME, wireOf(row), { jobId });
    const unparked = await pool.query(UNPARK_SQL, [row.operation_id]);
    if (unparked.rowCount === 1) done.push(row.operation_id);
  }
  return { operationIds: done };
}
