// Reads the stored outcome of one operation (for `npm run status`).
import type { PrismaClient } from '../db/prisma.ts';
import type { StoredStatus } from './vocabulary.ts';

export interface TransferRecord {
  operationId: string;
  status: StoredStatus;
  reason: string | null;
  from: string;
  to: string;
  amount: string;
  currency: string | null;
  fence: string;
  createdAt: string;
}

export async function readTransfer(prisma: PrismaClient, operationId: string): Promise<TransferRecord | null> {
  const rows = await prisma.$queryRaw<
    {
      operation_id: string;
      status: StoredStatus;
      reason: string | null;
      from_wallet: string;
      to_wallet: string;
      amount: bigint;
      currency: string | null;
      fence: bigint;
      created_at: Date;
    }[]
  >`
    SELECT operation_id, status, reason, from_wallet, to_wallet, amount, currency, fence, created_at
      FROM transfers WHERE operation_id = ${operationId}::text`;
  const row = rows[0];
  if (row === undefined) return null;
  return {
    operationId: row.operation_id,
    status: row.status,
    reason: row.reason,
    from: row.from_wallet,
    to: row.to_wallet,
    amount: row.amount.toString(),
    currency: row.currency,
    fence: row.fence.toString(),
    createdAt: row.created_at.toISOString(),
  };
}
