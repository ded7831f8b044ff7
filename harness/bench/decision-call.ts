// The worker's decision, apply_transfer(), called from plain `pg` with the same arguments as
// src/ledger/apply-transfer.ts sends through Prisma (request hash included; every check runs):
// the db-ceiling case and the Graphile Worker task run exactly this. Also the batched
// apply_transfers() the same way, and the spread-out transfers that bench:explain and
// bench:call-cost send.
import { requestHash } from '../../src/ledger/request-hash.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';

/**
 * No lock issues tokens in the cases that call this: every call carries this fence and this
 * lease id, as the riders of one lease do. The fence and lease comparison still runs (and
 * passes: a wallet's last_fence never exceeds it, and an equal one was set by this lease), so
 * the database does the same work as under the worker.
 */
export const UNLOCKED_FENCE = 1n;
export const UNLOCKED_LEASE_ID = '00000000-0000-4000-8000-00000000be4c';

const APPLY_TRANSFER_SQL =
  'SELECT outcome, status, reason, fence, wallet_fence FROM apply_transfer(' +
  '$1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::bigint, $8::uuid)';

/** A pg pool or client, or Graphile Worker's `helpers.query`. */
export interface SqlRunner {
  query(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}

export function decisionQuery(request: TransferRequest, fence: bigint): { text: string; values: unknown[] } {
  return {
    text: APPLY_TRANSFER_SQL,
    values: [
      request.operationId,
      requestHash(request),
      request.from,
      request.to,
      request.amountMinor.toString(),
      request.currency,
      fence.toString(),
      UNLOCKED_LEASE_ID,
    ],
  };
}

/** One decision; returns the outcome name (`applied`, `rejected`, `duplicate`, ...). */
export async function decide(
  client: SqlRunner,
  request: TransferRequest,
  fence: bigint = UNLOCKED_FENCE,
): Promise<string> {
  const { text, values } = decisionQuery(request, fence);
  const { rows } = await client.query(text, values);
  const row = rows[0] as { outcome?: unknown } | undefined;
  if (rows.length !== 1 || typeof row?.outcome !== 'string')
    throw new Error(`apply_transfer returned ${rows.length} rows`);
  return row.outcome;
}

/**
 * `count` distinct transfers numbered from `first` (ids `<tag>-<n>`), spread over the wallets
 * `wallet-1` … `wallet-<wallets>` so that consecutive ones rarely share a wallet; 1 minor unit
 * each, in the wallets' own currency.
 */
export function spreadTransfers(count: number, wallets: number, tag: string, first = 0): TransferRequest[] {
  return Array.from({ length: count }, (_, i) => {
    const n = first + i;
    const from = 1 + ((n * 7_919) % wallets);
    const to = 1 + ((from + 1 + (n % 97)) % wallets);
    return {
      operationId: `${tag}-${n}`,
      from: `wallet-${from}`,
      to: `wallet-${to === from ? (to % wallets) + 1 : to}`,
      amountMinor: 1n,
      currency: null,
    };
  });
}

/** One call of apply_transfers() (the worker's batched decision) for these transfers. */
export function batchQuery(
  requests: readonly TransferRequest[],
  fence: bigint = UNLOCKED_FENCE,
): { text: string; values: unknown[] } {
  return {
    text:
      'SELECT ord, outcome, status, reason, fence, wallet_fence FROM apply_transfers(' +
      '$1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::uuid[])',
    values: [
      requests.map((r) => r.operationId),
      requests.map((r) => requestHash(r)),
      requests.map((r) => r.from),
      requests.map((r) => r.to),
      requests.map((r) => r.amountMinor.toString()),
      requests.map((r) => r.currency),
      requests.map(() => fence.toString()),
      requests.map(() => UNLOCKED_LEASE_ID),
    ],
  };
}
