// The database decision for one transfer: a single call of apply_transfer() (see the first
// migration), so idempotency record, fence check, balance check and double-entry ledger are
// one statement, one round trip and one commit.
import type { PrismaClient } from '../db/prisma.ts';
import { isRejectionReason, type ApplyResult, type StoredOutcome } from './outcome.ts';
import { requestHash } from './request-hash.ts';
import type { TransferRequest } from './transfer-request.ts';

export interface ApplyOptions {
  /** Negative controls only (the chaos harness): skip the idempotency record. */
  readonly skipIdempotency?: boolean;
  /** Negative controls only: skip the fence comparison on the source wallet. */
  readonly skipFence?: boolean;
}

interface DecisionRow {
  outcome: string;
  status: string | null;
  reason: string | null;
  fence: bigint | null;
  wallet_fence: bigint | null;
}

/** An answer from the database that breaks the function's contract: a bug, never retried quietly. */
export class LedgerContractError extends Error {
  override name = 'LedgerContractError';
}

function storedOutcome(row: DecisionRow): StoredOutcome {
  if (row.fence === null) throw new LedgerContractError(`stored outcome without a fence: ${JSON.stringify(row.outcome)}`);
  if (row.status === 'applied') return { status: 'applied', fence: row.fence.toString() };
  if (row.status === 'rejected' && isRejectionReason(row.reason)) {
    return { status: 'rejected', reason: row.reason, fence: row.fence.toString() };
  }
  throw new LedgerContractError(`unknown stored status ${JSON.stringify(row.status)} / reason ${JSON.stringify(row.reason)}`);
}

export async function applyTransfer(
  prisma: PrismaClient,
  request: TransferRequest,
  fence: bigint,
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  if (fence < 1n) throw new RangeError(`fence must be positive, got ${fence}`);
  const rows = await prisma.$queryRaw<DecisionRow[]>`
    SELECT outcome, status, reason, fence, wallet_fence FROM apply_transfer(
      ${request.operationId}::text, ${requestHash(request)}::text, ${request.from}::text, ${request.to}::text,
      ${request.amountMinor}::bigint, ${request.currency}::text, ${fence}::bigint,
      ${!options.skipIdempotency}::boolean, ${!options.skipFence}::boolean)`;
  const row = rows[0];
  if (rows.length !== 1 || row === undefined) throw new LedgerContractError(`apply_transfer returned ${rows.length} rows`);
  const { operationId } = request;

  switch (row.outcome) {
    case 'applied':
      return { outcome: 'applied', operationId, fence: fence.toString() };
    case 'rejected':
      if (!isRejectionReason(row.reason)) throw new LedgerContractError(`rejection without a known reason: ${row.reason}`);
      return { outcome: 'rejected', operationId, reason: row.reason, fence: fence.toString() };
    case 'duplicate':
      return { outcome: 'duplicate', operationId, stored: storedOutcome(row) };
    case 'conflict':
      return { outcome: 'conflict', operationId, stored: storedOutcome(row) };
    case 'stale_fence':
      if (row.wallet_fence === null || row.wallet_fence <= fence) {
        throw new LedgerContractError(`stale_fence without a higher wallet fence (ours ${fence}, wallet ${row.wallet_fence})`);
      }
      return { outcome: 'stale_fence', operationId, walletFence: row.wallet_fence };
    default:
      throw new LedgerContractError(`unknown outcome ${JSON.stringify(row.outcome)}`);
  }
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
  '40001', '40P01', '55P03', '57014', '25P03', '57P01', '57P02', '57P03', '08000', '08003', '08006',
]);
