// The transactional intake: a producer requests transfers inside its own PostgreSQL transaction,
// through request_transfer() (the intake-and-outcome-feed migration), the way Graphile Worker's
// add_job() enqueues. The request commits or rolls back with the producer's own change, so
// there is no dual write; a relay (relay.ts) then sends it to the queue and sends it again
// until it is decided. Validation is the wire format's (transfer-request.ts), before any SQL.
// Payments (holds, captures, voids, refunds, splits) go through request_operation() (the payments
// migration), which takes the wire format's JSON object and keeps it for the relay to send.
// A producer that traces (its own OpenTelemetry SDK, a span active around the call) has its span's
// trace context stored with each new request (the intake-trace-context migration): the transfer's
// trace then starts at that span (src/tracing/spans.ts).
// Several requests at once take their operations' advisory locks first, in the decisions' order
// (LOCK_SQL): two producers requesting the same operations in other orders then queue, never
// deadlock.
import type pg from 'pg';
import { serverErrorOf } from '../db/database-errors.ts';
import { IntakeConflictError, InvalidTransferError } from '../errors.ts';
import { checkedOperations } from '../ledger/checked-operations.ts';
import { type OperationWire, type TransferWire, validateTransferRequest } from '../ledger/transfer-request.ts';
import { WIRE_LIMITS } from '../ledger/wire-limits.ts';
import { type TraceCarrier, traceCarrierOf } from '../tracing/spans.ts';

/** The intake function a producer role may execute, as PostgreSQL prints it (`regprocedure`). */
export const INTAKE_FUNCTION = 'request_transfer(text,text,text,bigint,text)';
/** The intake function of every kind (`regprocedure`), granted to the producer role too. */
export const INTAKE_OPERATION_FUNCTION = 'request_operation(jsonb,bigint)';
/** The same two with the producer's trace context (`regprocedure`), granted to the producer role too. */
export const INTAKE_TRACED_FUNCTION = 'request_transfer(text,text,text,bigint,text,jsonb)';
export const INTAKE_TRACED_OPERATION_FUNCTION = 'request_operation(jsonb,bigint,jsonb)';

/** Requests per statement in requestTransfers(): one round trip each, bounded memory. */
export const INTAKE_BATCH_MAX = 1_000;

/** `requested`: a new request. `duplicate`: the same operation with the same body, requested or decided before. */
export type IntakeAnswer = 'requested' | 'duplicate';

/** A Prisma interactive-transaction client (the `tx` of `prisma.$transaction(async (tx) => …)`). */
export interface PrismaTransactionClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Promise<T>;
}

/** A `pg` client inside the producer's transaction (BEGIN … COMMIT), or a pool for one request alone. */
export type IntakeClient = pg.ClientBase | pg.Pool | PrismaTransactionClient;

const requestSql = (traced: boolean) => `
  SELECT request_transfer(r.op, r.from_wallet, r.to_wallet, r.amount, r.currency${traced ? ', $6::jsonb' : ''}) AS answer
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[]) WITH ORDINALITY
         AS r(op, from_wallet, to_wallet, amount, currency, n)
   ORDER BY r.n`;
const REQUEST_SQL = requestSql(false);
const REQUEST_TRACED_SQL = requestSql(true);

const requestOperationSql = (traced: boolean) => `
  SELECT request_operation(r.body, $2::bigint${traced ? ', $3::jsonb' : ''}) AS answer
    FROM unnest($1::jsonb[]) WITH ORDINALITY AS r(body, n)
   ORDER BY r.n`;
const REQUEST_OPERATION_SQL = requestOperationSql(false);
const REQUEST_OPERATION_TRACED_SQL = requestOperationSql(true);

/**
 * Every operation's advisory lock, taken before any request in the order the decisions take theirs
 * (by key, each once: decision_operations_locked()), and held to the end of
 * the producer's transaction. request_transfer() and request_operation() take each one again,
 * which the transaction already holds; without this they would take them in the caller's order,
 * and two producers requesting the same operations in opposite orders would deadlock.
 */
const LOCK_SQL = `
  SELECT count(*)::int AS locked
    FROM (SELECT pg_advisory_xact_lock(k.key)
            FROM (SELECT DISTINCT hashtextextended('transfer:' || op, 0) AS key
                    FROM unnest($1::text[]) AS op
                   ORDER BY 1) k) l`;

/** The producer's trace context as the functions take it (JSON text), or null when it traces nothing. */
function traceArgument(): string | null {
  const carrier: TraceCarrier | null = traceCarrierOf();
  return carrier === null ? null : JSON.stringify(carrier);
}

/** One statement's rows through either kind of client: Prisma's raw query, or `pg`'s. */
export async function queryRows<R extends object = { answer: string }>(
  client: IntakeClient,
  sql: string,
  values: unknown[],
): Promise<R[]> {
  if ('$queryRawUnsafe' in client) return client.$queryRawUnsafe<R[]>(sql, ...values);
  const result = await client.query<R>(sql, values);
  return result.rows;
}

/** Takes the operations' locks in one order (LOCK_SQL); one request alone needs no order. */
async function lockInOrder(client: IntakeClient, operationIds: readonly string[]): Promise<void> {
  if (operationIds.length < 2) return;
  await queryRows<{ locked: number }>(client, LOCK_SQL, [operationIds]);
}

function checked(wire: unknown, amountMax: bigint, position: string): TransferWire {
  const result = validateTransferRequest(wire, amountMax);
  if (!result.ok) throw new InvalidTransferError(`${position}${result.reason}`);
  return wire as TransferWire;
}

/**
 * Requests transfers in the caller's transaction, in one statement per INTAKE_BATCH_MAX. All are
 * validated before any is sent. Answers one IntakeAnswer per transfer, in order. A conflict
 * throws IntakeConflictError and, like any error, leaves the caller's transaction aborted: roll it
 * back. Pass a pool only for requests that stand alone (each statement then commits by itself).
 *
 * @param amountMax - the largest amount accepted, in minor units: the workers' TRANSFER_AMOUNT_MAX.
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) naming the first transfer outside the
 * wire format, before any SQL. {@link IntakeConflictError} (`INTAKE_CONFLICT`) when an operationId
 * was requested or decided before with another body. The driver's error for anything else.
 */
export async function requestTransfers(
  client: IntakeClient,
  wires: readonly TransferWire[],
  amountMax: bigint,
): Promise<IntakeAnswer[]> {
  const data = wires.map((w, i) => checked(w, amountMax, wires.length > 1 ? `transfer #${i + 1}: ` : ''));
  // request_transfer() keeps a transfer's columns, no body: one with metadata goes as its body.
  if (data.some((w) => w.metadata !== undefined)) {
    return requestOperations(client, data, amountMax, WIRE_LIMITS.holdExpiryCeilingMs);
  }
  const trace = traceArgument();
  await lockInOrder(
    client,
    data.map((w) => w.operationId),
  );
  return requestInSlices(client, 'request_transfer', data, (slice) => [
    trace === null ? REQUEST_SQL : REQUEST_TRACED_SQL,
    [
      slice.map((w) => w.operationId),
      slice.map((w) => w.from),
      slice.map((w) => w.to),
      slice.map((w) => w.amount),
      slice.map((w) => w.currency ?? null),
      ...(trace === null ? [] : [trace]),
    ],
  ]);
}

/**
 * Sends validated requests in one statement per INTAKE_BATCH_MAX (`statement` makes each one's
 * SQL and values) and reads back one answer per request, in order: a conflict is
 * IntakeConflictError, any other answer or count breaks the function's contract.
 */
async function requestInSlices<T>(
  client: IntakeClient,
  fn: string,
  data: readonly T[],
  statement: (slice: readonly T[]) => [sql: string, values: unknown[]],
): Promise<IntakeAnswer[]> {
  const answers: IntakeAnswer[] = [];
  for (let start = 0; start < data.length; start += INTAKE_BATCH_MAX) {
    const slice = data.slice(start, start + INTAKE_BATCH_MAX);
    let rows: { answer: string }[];
    try {
      rows = await queryRows(client, ...statement(slice));
    } catch (err) {
      const server = serverErrorOf(err);
      if (server?.sqlState === '23505' && server.message.startsWith('conflict:')) {
        throw new IntakeConflictError(server.message);
      }
      throw err;
    }
    if (rows.length !== slice.length) throw new Error(`${fn} answered ${rows.length} rows for ${slice.length}`);
    for (const row of rows) {
      if (row.answer !== 'requested' && row.answer !== 'duplicate') {
        throw new Error(`${fn} answered ${JSON.stringify(row.answer)}`);
      }
      answers.push(row.answer);
    }
  }
  return answers;
}

/**
 * Requests one transfer in the caller's transaction; see requestTransfers().
 *
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`), {@link IntakeConflictError}
 * (`INTAKE_CONFLICT`), as requestTransfers().
 */
export async function requestTransfer(
  client: IntakeClient,
  wire: TransferWire,
  amountMax: bigint,
): Promise<IntakeAnswer> {
  const [answer] = await requestTransfers(client, [wire], amountMax);
  if (answer === undefined) throw new Error('request_transfer answered nothing');
  return answer;
}

/**
 * Requests operations of any kind in the caller's transaction, as requestTransfers() does: all
 * validated first (the worker's rules, with HOLD_EXPIRY_MAX_MS), then one statement per
 * INTAKE_BATCH_MAX through request_operation(), which sends a transfer on to request_transfer().
 * A payment's body is kept as given, and is what the relay puts on the queue.
 *
 * @param amountMax - the largest amount accepted, in minor units: the workers' TRANSFER_AMOUNT_MAX.
 * @param holdExpiryMaxMs - the furthest a hold's expiry may be: the workers' HOLD_EXPIRY_MAX_MS.
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) naming the first operation outside the
 * wire format, before any SQL. {@link IntakeConflictError} (`INTAKE_CONFLICT`) when an operationId
 * was requested or decided before with another body. The driver's error for anything else.
 */
export async function requestOperations(
  client: IntakeClient,
  wires: readonly OperationWire[],
  amountMax: bigint,
  holdExpiryMaxMs: number,
): Promise<IntakeAnswer[]> {
  const checkedWires = checkedOperations(wires, amountMax, holdExpiryMaxMs);
  const data = checkedWires.map((w) => JSON.stringify(w));
  const trace = traceArgument();
  await lockInOrder(
    client,
    checkedWires.map((w) => w.operationId),
  );
  return requestInSlices(client, 'request_operation', data, (slice) =>
    trace === null
      ? [REQUEST_OPERATION_SQL, [slice, holdExpiryMaxMs]]
      : [REQUEST_OPERATION_TRACED_SQL, [slice, holdExpiryMaxMs, trace]],
  );
}

/**
 * Requests one operation of any kind in the caller's transaction; see requestOperations().
 *
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`), {@link IntakeConflictError}
 * (`INTAKE_CONFLICT`), as requestOperations().
 */
export async function requestOperation(
  client: IntakeClient,
  wire: OperationWire,
  amountMax: bigint,
  holdExpiryMaxMs: number,
): Promise<IntakeAnswer> {
  const [answer] = await requestOperations(client, [wire], amountMax, holdExpiryMaxMs);
  if (answer === undefined) throw new Error('request_operation answered nothing');
  return answer;
}
