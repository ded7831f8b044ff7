// Checks the ledger invariants of DESIGN.md on the database and returns counterexamples.
// Read-only, in one REPEATABLE READ snapshot so a running system is judged at one instant.
import type { PrismaClient } from '../db/prisma.ts';

export const COUNTEREXAMPLES_MAX = 10;

export interface InvariantResult {
  readonly name: string;
  readonly ok: boolean;
  readonly counterexamples: readonly Record<string, string | number | null>[];
}

export interface ReconcileReport {
  readonly ok: boolean;
  readonly totals: {
    readonly wallets: number;
    readonly balanceSum: string;
    readonly openingSum: string;
    readonly transfersApplied: number;
    readonly transfersRejected: number;
    readonly ledgerEntries: number;
  };
  readonly invariants: readonly InvariantResult[];
}

type Row = Record<string, unknown>;

function plain(row: Row): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] = typeof v === 'bigint' ? v.toString() : v === null || typeof v === 'number' ? v : String(v);
  }
  return out;
}

export async function reconcile(prisma: PrismaClient): Promise<ReconcileReport> {
  return prisma.$transaction(async (tx) => {
    await tx.$executeRaw`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`;
    const limit = COUNTEREXAMPLES_MAX;
    const check = async (name: string, rows: Promise<Row[]>): Promise<InvariantResult> => {
      const found = await rows;
      return { name, ok: found.length === 0, counterexamples: found.map(plain) };
    };

    const [totals] = await tx.$queryRaw<
      {
        wallets: bigint;
        balance_sum: bigint | null;
        opening_sum: bigint | null;
        applied: bigint;
        rejected: bigint;
        entries: bigint;
      }[]
    >`
      SELECT (SELECT count(*) FROM wallets) AS wallets,
             (SELECT sum(balance) FROM wallets)::bigint AS balance_sum,
             (SELECT sum(amount) FROM ledger_entries WHERE kind = 'opening')::bigint AS opening_sum,
             (SELECT count(*) FROM transfers WHERE status = 'applied') AS applied,
             (SELECT count(*) FROM transfers WHERE status = 'rejected') AS rejected,
             (SELECT count(*) FROM ledger_entries) AS entries`;
    if (totals === undefined) throw new Error('totals query returned no row');
    const balanceSum = totals.balance_sum ?? 0n;
    const openingSum = totals.opening_sum ?? 0n;

    const invariants: InvariantResult[] = [
      {
        name: 'conservation: sum of balances equals sum of opening balances',
        ok: balanceSum === openingSum,
        counterexamples:
          balanceSum === openingSum ? [] : [{ balanceSum: balanceSum.toString(), openingSum: openingSum.toString() }],
      },
      await check(
        'no negative balance',
        tx.$queryRaw<Row[]>`
        SELECT id AS wallet, balance FROM wallets WHERE balance < 0 ORDER BY id LIMIT ${limit}`,
      ),
      await check(
        'at most one debit per operation',
        tx.$queryRaw<Row[]>`
        SELECT operation_id, count(*) AS debits FROM ledger_entries WHERE kind = 'debit'
         GROUP BY operation_id HAVING count(*) > 1 ORDER BY operation_id LIMIT ${limit}`,
      ),
      await check(
        "every operation's entries sum to zero",
        tx.$queryRaw<Row[]>`
        SELECT operation_id, sum(amount) AS total FROM ledger_entries
         GROUP BY operation_id HAVING sum(amount) <> 0 ORDER BY operation_id LIMIT ${limit}`,
      ),
      await check(
        'every wallet balance equals the sum of its entries',
        tx.$queryRaw<Row[]>`
        SELECT w.id AS wallet, w.balance, coalesce(e.total, 0) AS entries_sum
          FROM wallets w LEFT JOIN (SELECT wallet_id, sum(amount) AS total FROM ledger_entries GROUP BY wallet_id) e
            ON e.wallet_id = w.id
         WHERE w.balance <> coalesce(e.total, 0) ORDER BY w.id LIMIT ${limit}`,
      ),
      await check(
        'applied transfers have one debit and one credit; others none',
        tx.$queryRaw<Row[]>`
        SELECT t.operation_id, t.status, count(e.id) FILTER (WHERE e.kind = 'debit') AS debits,
               count(e.id) FILTER (WHERE e.kind = 'credit') AS credits
          FROM transfers t LEFT JOIN ledger_entries e ON e.operation_id = t.operation_id
         GROUP BY t.operation_id, t.status
        HAVING (t.status = 'applied' AND (count(e.id) FILTER (WHERE e.kind = 'debit') <> 1
                                          OR count(e.id) FILTER (WHERE e.kind = 'credit') <> 1))
            OR (t.status = 'rejected' AND count(e.id) > 0)
         ORDER BY t.operation_id LIMIT ${limit}`,
      ),
      await check(
        'every money movement has an operation record',
        tx.$queryRaw<Row[]>`
        SELECT e.operation_id, e.wallet_id, e.kind, e.amount FROM ledger_entries e
         WHERE e.kind IN ('debit', 'credit')
           AND NOT EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = e.operation_id)
         ORDER BY e.id LIMIT ${limit}`,
      ),
      // Debits of one wallet are serialised by its row lock, so id order is commit order.
      await check(
        'per wallet, debit fences never decrease in commit order',
        tx.$queryRaw<Row[]>`
        SELECT wallet_id, operation_id, fence, previous_fence FROM (
          SELECT wallet_id, operation_id, fence, lag(fence) OVER (PARTITION BY wallet_id ORDER BY id) AS previous_fence
            FROM ledger_entries WHERE kind = 'debit') d
         WHERE fence < previous_fence ORDER BY wallet_id LIMIT ${limit}`,
      ),
      // One token, one lease: the riders of a lease share its token, but two leases that Redis
      // gave the same number must never both decide with it. Every decision is seen through its
      // record (refusals included) and every debit (the record keeps only the first outcome
      // when the no-idempotency control moves money again). Rows without a lease (written
      // before the lease-ids migration, or by the harness's naive apply) say nothing.
      await check(
        'per wallet, no token was used by two leases',
        tx.$queryRaw<Row[]>`
        SELECT wallet_id, fence, count(*) AS leases,
               string_agg(left(lease::text, 8) || ':' || operation_id, ' ' ORDER BY operation_id) AS lease_operations
          FROM (SELECT wallet_id, fence, lease, min(operation_id) AS operation_id
                  FROM (SELECT wallet_id, fence, lease, operation_id FROM ledger_entries
                         WHERE kind = 'debit' AND lease IS NOT NULL
                        UNION ALL
                        SELECT from_wallet, fence, lease, operation_id FROM transfers WHERE lease IS NOT NULL) u
                 GROUP BY wallet_id, fence, lease) per_lease
         GROUP BY wallet_id, fence HAVING count(*) > 1 ORDER BY wallet_id, fence LIMIT ${limit}`,
      ),
    ];

    return {
      ok: invariants.every((i) => i.ok),
      totals: {
        wallets: Number(totals.wallets),
        balanceSum: balanceSum.toString(),
        openingSum: openingSum.toString(),
        transfersApplied: Number(totals.applied),
        transfersRejected: Number(totals.rejected),
        ledgerEntries: Number(totals.entries),
      },
      invariants,
    };
  });
}
