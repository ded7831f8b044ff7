// The database after the drain, read once for every check: the ledger's own reconcile(), the
// decided records, the wallets, the debits, the holds, the commit order of the operations, and the
// payments' SQL invariants' counterexamples. Plain rows, so a check's unit test can build them.
import type { PrismaClient } from '../../src/db/prisma.ts';
import { type ReconcileReport, reconcile } from '../../src/ledger/reconciliation.ts';
import { PAYMENT_SQL_INVARIANTS, readSqlViolations, type SqlViolations } from './payment-sql-checks.ts';
import { readWalletLog, type WalletLog } from './wallet-state.ts';

/** A decided record (transfers row), with the fence it was decided under. */
export interface RecordRow {
  operation_id: string;
  request_hash: string;
  kind: string;
  original_id: string | null;
  from_wallet: string;
  to_wallet: string | null;
  amount: bigint | null;
  status: string;
  reason: string | null;
  fence: bigint;
  /** The metadata the record keeps (NULL: none). */
  metadata: Record<string, string> | null;
}

export interface WalletRow {
  id: string;
  balance: bigint;
  held: bigint;
  last_fence: bigint;
  credit_limit: bigint;
  currency: string;
  status: string;
}

export interface DebitRow {
  operation_id: string;
  wallet_id: string;
  amount: bigint;
  fence: bigint | null;
}

export interface HoldRow {
  hold_id: string;
  from_wallet: string;
  to_wallet: string;
  amount: bigint;
  state: string;
  captured: bigint;
  released: bigint;
  ended_by: string | null;
}

/** Events still pending at the check come after every sequenced one. */
const PENDING_AFTER = 2n ** 52n;

export interface DatabaseState {
  readonly ledger: ReconcileReport;
  /** Every decided record, in the order read, and by operation id. */
  readonly recordList: readonly RecordRow[];
  readonly records: ReadonlyMap<string, RecordRow>;
  readonly wallets: readonly WalletRow[];
  readonly debits: readonly DebitRow[];
  readonly holds: ReadonlyMap<string, HoldRow>;
  /** Operation id (or `$expiry:<hold>`) → the id of its first ledger entry: the commit order. */
  readonly firstEntry: ReadonlyMap<string, bigint>;
  /**
   * Operation id → where its outcome event is in the feed: its position once sequenced, else
   * after every position, in the order it was appended. Per wallet, the decision order: one
   * wallet's decisions commit one after the other, and a sequencer that sees the later one's
   * events sees the earlier one's.
   */
  readonly feedOrder: ReadonlyMap<string, bigint>;
  readonly sqlViolations: SqlViolations;
  /** The decisions' clock and the watched wallets' entries (wallet-state.ts). */
  readonly walletLog: WalletLog;
}

export async function readDatabaseState(prisma: PrismaClient, watched: readonly string[]): Promise<DatabaseState> {
  const ledger = await reconcile(prisma);
  const recordList = await prisma.$queryRaw<RecordRow[]>`
    SELECT operation_id, request_hash, kind, original_id, from_wallet, to_wallet, amount, status, reason, fence, metadata
      FROM transfers`;
  const wallets = await prisma.$queryRaw<WalletRow[]>`
    SELECT id, balance, held, last_fence, credit_limit, currency::text AS currency, status FROM wallets`;
  const debits = await prisma.$queryRaw<DebitRow[]>`
    SELECT operation_id, wallet_id, amount, fence FROM ledger_entries WHERE kind = 'debit'`;
  const sqlViolations = await readSqlViolations(prisma, PAYMENT_SQL_INVARIANTS);
  const holdRows = await prisma.$queryRaw<HoldRow[]>`
    SELECT hold_id, from_wallet, to_wallet, amount, state, captured, released, ended_by FROM holds`;
  const order = await prisma.$queryRaw<{ operation_id: string; first: bigint }[]>`
    SELECT operation_id, min(id) AS first FROM ledger_entries WHERE kind IN ('debit', 'credit') GROUP BY operation_id`;
  const feed = await prisma.$queryRaw<{ operation_id: string; at: bigint }[]>`
    SELECT operation_id, min(position) AS at FROM outcome_events
     WHERE kind IN ('applied', 'rejected') GROUP BY operation_id
    UNION ALL
    SELECT operation_id, ${PENDING_AFTER}::bigint + min(id) AS at FROM outcome_pending
     WHERE kind IN ('applied', 'rejected') GROUP BY operation_id`;
  return {
    ledger,
    recordList,
    records: new Map(recordList.map((r) => [r.operation_id, r])),
    wallets,
    debits,
    holds: new Map(holdRows.map((h) => [h.hold_id, h])),
    firstEntry: new Map(order.map((o) => [o.operation_id, o.first])),
    feedOrder: new Map(feed.map((f) => [f.operation_id, f.at])),
    sqlViolations,
    walletLog: await readWalletLog(prisma, watched),
  };
}
