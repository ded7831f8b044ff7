// A deliberately naive transfer, kept in the harness to show where the fence is essential:
// read the source balance, compute the new one, pause (a slow computation, a GC, a network
// hiccup), then write the computed value back as an absolute number. Under a lock that can
// expire, two holders interleave and one write erases the other (lost update).
//
// With the fence (the default) the read claims the row for the caller's token
// (`last_fence := token` only if not above it) and the write only lands
// `WHERE last_fence <= token`: a holder whose lease expired and whose wallet was taken over by
// a newer token is refused at the storage layer. Both halves are needed: fencing only the
// write lets through the interleaving "newer holder reads, stale holder writes, newer holder
// writes", because the stale write lands before the newer token has been seen by the row.
// Without the fence (`--unsafe no-fencing --apply naive`) the read and the write are plain
// (the write still records the highest token seen, as apply_transfer does with the check off).
//
// Only the source wallet gets the absolute write; the credit is an increment and the chaos
// workload of this mode never credits a source wallet, so the lock of the source (plus the
// fence) is the only thing between two writers of a row. Not for production, obviously.
import { setTimeout as sleep } from 'node:timers/promises';
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { ApplyResult, StoredOutcome } from '../../src/ledger/outcome.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { isRejectionReason, type RejectionReason } from '../../src/ledger/vocabulary.ts';

/** The pause between the read and the write, drawn per transfer: the window a freeze must hit. */
export const NAIVE_WINDOW_MS_MIN = 50;
export const NAIVE_WINDOW_MS_MAX = 150;

export interface NaiveApplyOptions {
  /** Claim the row at read and guard the write with the token (false: the unsafe control). */
  readonly fence: boolean;
  /** Called after the read, before the pause: the naive "I still hold the lock" check. */
  readonly assertHeld: () => void;
  readonly random?: () => number;
}

class StaleWrite extends Error {
  constructor(readonly walletFence: bigint) {
    super('stale write refused');
  }
}

interface StoredRow {
  request_hash: string;
  status: string;
  reason: string | null;
  fence: bigint;
}

function stored(row: StoredRow): StoredOutcome {
  if (row.status === 'applied') return { status: 'applied', fence: row.fence.toString() };
  if (isRejectionReason(row.reason)) return { status: 'rejected', reason: row.reason, fence: row.fence.toString() };
  throw new Error(`unknown stored status ${row.status}`);
}

async function walletFence(prisma: PrismaClient, walletId: string): Promise<bigint | null> {
  const rows = await prisma.$queryRaw<
    { last_fence: bigint }[]
  >`SELECT last_fence FROM wallets WHERE id = ${walletId}::text`;
  return rows[0]?.last_fence ?? null;
}

async function reject(
  prisma: PrismaClient,
  request: TransferRequest,
  hash: string,
  token: bigint,
  reason: RejectionReason,
): Promise<ApplyResult> {
  await prisma.$executeRaw`
    INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency, status, reason, fence)
    VALUES (${request.operationId}::text, ${hash}::text, ${request.from}::text, ${request.to}::text,
            ${request.amountMinor}::bigint, ${request.currency}::text, 'rejected', ${reason}::text, ${token}::bigint)
    ON CONFLICT (operation_id) DO NOTHING`;
  return { outcome: 'rejected', operationId: request.operationId, reason, fence: token.toString() };
}

type Transaction = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/**
 * The credit of the payee and both entries, with the running balances as this apply believes
 * them: the source's is the value it wrote, the payee's what its row holds after the credit.
 */
async function creditAndPost(
  tx: Transaction,
  request: TransferRequest,
  operationId: string,
  token: bigint,
  computed: bigint,
): Promise<void> {
  const credited = await tx.$queryRaw<{ balance: bigint }[]>`
    UPDATE wallets SET balance = balance + ${request.amountMinor}::bigint, updated_at = CURRENT_TIMESTAMP
     WHERE id = ${request.to}::text RETURNING balance`;
  await tx.$executeRaw`
    INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, created_at)
    SELECT x.op, x.wallet, x.kind, x.amount, x.after, w.credit_limit, x.fence, clock_timestamp()
      FROM (VALUES (1, ${operationId}::text, ${request.from}::text, 'debit', ${-request.amountMinor}::bigint,
                    ${computed}::bigint, ${token}::bigint),
                   (2, ${operationId}::text, ${request.to}::text, 'credit', ${request.amountMinor}::bigint,
                    ${credited[0]?.balance ?? null}::bigint, ${token}::bigint)) AS x(n, op, wallet, kind, amount, after, fence)
      JOIN wallets w ON w.id = x.wallet ORDER BY x.n`;
}

export async function naiveApply(
  prisma: PrismaClient,
  request: TransferRequest,
  token: bigint,
  options: NaiveApplyOptions,
): Promise<ApplyResult> {
  const hash = requestHash(request);
  const { operationId } = request;

  // Idempotency stays on (the primary key backs it at the write): this mode isolates the fence.
  const existing = await prisma.$queryRaw<StoredRow[]>`
    SELECT request_hash, status, reason, fence FROM transfers WHERE operation_id = ${operationId}::text`;
  if (existing[0] !== undefined) {
    const outcome = existing[0].request_hash === hash ? 'duplicate' : 'conflict';
    return { outcome, operationId, stored: stored(existing[0]) };
  }

  // Read.
  const source = options.fence
    ? await prisma.$queryRaw<{ balance: bigint; currency: string }[]>`
        UPDATE wallets SET last_fence = ${token}::bigint
         WHERE id = ${request.from}::text AND last_fence <= ${token}::bigint
        RETURNING balance, currency`
    : await prisma.$queryRaw<{ balance: bigint; currency: string }[]>`
        SELECT balance, currency FROM wallets WHERE id = ${request.from}::text`;
  if (source[0] === undefined) {
    const fence = options.fence ? await walletFence(prisma, request.from) : null;
    if (fence !== null) return { outcome: 'stale_fence', operationId, walletFence: fence };
    return reject(prisma, request, hash, token, 'unknown_wallet');
  }
  const destination = await prisma.$queryRaw<{ currency: string }[]>`
    SELECT currency FROM wallets WHERE id = ${request.to}::text`;
  if (destination[0] === undefined) return reject(prisma, request, hash, token, 'unknown_wallet');
  if (
    destination[0].currency !== source[0].currency ||
    (request.currency !== null && request.currency !== source[0].currency)
  ) {
    return reject(prisma, request, hash, token, 'currency_mismatch');
  }
  if (source[0].balance < request.amountMinor) return reject(prisma, request, hash, token, 'insufficient_funds');

  // Compute, check the lease the naive way, and take our time.
  const computed = source[0].balance - request.amountMinor;
  options.assertHeld();
  const random = options.random ?? Math.random;
  await sleep(NAIVE_WINDOW_MS_MIN + Math.floor(random() * (NAIVE_WINDOW_MS_MAX - NAIVE_WINDOW_MS_MIN + 1)));

  // Write the absolute value.
  try {
    await prisma.$transaction(async (tx) => {
      const written = options.fence
        ? await tx.$executeRaw`
            UPDATE wallets SET balance = ${computed}::bigint, last_fence = GREATEST(last_fence, ${token}::bigint),
                   updated_at = CURRENT_TIMESTAMP
             WHERE id = ${request.from}::text AND last_fence <= ${token}::bigint`
        : await tx.$executeRaw`
            UPDATE wallets SET balance = ${computed}::bigint, last_fence = GREATEST(last_fence, ${token}::bigint),
                   updated_at = CURRENT_TIMESTAMP
             WHERE id = ${request.from}::text`;
      if (written !== 1) {
        const rows = await tx.$queryRaw<
          { last_fence: bigint }[]
        >`SELECT last_fence FROM wallets WHERE id = ${request.from}::text`;
        throw new StaleWrite(rows[0]?.last_fence ?? 0n);
      }
      await creditAndPost(tx, request, operationId, token, computed);
      // No ON CONFLICT: a twin that got here first makes this fail and roll back; the retry
      // then answers from the record.
      await tx.$executeRaw`
        INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency, status, reason, fence)
        VALUES (${operationId}::text, ${hash}::text, ${request.from}::text, ${request.to}::text,
                ${request.amountMinor}::bigint, ${request.currency}::text, 'applied', NULL, ${token}::bigint)`;
    });
  } catch (err) {
    if (err instanceof StaleWrite) return { outcome: 'stale_fence', operationId, walletFence: err.walletFence };
    throw err;
  }
  return { outcome: 'applied', operationId, fence: token.toString() };
}
