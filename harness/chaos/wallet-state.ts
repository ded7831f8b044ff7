// What the wallet checks read of the database after the drain: when each decision was taken, and
// every ledger entry of a wallet with its running balance, on one clock.
//
// The order. A wallet's status changes and its postings are all decided under its row lock (a
// status change locks the wallet it names; a debit and a credit lock every wallet they post to),
// so one wallet's decisions in two transactions never overlap: the first commits before the second
// holds the lock. Both kinds carry a clock_timestamp() taken while every lock of their batch is
// held: an entry's created_at (decision_written()) and an outcome event's decided_at
// (decision_recorded()), so per wallet they order decisions of different transactions, on the
// database server's one clock (as the ledger's own order of entries in time already assumes). None
// of the others orders them: transfers.created_at is CURRENT_TIMESTAMP, the transaction's start,
// taken before any lock (a batch that waited for a wallet starts earlier than the one it waited
// for); ledger ids number entries only, and a status change has none; feed positions are given by
// a sequencer that moves pending events in batches of its own. Inside one transaction (a batch,
// decided in array order) nothing stored says where an entry fell among the status changes: every
// entry is stamped before every event of its batch. transfers.created_at names the transaction
// (every record of a batch shares it; two batches that started in the same microsecond are taken
// as one, which only widens what is allowed), and the checks allow any place in it.
import type { PrismaClient } from '../../src/db/prisma.ts';

/** A decision: its transaction (start, µs since the epoch) and its decision clock (µs), both µs-exact. */
export interface DecisionStamp {
  readonly tx: bigint;
  readonly at: bigint;
}

/** A wallet's ledger entry, on the decision clock. */
export interface WalletEntryRow {
  id: bigint;
  operation_id: string;
  wallet_id: string;
  amount: bigint;
  balance_after: bigint;
  /** The entry's clock (µs). */
  at: bigint;
  /** Its operation's transaction start (µs); null for the opening entries and a hold's expiry. */
  tx: bigint | null;
  /** The same operation posts to `$held:<wallet>`: money the wallet's own hold gives back, or a hold placed. */
  own_hold: boolean;
}

export interface WalletLog {
  /** Operation id → when it was decided (records whose event was appended). */
  readonly decided: ReadonlyMap<string, DecisionStamp>;
  /** The entries of the wallets watched, in id order. */
  readonly entries: readonly WalletEntryRow[];
}

export const NO_WALLET_LOG: WalletLog = Object.freeze({ decided: new Map(), entries: [] });

/** Reads every decision's stamps and the ledger entries of `watched`. */
export async function readWalletLog(prisma: PrismaClient, watched: readonly string[]): Promise<WalletLog> {
  const stamps = await prisma.$queryRaw<{ operation_id: string; tx: bigint; at: bigint }[]>`
    WITH events AS (
        SELECT operation_id, decided_at FROM outcome_events WHERE kind IN ('applied', 'rejected')
        UNION ALL
        SELECT operation_id, decided_at FROM outcome_pending WHERE kind IN ('applied', 'rejected'))
    SELECT t.operation_id,
           (extract(epoch FROM t.created_at) * 1000000)::bigint AS tx,
           (extract(epoch FROM min(e.decided_at)) * 1000000)::bigint AS at
      FROM transfers t JOIN events e ON e.operation_id = t.operation_id
     GROUP BY t.operation_id, t.created_at`;
  const entries = await prisma.$queryRaw<WalletEntryRow[]>`
    SELECT le.id, le.operation_id, le.wallet_id, le.amount, le.balance_after,
           (extract(epoch FROM le.created_at) * 1000000)::bigint AS at,
           (extract(epoch FROM t.created_at) * 1000000)::bigint AS tx,
           EXISTS (SELECT 1 FROM ledger_entries h
                    WHERE h.operation_id = le.operation_id AND h.wallet_id = '$held:' || le.wallet_id) AS own_hold
      FROM ledger_entries le LEFT JOIN transfers t ON t.operation_id = le.operation_id
     WHERE le.wallet_id = ANY (${[...watched]}::text[])
     ORDER BY le.id`;
  return { decided: new Map(stamps.map((s) => [s.operation_id, { tx: s.tx, at: s.at }])), entries };
}
