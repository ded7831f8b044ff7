// The decision of payments (holds, captures, voids, refunds, splits) and of credit limit changes
// (a credit_limit's new limit travels in the amounts array): one call of
// apply_payments() for many, in one round trip and one commit, as applyTransfers() does for
// transfers (the payments migration has every rule). decideOperations() is what the worker's
// batcher calls: a batch's transfers go to apply_transfers() exactly as before, its payments to
// apply_payments(), and each operation keeps its own answer in the batch's order.
import { TRANSFER_BATCH_MAX_LIMIT } from '../config/config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { LedgerContractError } from '../errors.ts';
import {
  type ApplyOptions,
  applyTransfers,
  assertFenced,
  callUnsafeDecision,
  type DecisionRow,
  decisionResult,
  type FencedTransfer,
} from './apply-transfer.ts';
import type { ApplyResult } from './outcome.ts';
import { requestHash } from './request-hash.ts';
import {
  isPaymentRequest,
  type OperationKind,
  type OperationRequest,
  operationKindOf,
  type PaymentRequest,
  type TransferRequest,
  walletOf,
} from './transfer-request.ts';

/** The worker's decision of payments (`regprocedure`), granted to the worker role. */
export const PAYMENT_DECISION_FUNCTION =
  'apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[])';
/** The expiry sweep every worker runs (src/ledger/hold-sweeper.ts), granted to the worker role. */
export const HOLD_SWEEP_FUNCTION = 'holds_expire(integer)';

export interface PaymentOptions extends ApplyOptions {
  /** HOLD_EXPIRY_MAX_MS: the furthest expiry a hold may ask for, checked again by the decision. */
  readonly holdExpiryMaxMs: number;
  /** Negative controls only (`double-capture`): a capture or void of an ended hold is not refused. */
  readonly skipHoldState?: boolean;
  /** Negative controls only (`refund-unbounded`): refunds may exceed their original. */
  readonly skipRefundBound?: boolean;
}

/** One operation of any kind, the fencing token it is decided under and that token's lease. */
export interface FencedOperation {
  readonly request: OperationRequest;
  readonly fence: bigint;
  readonly leaseId: string;
}

interface PaymentRow extends DecisionRow {
  ord: number;
}

interface PaymentColumns {
  kinds: string[];
  operationIds: string[];
  hashes: string[];
  froms: string[];
  tos: (string | null)[];
  amounts: (bigint | null)[];
  currencies: (string | null)[];
  refs: (string | null)[];
  expiresInMs: (number | null)[];
  expiresAt: (string | null)[];
  legs: (string | null)[];
  metadata: (string | null)[];
  fences: bigint[];
  leaseIds: string[];
}

function columnsOf(items: readonly FencedPayment[]): PaymentColumns {
  const c: PaymentColumns = {
    kinds: [],
    operationIds: [],
    hashes: [],
    froms: [],
    tos: [],
    amounts: [],
    currencies: [],
    refs: [],
    expiresInMs: [],
    expiresAt: [],
    legs: [],
    metadata: [],
    fences: [],
    leaseIds: [],
  };
  for (const { request, fence, leaseId } of items) {
    const r: KindedRequest = isPaymentRequest(request) ? request : { ...request, kind: 'transfer' };
    c.kinds.push(r.kind);
    c.metadata.push(r.metadata === undefined ? null : JSON.stringify(r.metadata));
    c.operationIds.push(r.operationId);
    c.hashes.push(requestHash(request));
    c.froms.push(walletOf(request));
    c.tos.push(r.kind === 'hold' || r.kind === 'transfer' ? r.to : null);
    c.amounts.push(amountOf(r));
    c.currencies.push(
      r.kind === 'transfer' ||
        r.kind === 'hold' ||
        r.kind === 'split' ||
        r.kind === 'deposit' ||
        r.kind === 'withdrawal' ||
        r.kind === 'open_wallet'
        ? r.currency
        : null,
    );
    c.refs.push(refOf(r));
    c.expiresInMs.push(r.kind === 'hold' ? r.expiresInMs : null);
    c.expiresAt.push(r.kind === 'hold' ? r.expiresAt : null);
    c.legs.push(
      r.kind === 'split'
        ? JSON.stringify(r.legs.map((leg) => ({ to: leg.to, amount: leg.amountMinor.toString() })))
        : null,
    );
    c.fences.push(fence);
    c.leaseIds.push(leaseId);
  }
  return c;
}

/** A request with its kind said: a transfer (one with metadata is decided here) gets `transfer`. */
type KindedRequest = PaymentRequest | (TransferRequest & { readonly kind: 'transfer' });

/** What p_amounts carries: what moves (absent: NULL), a credit_limit's or an opening's credit limit. */
function amountOf(r: KindedRequest): bigint | null {
  switch (r.kind) {
    case 'transfer':
    case 'hold':
    case 'deposit':
    case 'withdrawal':
    case 'capture':
    case 'refund':
      return r.amountMinor;
    case 'credit_limit':
      return r.limitMinor;
    case 'open_wallet':
      return r.creditLimitMinor ?? 0n;
    default:
      return null;
  }
}

/**
 * What p_refs carries: a capture's or void's hold, a refund's original, a deposit's or withdrawal's
 * reference, a freeze_wallet's credits.
 */
function refOf(r: KindedRequest): string | null {
  switch (r.kind) {
    case 'capture':
    case 'void':
      return r.hold;
    case 'refund':
      return r.original;
    case 'deposit':
    case 'withdrawal':
      return r.reference;
    case 'freeze_wallet':
      return r.credits ?? 'allowed';
    default:
      return null;
  }
}

/** A payment, or a transfer that carries metadata (apply_transfers() keeps none). */
interface FencedPayment extends FencedOperation {
  readonly request: OperationRequest;
}

/** Decided through apply_transfers(): a transfer without metadata (every other goes through apply_payments()). */
function decidedAsTransfer(request: OperationRequest): request is TransferRequest {
  return !isPaymentRequest(request) && request.metadata === undefined;
}

/**
 * Decides many payments in one round trip and one commit, in order; one result per payment, in
 * the same order. Each is decided on its own; an error fails the whole call, which is safe to
 * retry (every payment in it is idempotent).
 */
export async function applyPayments(
  prisma: PrismaClient,
  payments: readonly FencedPayment[],
  options: PaymentOptions,
): Promise<ApplyResult[]> {
  if (payments.length < 1 || payments.length > TRANSFER_BATCH_MAX_LIMIT) {
    throw new RangeError(`between 1 and ${TRANSFER_BATCH_MAX_LIMIT} payments per call, got ${payments.length}`);
  }
  for (const p of payments) assertFenced(p.fence, p.leaseId, p.request.operationId);
  const c = columnsOf(payments);
  const metadata = c.metadata.some((m) => m !== null) ? c.metadata : null;
  const unsafe =
    options.skipIdempotency === true ||
    options.skipFence === true ||
    options.skipLeaseCheck === true ||
    options.skipHoldState === true ||
    options.skipRefundBound === true ||
    options.skipCreditLimit === true ||
    options.skipWalletStatus === true;
  const rows = unsafe
    ? await callUnsafeDecision(
        'apply_payments_unsafe',
        () => prisma.$queryRaw<PaymentRow[]>`
        SELECT ord, outcome, status, reason, fence, wallet_fence FROM apply_payments_unsafe(
          ${c.kinds}::text[], ${c.operationIds}::text[], ${c.hashes}::text[], ${c.froms}::text[], ${c.tos}::text[],
          ${c.amounts}::bigint[], ${c.currencies}::text[], ${c.refs}::text[], ${c.expiresInMs}::bigint[],
          ${c.expiresAt}::timestamptz[], ${c.legs}::jsonb[], ${c.fences}::bigint[], ${c.leaseIds}::uuid[],
          ${options.holdExpiryMaxMs}::bigint, ${!options.skipIdempotency}::boolean, ${!options.skipFence}::boolean,
          ${!options.skipLeaseCheck}::boolean, ${!options.skipHoldState}::boolean, ${!options.skipRefundBound}::boolean,
          ${!options.skipCreditLimit}::boolean, ${!options.skipWalletStatus}::boolean, ${metadata}::jsonb[])`,
      )
    : await prisma.$queryRaw<PaymentRow[]>`
        SELECT ord, outcome, status, reason, fence, wallet_fence FROM apply_payments(
          ${c.kinds}::text[], ${c.operationIds}::text[], ${c.hashes}::text[], ${c.froms}::text[], ${c.tos}::text[],
          ${c.amounts}::bigint[], ${c.currencies}::text[], ${c.refs}::text[], ${c.expiresInMs}::bigint[],
          ${c.expiresAt}::timestamptz[], ${c.legs}::jsonb[], ${c.fences}::bigint[], ${c.leaseIds}::uuid[],
          ${options.holdExpiryMaxMs}::bigint, ${metadata}::jsonb[])`;
  if (rows.length !== payments.length) {
    throw new LedgerContractError('batch_row_count', `${rows.length} rows for ${payments.length} payments`);
  }
  return rows.map((row, i) => {
    const payment = payments[i];
    if (row.ord !== i + 1 || payment === undefined)
      throw new LedgerContractError('batch_order', `${row.ord} at ${i + 1}`);
    return decisionResult(row, payment.request.operationId, payment.fence);
  });
}

/**
 * The order a batch's payments are decided in: an operation that names another goes after the
 * kinds it may name (a capture or void after holds, a refund after captures and splits). The
 * operations of one batch came from different jobs at once, so their order among themselves is
 * free, and a capture batched with its own hold finds it instead of being refused hold_not_found.
 */
const DECIDED_IN_ORDER: Readonly<Record<OperationKind, number>> = {
  transfer: 0,
  hold: 0,
  split: 0,
  capture: 1,
  void: 1,
  refund: 2,
  credit_limit: 0,
  deposit: 0,
  withdrawal: 0,
  open_wallet: 0,
  freeze_wallet: 0,
  unfreeze_wallet: 0,
  close_wallet: 0,
};

/**
 * One batch of operations of any kinds: the transfers through apply_transfers() (the decision of
 * today, untouched), then the payments, and the transfers that carry metadata, through
 * apply_payments(), so a refund finds a transfer decided in the same batch. Results in the batch's order. A batch of transfers only costs
 * exactly what it did; a mixed one costs one more round trip, on the same connection at a time.
 */
export async function decideOperations(
  prisma: PrismaClient,
  items: readonly FencedOperation[],
  options: PaymentOptions,
): Promise<ApplyResult[]> {
  // The common batch, transfers only, goes as it came: no copy on the hot path.
  if (items.every((item) => decidedAsTransfer(item.request))) {
    return applyTransfers(prisma, items as readonly FencedTransfer[], options);
  }
  const transfers: FencedTransfer[] = [];
  const transferAt: number[] = [];
  const payments: { item: FencedPayment; at: number }[] = [];
  items.forEach((item, i) => {
    const { request } = item;
    if (decidedAsTransfer(request)) {
      transfers.push({ request, fence: item.fence, leaseId: item.leaseId });
      transferAt.push(i);
    } else {
      payments.push({ item: { request, fence: item.fence, leaseId: item.leaseId }, at: i });
    }
  });
  // Stable: the batch's own order among operations of one rank.
  payments.sort(
    (a, b) => DECIDED_IN_ORDER[operationKindOf(a.item.request)] - DECIDED_IN_ORDER[operationKindOf(b.item.request)],
  );
  const results: ApplyResult[] = new Array(items.length);
  if (transfers.length > 0) {
    const decided = await applyTransfers(prisma, transfers, options);
    transferAt.forEach((at, k) => {
      results[at] = decided[k] as ApplyResult;
    });
  }
  const decided = await applyPayments(
    prisma,
    payments.map((p) => p.item),
    options,
  );
  payments.forEach((p, k) => {
    results[p.at] = decided[k] as ApplyResult;
  });
  return results;
}
