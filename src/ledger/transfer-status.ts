// Reads the stored outcome of one operation (for `npm run status`), of any kind. A transfer's
// record keeps the fields it always had and gains its kind, original (none) and what was
// refunded of it; a payment's says what it refers to, and a hold or a split what became of it; a
// credit limit change the limit it set; a wallet operation the wallet as it is now.
// One statement, so the record, the hold and the refunds are read at one instant.
import type { PrismaClient } from '../db/prisma.ts';
import type { OperationKind, WalletRequest } from './transfer-request.ts';
import type { StoredStatus } from './vocabulary.ts';

export type { OperationKind } from './transfer-request.ts';

/** The wallet operations: `from` is the wallet they are decided on. */
export type WalletKind = WalletRequest['kind'];

interface RecordFields {
  operationId: string;
  status: StoredStatus;
  reason: string | null;
  from: string;
  /**
   * The credited wallet, as the outcome event's `to`: a transfer's or a hold's payee, a capture's
   * payee, a void's own `from` (the money goes back), a refund's original source; none for a split.
   */
  to: string | null;
  /** What moved, was held, captured, released (void) or refunded; a split's total; the limit a credit_limit asked for. */
  amount: string | null;
  currency: string | null;
  fence: string;
  createdAt: string;
  /** The hold a capture or a void ends, the original a refund pays back; null otherwise. */
  original: string | null;
  /** The operation's metadata as its message carried it; null when it had none. */
  metadata: Record<string, string> | null;
}

export interface TransferRecord extends RecordFields {
  kind: 'transfer';
  to: string;
  amount: string;
  /** Applied refunds of it so far. */
  refunded: string;
}

export interface HoldState {
  state: 'active' | 'captured' | 'voided' | 'expired';
  expiresAt: string;
  captured: string;
  released: string;
  /** The capture or void that ended it; null while active and when it expired. */
  endedBy: string | null;
  endedAt: string | null;
}

export interface HoldRecord extends RecordFields {
  kind: 'hold';
  /** Null for a rejected hold: nothing was held. */
  hold: HoldState | null;
  /** Applied refunds of its captured amount so far. */
  refunded: string;
}

export interface SplitLeg {
  leg: number;
  to: string;
  amount: string;
  /** Applied refunds by this leg's payee so far. */
  refunded: string;
}

export interface SplitRecord extends RecordFields {
  kind: 'split';
  /** Empty for a rejected split: no leg was paid. */
  legs: SplitLeg[];
  refunded: string;
}

export interface EndingOrRefundRecord extends RecordFields {
  kind: 'capture' | 'void' | 'refund';
}

/** A credit limit change: `limit` is the limit it set (applied) or asked for (rejected). */
export interface CreditLimitRecord extends RecordFields {
  kind: 'credit_limit';
  limit: string;
}

/**
 * Money that entered (a deposit: `from` and `to` are the wallet credited) or left (a withdrawal:
 * `to` is null) through the currency's settlement account, with the outside world's reference.
 */
export interface SettlementRecord extends RecordFields {
  kind: 'deposit' | 'withdrawal';
  reference: string;
}

/** A wallet operation, with its wallet as it is now (null when a rejected open left no wallet). */
export interface WalletRecord extends RecordFields {
  kind: WalletKind;
  wallet: { status: string; balance: string; held: string; creditLimit: string } | null;
}

export type OperationRecord =
  | WalletRecord
  | TransferRecord
  | HoldRecord
  | SplitRecord
  | EndingOrRefundRecord
  | CreditLimitRecord
  | SettlementRecord;

interface Row {
  operation_id: string;
  kind: OperationKind;
  status: StoredStatus;
  reason: string | null;
  from_wallet: string;
  to_wallet: string | null;
  amount: bigint | null;
  currency: string | null;
  original_id: string | null;
  reference: string | null;
  fence: bigint;
  created_at: Date;
  refunded: bigint;
  hold_state: HoldState['state'] | null;
  expires_at: Date | null;
  captured: bigint | null;
  released: bigint | null;
  ended_by: string | null;
  ended_at: Date | null;
  legs: SplitLeg[];
  metadata: Record<string, string> | null;
  wallet_status: string | null;
  wallet_balance: bigint | null;
  wallet_held: bigint | null;
  wallet_limit: bigint | null;
}

export async function readOperation(prisma: PrismaClient, operationId: string): Promise<OperationRecord | null> {
  const rows = await prisma.$queryRaw<Row[]>`
    SELECT t.operation_id, t.kind, t.status, t.reason, t.from_wallet, t.to_wallet, t.amount, t.currency,
           t.original_id, t.reference, t.fence, t.created_at, t.metadata,
           (SELECT coalesce(sum(r.amount), 0)::bigint FROM transfers r
             WHERE r.original_id = t.operation_id AND r.kind = 'refund' AND r.status = 'applied') AS refunded,
           h.state AS hold_state, h.expires_at, h.captured, h.released, h.ended_by, h.ended_at,
           (SELECT coalesce(json_agg(json_build_object(
                     'leg', l.leg, 'to', l.to_wallet, 'amount', l.amount::text,
                     'refunded', (SELECT coalesce(sum(r.amount), 0)::text FROM transfers r
                                   WHERE r.original_id = l.operation_id AND r.kind = 'refund'
                                     AND r.status = 'applied' AND r.from_wallet = l.to_wallet))
                   ORDER BY l.leg), '[]'::json)
              FROM split_legs l WHERE l.operation_id = t.operation_id) AS legs,
           w.status AS wallet_status, w.balance AS wallet_balance, w.held AS wallet_held, w.credit_limit AS wallet_limit
      FROM transfers t LEFT JOIN holds h ON t.kind = 'hold' AND h.hold_id = t.operation_id
      LEFT JOIN wallets w ON t.kind IN ('open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet')
                         AND w.id = t.from_wallet
     WHERE t.operation_id = ${operationId}::text`;
  const row = rows[0];
  return row === undefined ? null : recordOf(row);
}

function recordOf(row: Row): OperationRecord {
  const fields: RecordFields = {
    operationId: row.operation_id,
    status: row.status,
    reason: row.reason,
    from: row.from_wallet,
    to: row.to_wallet,
    amount: row.amount?.toString() ?? null,
    currency: row.currency,
    fence: row.fence.toString(),
    createdAt: row.created_at.toISOString(),
    original: row.original_id,
    metadata: row.metadata,
  };
  const refunded = row.refunded.toString();
  switch (row.kind) {
    case 'transfer':
      if (fields.to === null || fields.amount === null) {
        throw new Error(`transfer ${row.operation_id} has no destination or amount: the schema forbids it`);
      }
      return { ...fields, to: fields.to, amount: fields.amount, kind: 'transfer', refunded };
    case 'hold':
      return { ...fields, kind: 'hold', hold: holdStateOf(row), refunded };
    case 'split':
      return { ...fields, kind: 'split', legs: row.legs, refunded };
    case 'credit_limit':
      return { ...fields, kind: 'credit_limit', limit: fields.amount ?? '' };
    case 'deposit':
    case 'withdrawal':
      return { ...fields, kind: row.kind, reference: row.reference ?? '' };
    case 'open_wallet':
    case 'freeze_wallet':
    case 'unfreeze_wallet':
    case 'close_wallet':
      return { ...fields, kind: row.kind, wallet: walletNow(row) };
    default:
      return { ...fields, kind: row.kind };
  }
}

function holdStateOf(row: Row): HoldState | null {
  if (row.hold_state === null || row.expires_at === null) return null;
  return {
    state: row.hold_state,
    expiresAt: row.expires_at.toISOString(),
    captured: (row.captured ?? 0n).toString(),
    released: (row.released ?? 0n).toString(),
    endedBy: row.ended_by,
    endedAt: row.ended_at?.toISOString() ?? null,
  };
}

function walletNow(row: Row): WalletRecord['wallet'] {
  if (row.wallet_status === null) return null;
  return {
    status: row.wallet_status,
    balance: String(row.wallet_balance),
    held: String(row.wallet_held),
    creditLimit: String(row.wallet_limit),
  };
}
