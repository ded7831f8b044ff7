// The terminal end of an intake request that no worker can decide: its stored body is outside the
// wire format at the widest settings (stored before the intake refused such bodies, issue 41). A
// worker that refuses a job as invalid asks request_decide_invalid()
// (prisma/sql/request_decide_invalid.sql) to record it rejected `invalid_request`, so it is
// answered once in the feed and never sent again, instead of failing, being given up and coming
// back after every redrive.
import type { PrismaClient } from '../db/prisma.ts';
import type { TransferOutcome } from './outcome.ts';
import { ID_PATTERN } from './transfer-request.ts';

/**
 * The function (`regprocedure`), granted to the worker role. It takes no body from its caller:
 * it checks the stored request's own body and records a decision only when no worker could make
 * one, so a worker credential cannot end a request that some worker can decide.
 */
export const INVALID_REQUEST_FUNCTION = 'request_decide_invalid(text)';

/**
 * Records the open intake request of `operationId` rejected as `invalid_request` when its stored
 * body is one no worker can decide. Answers that decision, or null: no id to ask about, the
 * operation decided already, no open request, or a body some worker could decide (this worker's
 * own settings are narrower). Throws the driver's error when the call fails.
 */
export async function decideInvalidRequest(
  prisma: PrismaClient,
  operationId: unknown,
): Promise<TransferOutcome | null> {
  if (typeof operationId !== 'string' || !ID_PATTERN.test(operationId)) return null;
  const rows = await prisma.$queryRaw<{ decided: boolean }[]>`
    SELECT request_decide_invalid(${operationId}) AS decided`;
  if (rows[0]?.decided !== true) return null;
  return { outcome: 'rejected', operationId, reason: 'invalid_request', fence: '0' };
}
