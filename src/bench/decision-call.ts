// The worker's decision, apply_transfer(), called from plain `pg` with the same arguments as
// src/ledger/apply-transfer.ts sends through Prisma (request hash included, both checks on):
// the db-ceiling case and the Graphile Worker task run exactly this.
import { requestHash } from '../ledger/request-hash.ts';
import type { TransferRequest } from '../ledger/transfer-request.ts';

/**
 * No lock issues tokens in the cases that call this: every call carries this fence. The fence
 * comparison still runs (and passes: a wallet's last_fence never exceeds it), so the database
 * does the same work as under the worker.
 */
export const UNLOCKED_FENCE = 1n;

const APPLY_TRANSFER_SQL =
  'SELECT outcome, status, reason, fence, wallet_fence FROM apply_transfer(' +
  '$1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::bigint, $8::boolean, $9::boolean)';

/** A pg pool or client, or Graphile Worker's `helpers.query`. */
export interface SqlRunner {
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}

export function decisionQuery(request: TransferRequest, fence: bigint): { text: string; values: unknown[] } {
  return {
    text: APPLY_TRANSFER_SQL,
    values: [
      request.operationId, requestHash(request), request.from, request.to,
      request.amountMinor.toString(), request.currency, fence.toString(), true, true,
    ],
  };
}

/** One decision; returns the outcome name (`applied`, `rejected`, `duplicate`, ...). */
export async function decide(
  client: SqlRunner, request: TransferRequest, fence: bigint = UNLOCKED_FENCE,
): Promise<string> {
  const { text, values } = decisionQuery(request, fence);
  const { rows } = await client.query(text, values);
  const row = rows[0] as { outcome?: unknown } | undefined;
  if (rows.length !== 1 || typeof row?.outcome !== 'string') throw new Error(`apply_transfer returned ${rows.length} rows`);
  return row.outcome;
}
