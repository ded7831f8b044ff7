// The query API: the operations recorded (applied or rejected) by a wallet and its side, a kind,
// a status, a time range and metadata pairs, page by page (operations_matching(), the
// operations-query migration), every query on an index whatever the ledger's size. The read role
// may call it (`npm run db:read-role`).
//
// The order is the records' (created_at, operationId): created_at is the time of the transaction
// that decided the operation (its start), so an operation decided by a transaction that started
// before a page was read and committed after it can sort before that page's cursor and is not on a
// later page. Read a range that has ended (the usual question: yesterday, November) and nothing is
// missed. The cursor carries the time as the database wrote it, to the microsecond
// (page-cursor.ts), and the operation's id.

import { type Metadata, OPERATION_KINDS, type OperationKind, parseMetadata } from '../ledger/transfer-request.ts';
import { STORED_STATUSES, type StoredStatus } from '../ledger/vocabulary.ts';
import { WIRE_LIMITS } from '../ledger/wire-limits.ts';
import { type IntakeClient, queryRows } from './intake.ts';
import { atTextSql, type CursorKey, decodePageCursor, encodePageCursor } from './page-cursor.ts';
import { checkWallet, instantText } from './wallet-history.ts';

/** The query function, which the read role may execute (`regprocedure`). */
export const OPERATIONS_MATCHING_FUNCTION =
  'operations_matching(text,text,text,text,timestamp with time zone,timestamp with time zone,jsonb,timestamp with time zone,text,integer)';
/** Operations per page, at most (the function refuses more). */
export const OPERATIONS_LIMIT_MAX = 1_000;
/** Operations per page unless asked otherwise. */
export const OPERATIONS_LIMIT_DEFAULT = 100;

/**
 * Which side of an operation the wallet is on: `from`, the wallet it takes from or acts on (a
 * transfer's, hold's, capture's, void's, refund's, split's, withdrawal's or credit limit's `from`,
 * a wallet operation's `wallet`); `to`, the wallet it credits (a transfer's or a deposit's `to`,
 * a refund's original payer, a void's own wallet, a hold's payee and its capture's, an applied
 * split's legs); `any`, either. A deposit is on its wallet's `to` side only.
 */
export const OPERATION_SIDES = ['from', 'to', 'any'] as const;
/** One of {@link OPERATION_SIDES}. */
export type OperationSide = (typeof OPERATION_SIDES)[number];

/** What findOperations() looks for: every filter given must match. */
export interface OperationQuery {
  /** A wallet the operations name, on `side`. */
  readonly wallet?: string;
  /**
   * Which side of the operations `wallet` is on; only with `wallet`.
   * @defaultValue `any`
   */
  readonly side?: OperationSide;
  readonly kind?: OperationKind;
  /** `applied` or `rejected`. */
  readonly status?: StoredStatus;
  /** The first instant included. */
  readonly from?: Date;
  /** The first instant excluded: after `from`. */
  readonly to?: Date;
  /** Pairs the operation's metadata must all hold (1 to 16, the wire's bounds). */
  readonly metadata?: Metadata;
  /** The `nextCursor` of the page before; none for the first page. */
  readonly cursor?: string;
  /**
   * Operations per page, from 1 to OPERATIONS_LIMIT_MAX.
   * @defaultValue 100
   */
  readonly limit?: number;
}

/** A split's leg, as the split was applied. */
export interface FoundLeg {
  readonly to: string;
  readonly amount: bigint;
}

/** An operation as its record keeps it. */
export interface FoundOperation {
  readonly operationId: string;
  readonly kind: OperationKind;
  readonly status: StoredStatus;
  /** Why it was rejected; null when applied. */
  readonly reason: string | null;
  /** The wallet it takes from or acts on (null for a deposit). */
  readonly from: string | null;
  /** The wallet it pays (a deposit's wallet included); null when none (a split's are its legs). */
  readonly to: string | null;
  /** What it moved, in minor units (a credit limit's or an opening's: the limit asked); null when none. */
  readonly amount: bigint | null;
  readonly currency: string | null;
  /** A capture's or void's hold, a refund's original. */
  readonly original: string | null;
  /** A deposit's or withdrawal's external reference. */
  readonly reference: string | null;
  /** When it was decided (a Date keeps milliseconds: `atText` has the microseconds). */
  readonly at: Date;
  /** When it was decided, as the database keeps it: UTC, six fractional digits. */
  readonly atText: string;
  /** Its metadata; null when it carried none. */
  readonly metadata: Metadata | null;
  /** An applied split's legs, in the message's order; null for every other operation. */
  readonly legs: readonly FoundLeg[] | null;
}

/** A page of operations. */
export interface OperationPage {
  /** In the order (at, operationId). */
  readonly operations: readonly FoundOperation[];
  /** Pass it as `cursor` for the next page; null when this page was not full (the last). */
  readonly nextCursor: string | null;
}

interface OperationRow {
  operation_id: string;
  kind: string;
  status: string;
  reason: string | null;
  from_wallet: string | null;
  to_wallet: string | null;
  amount: string | null;
  currency: string | null;
  original_id: string | null;
  reference: string | null;
  at_text: string;
  metadata: Metadata | null;
  legs: { to: string; amount: string }[] | null;
}

const OPERATIONS_SQL = `
  SELECT operation_id, kind, status, reason, from_wallet, to_wallet, amount::text AS amount, currency,
         original_id, reference,
         ${atTextSql('created_at')} AS at_text, metadata, legs
    FROM operations_matching($1::text, $2::text, $3::text, $4::text, $5::timestamptz, $6::timestamptz, $7::jsonb,
                             $8::timestamptz, $9::text, $10::integer)`;

/** A query cursor's key: the last operation's id. */
const OPERATION_ID_KEY: CursorKey = {
  pattern: `[A-Za-z0-9._:-]{1,${WIRE_LIMITS.idLengthMax}}`,
  lengthMax: WIRE_LIMITS.idLengthMax,
};

function oneOf<T extends string>(list: readonly T[], value: unknown, name: string): T | null {
  if (value === undefined) return null;
  if (!(list as readonly unknown[]).includes(value))
    throw new RangeError(`${name} must be one of ${list.join(', ')}, got ${JSON.stringify(value)}`);
  return value as T;
}

/** The query's arguments in the function's order, or a RangeError before any query. */
function argumentsOf(query: OperationQuery): { values: unknown[]; limit: number } {
  if (query.wallet !== undefined) checkWallet(query.wallet);
  if (query.side !== undefined && query.wallet === undefined) throw new RangeError('side is for a query by wallet');
  const side = query.wallet === undefined ? null : (oneOf(OPERATION_SIDES, query.side, 'side') ?? 'any');
  const from = query.from === undefined ? null : instantText(query.from, 'from');
  const to = query.to === undefined ? null : instantText(query.to, 'to');
  if (query.from !== undefined && query.to !== undefined && query.from.getTime() >= query.to.getTime())
    throw new RangeError(`from must be before to: ${from} to ${to}`);
  let metadata: string | null = null;
  if (query.metadata !== undefined) {
    const parsed = parseMetadata(query.metadata);
    if (typeof parsed === 'string') throw new RangeError(parsed);
    if (parsed === undefined || Object.keys(parsed).length === 0) throw new RangeError('metadata must hold a pair');
    metadata = JSON.stringify(parsed);
  }
  const limit = query.limit ?? OPERATIONS_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > OPERATIONS_LIMIT_MAX)
    throw new RangeError(`limit must be from 1 to ${OPERATIONS_LIMIT_MAX}, got ${limit}`);
  const after =
    query.cursor === undefined ? null : decodePageCursor(query.cursor, OPERATION_ID_KEY, 'findOperations()');
  const values = [
    query.wallet ?? null,
    side,
    oneOf(OPERATION_KINDS, query.kind, 'kind'),
    oneOf(STORED_STATUSES, query.status, 'status'),
    from,
    to,
    metadata,
    after?.atText ?? null,
    after?.key ?? null,
    limit,
  ];
  return { values, limit };
}

function operationOf(row: OperationRow): FoundOperation {
  return {
    operationId: row.operation_id,
    kind: oneOf(OPERATION_KINDS, row.kind, 'operations_matching: kind') as OperationKind,
    status: oneOf(STORED_STATUSES, row.status, 'operations_matching: status') as StoredStatus,
    reason: row.reason,
    from: row.from_wallet,
    to: row.to_wallet,
    amount: row.amount === null ? null : BigInt(row.amount),
    currency: row.currency,
    original: row.original_id,
    reference: row.reference,
    at: new Date(row.at_text),
    atText: row.at_text,
    metadata: row.metadata,
    legs: row.legs === null ? null : row.legs.map((leg) => ({ to: leg.to, amount: BigInt(leg.amount) })),
  };
}

/**
 * The operations that match every filter of `query`, one page of at most `limit` after `cursor`,
 * in the order (at, operationId). Read every page by passing each `nextCursor` back until it is
 * null. A wallet without a row finds nothing (a query, not a lookup). Every query reads index
 * ranges: by metadata when given, else by wallet, else by kind and status.
 *
 * @throws a RangeError, before any query, for a wallet id out of bounds, `side` without a wallet or
 * unknown, an unknown kind or status, an invalid instant, `from` not before `to`, metadata out of
 * the wire's bounds or empty, a limit out of range or a cursor findOperations() did not hand out;
 * the driver's error else.
 */
export async function findOperations(client: IntakeClient, query: OperationQuery = {}): Promise<OperationPage> {
  const { values, limit } = argumentsOf(query);
  const operations = (await queryRows<OperationRow>(client, OPERATIONS_SQL, values)).map(operationOf);
  const last = operations.at(-1);
  return {
    operations,
    nextCursor:
      operations.length === limit && last !== undefined ? encodePageCursor(last.atText, last.operationId) : null,
  };
}
