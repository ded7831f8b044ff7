// The database decision: one call of apply_transfers() for many transfers, or of
// apply_transfer() for one (see prisma/migrations), so for each transfer the idempotency
// record, fence check (token and lease), balance check and double-entry ledger are decided in
// one statement, and a whole batch costs one round trip and one commit.
import { TRANSFER_BATCH_MAX_LIMIT } from '../config/config.ts';
import { serverErrorOf } from '../db/database-errors.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { LedgerContractError } from '../errors.ts';
import type { ApplyResult, StoredOutcome } from './outcome.ts';
import { requestHash } from './request-hash.ts';
import type { TransferRequest } from './transfer-request.ts';
import { isDecisionOutcome, isRejectionReason, isStoredStatus } from './vocabulary.ts';

/**
 * The worker's decision function, with its full signature as PostgreSQL prints it
 * (`regprocedure`): the one function the worker role may execute (DECISION_FUNCTIONS in
 * src/db/worker-role-grants.ts) and the one applyTransfers() calls with every check on.
 */
export const DECISION_FUNCTION = 'apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[])';
/**
 * What the worker calls when a job fails for good (`regprocedure`): record_transfer_given_up() of
 * the relay-give-up-binding migration. It takes the operation, the hash of the failed job's body
 * and the send the give-up belongs to, never a body: the 'given_up' event carries the stored
 * request's body, and an operation with no open request of that body, or one sent again since,
 * gets no event. Granted to the worker role.
 */
export const GIVE_UP_FUNCTION = 'record_transfer_given_up(text,text,text,integer)';
/**
 * The send a give-up would be bound to (`regprocedure`): the open request's send_count, which the
 * worker reads before it checks that its job is still the failed one. Granted to the worker role.
 */
export const GIVE_UP_SEND_FUNCTION = 'give_up_send_count(text,text)';
/**
 * The outcome feed's sequencer (`regprocedure`), which every worker calls in a statement of its
 * own to keep the feed moving (src/intake/feed-sequencer.ts). Granted to the worker role.
 */
export const FEED_SEQUENCE_FUNCTION = 'outcome_feed_sequence(integer)';

/** A lease id as every lock service issues it (crypto.randomUUID()); PostgreSQL stores it as `uuid`. */
const LEASE_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The switches of the negative controls (TRANSFERS_UNSAFE). A production database cannot skip a
 * check: its decisions have no switch. With any of these set the call goes to
 * apply_transfers_unsafe() (apply_payments_unsafe()), which only the chaos harness installs, into
 * its own scratch databases and tests' databases (harness/chaos/unsafe/); anywhere else the call
 * fails with a LedgerContractError `unsafe_decision_missing`.
 */
export interface ApplyOptions {
  /** Negative controls only (the chaos harness): skip the idempotency record. */
  readonly skipIdempotency?: boolean;
  /** Negative controls only: skip the fence comparison on the source wallet. */
  readonly skipFence?: boolean;
  /** Negative controls only: let an equal token pass whichever lease carries it. */
  readonly skipLeaseCheck?: boolean;
  /** Negative controls only (`no-credit-limit`): a debit is not held to its wallet's credit limit. */
  readonly skipCreditLimit?: boolean;
  /** Negative controls only (`no-wallet-status`): a frozen or closed wallet's postings are not refused. */
  readonly skipWalletStatus?: boolean;
}

/** One decision's answer, as both decision functions return it. */
export interface DecisionRow {
  outcome: string;
  status: string | null;
  reason: string | null;
  fence: bigint | null;
  wallet_fence: bigint | null;
}

function storedOutcome(row: DecisionRow): StoredOutcome {
  if (row.fence === null) throw new LedgerContractError('stored_without_fence', JSON.stringify(row.outcome));
  if (isStoredStatus(row.status)) {
    if (row.status === 'applied') return { status: 'applied', fence: row.fence.toString() };
    if (isRejectionReason(row.reason)) return { status: 'rejected', reason: row.reason, fence: row.fence.toString() };
  }
  throw new LedgerContractError(
    'unknown_stored_status',
    `${JSON.stringify(row.status)} / reason ${JSON.stringify(row.reason)}`,
  );
}

/** One transfer, the fencing token it is decided under and the lease that token belongs to. */
export interface FencedTransfer {
  readonly request: TransferRequest;
  readonly fence: bigint;
  /** LockLease.leaseId: an equal token passes only for the lease that set the wallet's fence. */
  readonly leaseId: string;
}

export function assertFenced(fence: bigint, leaseId: string, operationId: string): void {
  if (fence < 1n) throw new RangeError(`fence must be positive, got ${fence} for ${operationId}`);
  if (!LEASE_ID_PATTERN.test(leaseId)) {
    throw new RangeError(`leaseId must be a lower-case UUID, got ${JSON.stringify(leaseId)} for ${operationId}`);
  }
}

/**
 * A call of a negative control's decision (`fn`, e.g. apply_transfers_unsafe). In a database the
 * harness did not install it into, PostgreSQL answers undefined_function (42883), which becomes a
 * LedgerContractError that says where the variants come from: the worker stops taking jobs, as for
 * any function its build calls and the database lacks.
 */
export async function callUnsafeDecision<T>(fn: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const server = serverErrorOf(err);
    if (server?.sqlState === '42883' && server.message.includes(`${fn}(`)) {
      throw new LedgerContractError(
        'unsafe_decision_missing',
        `${fn}() is not in this database: TRANSFERS_UNSAFE's database modes need the variants the chaos ` +
          'harness installs into its own scratch databases (harness/chaos/unsafe/); a migrated database never has them',
      );
    }
    throw err;
  }
}

/** One transfer through apply_transfer() (owner only: the bench's fixtures and tests). */
export async function applyTransfer(
  prisma: PrismaClient,
  request: TransferRequest,
  fence: bigint,
  leaseId: string,
): Promise<ApplyResult> {
  assertFenced(fence, leaseId, request.operationId);
  const rows = await prisma.$queryRaw<DecisionRow[]>`
    SELECT outcome, status, reason, fence, wallet_fence FROM apply_transfer(
      ${request.operationId}::text, ${requestHash(request)}::text, ${request.from}::text, ${request.to}::text,
      ${request.amountMinor}::bigint, ${request.currency}::text, ${fence}::bigint, ${leaseId}::uuid)`;
  const row = rows[0];
  if (rows.length !== 1 || row === undefined) throw new LedgerContractError('single_row_count', `${rows.length} rows`);
  return decisionResult(row, request.operationId, fence);
}

/**
 * Decides many transfers in one round trip and one commit, in the given order; answers one
 * result per transfer, in the same order. Each transfer is decided on its own (a rejection or
 * a stale fence answers that transfer only); an error fails the whole call, which is safe to
 * retry: every transfer in it is idempotent.
 */
export async function applyTransfers(
  prisma: PrismaClient,
  transfers: readonly FencedTransfer[],
  options: ApplyOptions = {},
): Promise<ApplyResult[]> {
  if (transfers.length < 1 || transfers.length > TRANSFER_BATCH_MAX_LIMIT) {
    throw new RangeError(`between 1 and ${TRANSFER_BATCH_MAX_LIMIT} transfers per call, got ${transfers.length}`);
  }
  for (const t of transfers) assertFenced(t.fence, t.leaseId, t.request.operationId);
  const operationIds = transfers.map((t) => t.request.operationId);
  const hashes = transfers.map((t) => requestHash(t.request));
  const froms = transfers.map((t) => t.request.from);
  const tos = transfers.map((t) => t.request.to);
  const amounts = transfers.map((t) => t.request.amountMinor);
  const currencies = transfers.map((t) => t.request.currency);
  const fences = transfers.map((t) => t.fence);
  const leaseIds = transfers.map((t) => t.leaseId);
  const unsafe =
    options.skipIdempotency === true ||
    options.skipFence === true ||
    options.skipLeaseCheck === true ||
    options.skipCreditLimit === true ||
    options.skipWalletStatus === true;
  // Production calls the function that always checks; only the negative controls (the owner's
  // connection, never a worker role) reach the variant with switches, where the harness put it.
  const rows = unsafe
    ? await callUnsafeDecision(
        'apply_transfers_unsafe',
        () => prisma.$queryRaw<BatchRow[]>`
        SELECT ord, outcome, status, reason, fence, wallet_fence FROM apply_transfers_unsafe(
          ${operationIds}::text[], ${hashes}::text[], ${froms}::text[], ${tos}::text[], ${amounts}::bigint[],
          ${currencies}::text[], ${fences}::bigint[], ${leaseIds}::uuid[], ${!options.skipIdempotency}::boolean,
          ${!options.skipFence}::boolean, ${!options.skipLeaseCheck}::boolean, ${!options.skipCreditLimit}::boolean,
          ${!options.skipWalletStatus}::boolean)`,
      )
    : await prisma.$queryRaw<BatchRow[]>`
        SELECT ord, outcome, status, reason, fence, wallet_fence FROM apply_transfers(
          ${operationIds}::text[], ${hashes}::text[], ${froms}::text[], ${tos}::text[], ${amounts}::bigint[],
          ${currencies}::text[], ${fences}::bigint[], ${leaseIds}::uuid[])`;
  if (rows.length !== transfers.length) {
    throw new LedgerContractError('batch_row_count', `${rows.length} rows for ${transfers.length} transfers`);
  }
  return rows.map((row, i) => {
    const transfer = transfers[i];
    if (row.ord !== i + 1 || transfer === undefined) {
      throw new LedgerContractError('batch_order', `${row.ord} at ${i + 1}`);
    }
    return decisionResult(row, transfer.request.operationId, transfer.fence);
  });
}

interface BatchRow extends DecisionRow {
  ord: number;
}

export function decisionResult(row: DecisionRow, operationId: string, fence: bigint): ApplyResult {
  const outcome = row.outcome;
  if (!isDecisionOutcome(outcome)) throw new LedgerContractError('unknown_outcome', JSON.stringify(outcome));
  switch (outcome) {
    case 'applied':
      return { outcome: 'applied', operationId, fence: fence.toString() };
    case 'rejected':
      if (!isRejectionReason(row.reason)) throw new LedgerContractError('unknown_rejection_reason', `${row.reason}`);
      return { outcome: 'rejected', operationId, reason: row.reason, fence: fence.toString() };
    case 'duplicate':
      return { outcome: 'duplicate', operationId, stored: storedOutcome(row) };
    case 'conflict':
      return { outcome: 'conflict', operationId, stored: storedOutcome(row) };
    case 'stale_fence':
      // Above our token, or equal to it when another lease holds that token.
      if (row.wallet_fence === null || row.wallet_fence < fence) {
        throw new LedgerContractError('stale_fence_below_ours', `(ours ${fence}, wallet ${row.wallet_fence})`);
      }
      return { outcome: 'stale_fence', operationId, walletFence: row.wallet_fence };
    default:
      // Every name in DECISION_OUTCOMES has its case: a new one fails to compile here.
      return assertNever(outcome);
  }
}

function assertNever(value: never): never {
  throw new LedgerContractError('unknown_outcome', JSON.stringify(value));
}

/** The PostgreSQL SQLSTATE behind an error thrown by a Prisma raw query, when there is one. */
export function postgresErrorCode(err: unknown): string | null {
  const meta = (err as { meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | null)?.meta;
  const code = meta?.driverAdapterError?.cause?.originalCode;
  return typeof code === 'string' ? code : null;
}

/**
 * SQLSTATEs that mean "try again": serialization failure, deadlock, lock or statement timeout,
 * idle-in-transaction timeout, admin shutdown/termination, connection failures.
 * Any other database error is retried too (the decision is idempotent), but these are expected.
 */
export const RETRYABLE_SQLSTATES: ReadonlySet<string> = new Set([
  '40001',
  '40P01',
  '55P03',
  '57014',
  '25P03',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08003',
  '08006',
]);
