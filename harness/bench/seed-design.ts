// seed-design: the transfer as most write-ups show it, on the same schema, driven like
// db-ceiling: an interactive Prisma transaction of separate statements (idempotency insert,
// fenced debit with a row-count check, credit, ledger entries), one transfer per commit,
// workers × concurrency connections. The baseline the pipeline is compared with.
// (The two ledger entries go in one multi-row INSERT, one round trip fewer than most
// write-ups: the comparison is, if anything, kind to this design.)

import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { Prisma } from '../../src/generated/prisma/client.ts';
import { postgresErrorCode, RETRYABLE_SQLSTATES } from '../../src/ledger/apply-transfer.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { UNLOCKED_FENCE } from './decision-call.ts';
import { type LaneDriver, runLanesCase } from './lanes-case.ts';

/** Attempts of one transfer; deadlocks are possible here (rows are locked in request order). */
export const SEED_DESIGN_ATTEMPTS_MAX = 5;
/** Interactive transaction bounds, generous so a loaded machine does not fail the baseline. */
export const SEED_DESIGN_TX_MAX_WAIT_MS = 10_000;
export const SEED_DESIGN_TX_TIMEOUT_MS = 15_000;

/** The debit matched no row: a stale fence or insufficient funds; the transaction rolls back. */
export class DebitRefusedError extends Error {
  override name = 'DebitRefusedError';
}

type SeedOutcome = 'applied' | 'duplicate';

export async function seedDesignTransfer(
  prisma: PrismaClient,
  request: TransferRequest,
  fence: bigint,
): Promise<SeedOutcome> {
  const { operationId, from, to, amountMinor, currency } = request;
  return prisma.$transaction(
    async (tx) => {
      const recorded = await tx.$executeRaw`
      INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency, status, fence)
      VALUES (${operationId}::text, ${requestHash(request)}::text, ${from}::text, ${to}::text, ${amountMinor}::bigint,
              ${currency}::text, 'applied', ${fence}::bigint)
      ON CONFLICT (operation_id) DO NOTHING`;
      if (recorded === 0) return 'duplicate';
      const debited = await tx.$queryRaw<{ balance: bigint; credit_limit: bigint }[]>`
      UPDATE wallets SET balance = balance - ${amountMinor}::bigint, last_fence = ${fence}::bigint, updated_at = now()
       WHERE id = ${from}::text AND last_fence <= ${fence}::bigint AND balance >= ${amountMinor}::bigint
      RETURNING balance, credit_limit`;
      if (debited.length !== 1) {
        throw new DebitRefusedError(`debit of ${from} for ${operationId} matched ${debited.length} rows`);
      }
      const credited = await tx.$queryRaw<{ balance: bigint; credit_limit: bigint }[]>`
      UPDATE wallets SET balance = balance + ${amountMinor}::bigint, updated_at = now() WHERE id = ${to}::text
      RETURNING balance, credit_limit`;
      if (credited.length !== 1) throw new Error(`credit of ${to} for ${operationId} matched ${credited.length} rows`);
      await tx.$executeRaw`
      INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, created_at)
      VALUES (${operationId}::text, ${from}::text, 'debit', ${-amountMinor}::bigint, ${debited[0]?.balance}::bigint,
              ${debited[0]?.credit_limit}::bigint, ${fence}::bigint, clock_timestamp()),
             (${operationId}::text, ${to}::text, 'credit', ${amountMinor}::bigint, ${credited[0]?.balance}::bigint,
              ${credited[0]?.credit_limit}::bigint, ${fence}::bigint, clock_timestamp())`;
      return 'applied';
    },
    { maxWait: SEED_DESIGN_TX_MAX_WAIT_MS, timeout: SEED_DESIGN_TX_TIMEOUT_MS },
  );
}

function retryable(err: unknown): boolean {
  const sqlState = postgresErrorCode(err);
  if (sqlState !== null) return RETRYABLE_SQLSTATES.has(sqlState);
  // P2028: the interactive transaction could not start or ran out of time.
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2028';
}

export function runSeedDesign(ctx: CaseContext): Promise<CaseRunResult> {
  return runLanesCase(ctx, (databaseUrl, lanes): LaneDriver => {
    let prisma: PrismaClient | null = null;
    let retries = 0;
    let refused = 0;
    const client = () => {
      if (prisma === null) throw new Error('seed-design client is not open');
      return prisma;
    };
    return {
      async open() {
        prisma = createPrisma({ ...ctx.config, databaseUrl, dbPoolMax: lanes });
        await Promise.all(Array.from({ length: lanes }, () => client().$queryRaw`SELECT 1`));
      },
      async apply(request) {
        for (let attempt = 1; ; attempt++) {
          try {
            await seedDesignTransfer(client(), request, UNLOCKED_FENCE);
            return;
          } catch (err) {
            if (err instanceof DebitRefusedError) {
              refused += 1;
              return;
            }
            if (!retryable(err) || attempt >= SEED_DESIGN_ATTEMPTS_MAX) throw err;
            retries += 1;
          }
        }
      },
      async close() {
        if (prisma !== null) await closePrisma(prisma);
      },
      notes: () => ({ retries, debitsRefused: refused }),
    };
  });
}
