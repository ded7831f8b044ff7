// Checks the ledger invariants of DESIGN.md on the database and returns counterexamples.
// Read-only, in one REPEATABLE READ snapshot so a running system is judged at one instant.
// Every kind of operation (transfer, hold, capture, void, refund, split) and the expiry sweep's
// releases are judged by what their kind may move; the payments' own invariants (holding
// wallets, holds ended once, refund bounds, split totals) follow the ledger's.
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
    /** What entered through deposits less what left through withdrawals (`npm run db:seed` funds by deposits). */
    readonly settledSum: string;
    readonly transfersApplied: number;
    readonly transfersRejected: number;
    readonly ledgerEntries: number;
  };
  readonly invariants: readonly InvariantResult[];
}

type Row = Record<string, unknown>;
type Reader = Pick<PrismaClient, '$queryRaw'>;
type Check = (name: string, rows: Promise<Row[]>) => Promise<InvariantResult>;

function plain(row: Row): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] = typeof v === 'bigint' ? v.toString() : v === null || typeof v === 'number' ? v : String(v);
  }
  return out;
}

/**
 * How long the one read-only transaction may run: every invariant reads the whole ledger, so it
 * grows with the ledger (Prisma's default of 5 s is a few hundred thousand entries on a slow
 * machine). It holds no lock that a decision waits for.
 */
export const RECONCILE_TIMEOUT_MS = 600_000;

/**
 * How long the transaction may wait to start: for a pooled connection, which on a busy pool or
 * server can take longer than Prisma's default of 2 s (seen: "Unable to start a transaction in
 * the given time" from `npm run reconcile` on a loaded machine). A session that cannot even be
 * opened fails sooner, after DB_CONNECTION_TIMEOUT_MS.
 */
export const RECONCILE_START_WAIT_MS = 30_000;

/** Every account's balance sums to the openings plus what entered less what left. */
function conservation(balanceSum: bigint, openingSum: bigint, settledSum: bigint): InvariantResult {
  const ok = balanceSum === openingSum + settledSum;
  return {
    name: 'conservation: sum of balances equals the opening balances plus what entered less what left',
    ok,
    counterexamples: ok
      ? []
      : [{ balanceSum: balanceSum.toString(), openingSum: openingSum.toString(), settledSum: settledSum.toString() }],
  };
}

export async function reconcile(prisma: PrismaClient): Promise<ReconcileReport> {
  return prisma.$transaction(
    async (tx) => {
      await tx.$executeRaw`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`;
      const check: Check = async (name, rows) => {
        const found = await rows;
        return { name, ok: found.length === 0, counterexamples: found.map(plain) };
      };

      const [totals] = await tx.$queryRaw<
        {
          wallets: bigint;
          balance_sum: bigint | null;
          opening_sum: bigint | null;
          settled_sum: bigint | null;
          applied: bigint;
          rejected: bigint;
          entries: bigint;
        }[]
      >`
      SELECT (SELECT count(*) FROM wallets) AS wallets,
             -- Every account: each wallet's own (balance) and its holding account (held).
             (SELECT sum(balance + held) FROM wallets)::bigint AS balance_sum,
             (SELECT sum(amount) FROM ledger_entries WHERE kind = 'opening')::bigint AS opening_sum,
             -- What entered less what left: minus the settlement accounts' entries.
             (SELECT -sum(amount) FROM ledger_entries WHERE starts_with(wallet_id, '$settlement:'))::bigint AS settled_sum,
             (SELECT count(*) FROM transfers WHERE status = 'applied') AS applied,
             (SELECT count(*) FROM transfers WHERE status = 'rejected') AS rejected,
             (SELECT count(*) FROM ledger_entries) AS entries`;
      if (totals === undefined) throw new Error('totals query returned no row');
      const balanceSum = totals.balance_sum ?? 0n;
      const openingSum = totals.opening_sum ?? 0n;
      const settledSum = totals.settled_sum ?? 0n;

      const invariants: InvariantResult[] = [
        conservation(balanceSum, openingSum, settledSum),
        ...(await limitInvariants(tx, check)),
        ...(await ledgerInvariants(tx, check)),
        ...(await paymentInvariants(tx, check)),
      ];

      return {
        ok: invariants.every((i) => i.ok),
        totals: {
          wallets: Number(totals.wallets),
          balanceSum: balanceSum.toString(),
          openingSum: openingSum.toString(),
          settledSum: settledSum.toString(),
          transfersApplied: Number(totals.applied),
          transfersRejected: Number(totals.rejected),
          ledgerEntries: Number(totals.entries),
        },
        invariants,
      };
    },
    { maxWait: RECONCILE_START_WAIT_MS, timeout: RECONCILE_TIMEOUT_MS },
  );
}

/**
 * A wallet's balance is its available balance, which debits may take down to minus its credit
 * limit (0 by default); what its holds reserve is its `held` (the balance of its holding account,
 * `$held:<wallet>`), never below zero. Now, and at every entry of the ledger's history: each
 * entry's running balance against the limit in force when it was written, which the entry carries
 * (a holding account's against zero; the funding accounts, which are negative by design, are not
 * wallets). A credit_limit may lower a limit only down to what is used, so the limit now can be
 * below one an old entry was written under: that entry is judged by its own. An entry without
 * one (written by a function older than credit limits, as the bench's anchors are) is held to 0,
 * the strictest.
 */
async function limitInvariants(tx: Reader, check: Check): Promise<InvariantResult[]> {
  const limit = COUNTEREXAMPLES_MAX;
  return [
    await check(
      'no balance below minus its credit limit, no negative held',
      tx.$queryRaw<Row[]>`
        SELECT id AS wallet, balance, credit_limit, held FROM wallets
         WHERE balance < -credit_limit OR held < 0 ORDER BY id LIMIT ${limit}`,
    ),
    await check(
      "no entry's running balance below minus the credit limit in force then",
      tx.$queryRaw<Row[]>`
        SELECT e.id AS entry, e.wallet_id AS account, e.operation_id, e.amount, e.balance_after, e.credit_limit
          FROM ledger_entries e
         WHERE CASE WHEN starts_with(e.wallet_id, '$held:') THEN e.balance_after < 0
                    WHEN starts_with(e.wallet_id, '$') THEN FALSE
                    ELSE e.balance_after < -coalesce(e.credit_limit, 0) END
         ORDER BY e.id LIMIT ${limit}`,
    ),
  ];
}

/** The invariants of every movement, whatever the operation that made it. */
async function ledgerInvariants(tx: Reader, check: Check): Promise<InvariantResult[]> {
  const limit = COUNTEREXAMPLES_MAX;
  return [
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
    // Both of a wallet's accounts, in one pass over the entries: its own (`balance`) and its
    // holding account `$held:<wallet>` (`held`).
    await check('every wallet balance equals the sum of its entries', walletSums(tx, limit)),
    await check(
      "every entry's running balance equals the sum of its account's entries up to it",
      runningBalances(tx, limit),
    ),
    await check('applied transfers have one debit and one credit; others none', entriesByKind(tx, limit)),
    await check('each settlement account mirrors the deposits and withdrawals of its currency', settlements(tx, limit)),
    // The sweep's releases have no record of their own: they are the expired hold's, named
    // `$expiry:<holdId>`, and only a hold that did expire may have them.
    await check(
      'every money movement has an operation record',
      tx.$queryRaw<Row[]>`
        SELECT e.operation_id, e.wallet_id, e.kind, e.amount FROM ledger_entries e
         WHERE e.kind IN ('debit', 'credit')
           AND NOT EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = e.operation_id)
           AND NOT (e.operation_id LIKE '$expiry:%'
                    AND EXISTS (SELECT 1 FROM holds h
                                 WHERE h.hold_id = substr(e.operation_id, 9) AND h.state = 'expired'))
         ORDER BY e.id LIMIT ${limit}`,
    ),
    // Debits of one wallet are serialised by its row lock, so id order is commit order. The
    // sweep's releases carry no fence (no lease decided them) and are left out of the order.
    await check(
      'per wallet, debit fences never decrease in commit order',
      tx.$queryRaw<Row[]>`
        SELECT wallet_id, operation_id, fence, previous_fence FROM (
          SELECT wallet_id, operation_id, fence, lag(fence) OVER (PARTITION BY wallet_id ORDER BY id) AS previous_fence
            FROM ledger_entries WHERE kind = 'debit' AND fence IS NOT NULL) d
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
}

/** A wallet whose `balance` is not the sum of its entries, or whose `held` not that of `$held:<wallet>`'s. */
function walletSums(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT w.id AS wallet, w.balance, coalesce(e.own, 0) AS entries_sum, w.held, coalesce(e.held, 0) AS held_entries_sum
      FROM wallets w
      LEFT JOIN (SELECT CASE WHEN starts_with(wallet_id, '$held:') THEN substr(wallet_id, 7) ELSE wallet_id END AS wallet,
                        sum(amount) FILTER (WHERE NOT starts_with(wallet_id, '$held:')) AS own,
                        sum(amount) FILTER (WHERE starts_with(wallet_id, '$held:')) AS held
                   FROM ledger_entries GROUP BY 1) e
        ON e.wallet = w.id
     WHERE w.balance <> coalesce(e.own, 0) OR w.held <> coalesce(e.held, 0) ORDER BY w.id LIMIT ${limit}`;
}

/**
 * Each entry's running balance (its account's balance after it; a holding account's is its
 * wallet's held) is the sum of the account's entries up to it, in id order: the order the
 * wallet's row lock gave them.
 */
function runningBalances(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT id AS entry, wallet_id AS account, operation_id, amount, balance_after, running AS entries_sum FROM (
      SELECT id, wallet_id, operation_id, amount, balance_after,
             sum(amount) OVER (PARTITION BY wallet_id ORDER BY id) AS running
        FROM ledger_entries) r
     WHERE balance_after <> running ORDER BY id LIMIT ${limit}`;
}

/**
 * What each kind of applied operation moves, by count and by wallet: one debit always (of the
 * source, or of its holding account for a capture or a void) and the credits of its kind; a
 * transfer to its payee, a hold to the source's holding account, a capture to its payee and
 * perhaps back to the source, a void back to the source, a refund to the original's source,
 * a split one credit per leg, each matching its leg, a deposit from its currency's settlement
 * account to its wallet and a withdrawal the other way. A rejected operation moves nothing, and
 * neither does a credit limit change.
 */
function entriesByKind(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT t.operation_id, t.kind, t.status,
           count(e.id) FILTER (WHERE e.kind = 'debit') AS debits,
           count(e.id) FILTER (WHERE e.kind = 'credit') AS credits,
           string_agg(e.kind || ':' || e.wallet_id, ' ' ORDER BY e.id) AS entries
      FROM transfers t
      LEFT JOIN ledger_entries e ON e.operation_id = t.operation_id AND e.kind IN ('debit', 'credit')
      LEFT JOIN split_legs l ON t.kind = 'split' AND e.kind = 'credit'
                            AND l.operation_id = e.operation_id AND l.to_wallet = e.wallet_id AND l.amount = e.amount
     GROUP BY t.operation_id, t.kind, t.status, t.from_wallet, t.to_wallet, t.currency
    -- The kinds that change a wallet move no money: never an entry.
    HAVING ((t.status = 'rejected' OR t.kind IN ('credit_limit', 'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet'))
            AND count(e.id) > 0)
        OR (t.status = 'applied'
            AND t.kind NOT IN ('credit_limit', 'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet') AND NOT (
              count(e.id) FILTER (WHERE e.kind = 'debit') = 1
          AND count(e.id) FILTER (WHERE e.kind = 'debit' AND e.wallet_id = CASE
                WHEN t.kind IN ('capture', 'void') THEN '$held:' || t.from_wallet
                WHEN t.kind = 'deposit' THEN '$settlement:' || t.currency ELSE t.from_wallet END) = 1
          AND CASE t.kind
                WHEN 'deposit' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = t.from_wallet) = 1
                WHEN 'withdrawal' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = '$settlement:' || t.currency) = 1
                WHEN 'transfer' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                WHEN 'refund' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = t.to_wallet) = 1
                WHEN 'hold' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = '$held:' || t.from_wallet) = 1
                WHEN 'void' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = t.from_wallet) = 1
                WHEN 'capture' THEN count(e.id) FILTER (WHERE e.kind = 'credit') IN (1, 2)
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id = t.to_wallet) = 1
                  AND count(e.id) FILTER (WHERE e.kind = 'credit' AND e.wallet_id NOT IN (t.to_wallet, t.from_wallet)) = 0
                WHEN 'split' THEN count(e.id) FILTER (WHERE e.kind = 'credit') = count(l.leg)
                  AND count(l.leg) = (SELECT count(*) FROM split_legs s WHERE s.operation_id = t.operation_id)
                ELSE FALSE
              END))
     ORDER BY t.operation_id LIMIT ${limit}`;
}

/**
 * Money that entered and left: each settlement account's entries sum to minus the applied deposits
 * plus the applied withdrawals of its currency, no more, no less.
 */
function settlements(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT coalesce(s.account, d.account) AS account, s.entries_sum, d.settled_sum
      FROM (SELECT wallet_id AS account, sum(amount) AS entries_sum FROM ledger_entries
             WHERE starts_with(wallet_id, '$settlement:') GROUP BY wallet_id) s
      FULL JOIN (SELECT '$settlement:' || currency AS account,
                        sum(CASE kind WHEN 'deposit' THEN -amount ELSE amount END) AS settled_sum
                   FROM transfers WHERE kind IN ('deposit', 'withdrawal') AND status = 'applied'
                  GROUP BY currency) d ON d.account = s.account
     WHERE s.entries_sum IS DISTINCT FROM d.settled_sum ORDER BY 1 LIMIT ${limit}`;
}

/** The invariants of holds, refunds and splits, beyond the movements they made. */
async function paymentInvariants(tx: Reader, check: Check): Promise<InvariantResult[]> {
  const limit = COUNTEREXAMPLES_MAX;
  return [
    // A hold moves its amount into its source's `held` and its ending moves all of it out, so a
    // wallet's `held` is exactly its active holds (a hold past its expiry that no sweep has
    // released yet is still active, and still held).
    await check(
      "each wallet's held equals the sum of its active holds",
      tx.$queryRaw<Row[]>`
        SELECT coalesce(w.id, a.from_wallet) AS wallet, w.held, coalesce(a.held, 0) AS active_holds
          FROM wallets w
          FULL JOIN (SELECT from_wallet, sum(amount) AS held FROM holds WHERE state = 'active' GROUP BY from_wallet) a
            ON w.id = a.from_wallet
         WHERE w.id IS NULL OR w.held <> coalesce(a.held, 0)
         ORDER BY 1 LIMIT ${limit}`,
    ),
    await check('every ended hold has captured + released = amount and ended once', holdsEndedOnce(tx, limit)),
    await check(
      'no applied capture of a voided or expired hold, no applied void of a captured one',
      tx.$queryRaw<Row[]>`
        SELECT t.operation_id, t.kind, t.original_id AS hold, h.state
          FROM transfers t LEFT JOIN holds h ON h.hold_id = t.original_id
         WHERE t.kind IN ('capture', 'void') AND t.status = 'applied'
           AND h.state IS DISTINCT FROM CASE t.kind WHEN 'capture' THEN 'captured' ELSE 'voided' END
         ORDER BY t.operation_id LIMIT ${limit}`,
    ),
    await check("no refund total above its original's refundable amount", refundsBounded(tx, limit)),
    await check(
      "every split's legs sum to its debit",
      tx.$queryRaw<Row[]>`
        SELECT coalesce(t.operation_id, l.operation_id) AS operation_id, t.amount, l.legs_sum, l.legs,
               (SELECT -sum(e.amount) FROM ledger_entries e
                 WHERE e.operation_id = coalesce(t.operation_id, l.operation_id) AND e.kind = 'debit') AS debit
          FROM (SELECT operation_id, amount FROM transfers WHERE kind = 'split' AND status = 'applied') t
          FULL JOIN (SELECT operation_id, sum(amount) AS legs_sum, count(*) AS legs FROM split_legs GROUP BY operation_id) l
            ON l.operation_id = t.operation_id
         WHERE t.operation_id IS NULL OR l.legs_sum IS DISTINCT FROM t.amount
            OR (SELECT -sum(e.amount) FROM ledger_entries e
                 WHERE e.operation_id = t.operation_id AND e.kind = 'debit') IS DISTINCT FROM t.amount
         ORDER BY 1 LIMIT ${limit}`,
    ),
  ];
}

/**
 * An ended hold splits its amount between payee and source, and was ended by exactly one
 * thing: its one applied capture or void (the record its ended_by names, with the amount the
 * hold says moved), or one release by the expiry (`$expiry:<holdId>`), never both. An active
 * hold was ended by nothing.
 */
function holdsEndedOnce(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT h.hold_id, h.state, h.amount, h.captured, h.released, h.ended_by,
           coalesce(r.endings, 0) AS applied_endings, coalesce(x.releases, 0) AS expiry_releases
      FROM holds h
      LEFT JOIN (SELECT original_id, count(*) AS endings FROM transfers
                  WHERE kind IN ('capture', 'void') AND status = 'applied' GROUP BY original_id) r
        ON r.original_id = h.hold_id
      LEFT JOIN (SELECT operation_id, count(*) AS releases FROM ledger_entries
                  WHERE kind = 'debit' AND operation_id LIKE '$expiry:%' GROUP BY operation_id) x
        ON x.operation_id = '$expiry:' || h.hold_id
      LEFT JOIN transfers b ON b.operation_id = h.ended_by AND b.original_id = h.hold_id AND b.status = 'applied'
                           AND b.kind = CASE h.state WHEN 'captured' THEN 'capture' WHEN 'voided' THEN 'void' END
                           AND b.amount = CASE h.state WHEN 'captured' THEN h.captured ELSE h.released END
     WHERE (h.state <> 'active' AND h.captured + h.released <> h.amount)
        OR (h.state = 'active' AND (h.captured <> 0 OR h.released <> 0 OR r.endings > 0 OR x.releases > 0))
        OR (h.state = 'expired' AND (r.endings > 0 OR x.releases IS DISTINCT FROM 1 OR h.released <> h.amount))
        OR (h.state IN ('captured', 'voided') AND (r.endings IS DISTINCT FROM 1 OR x.releases > 0 OR b.operation_id IS NULL))
     ORDER BY h.hold_id LIMIT ${limit}`;
}

/**
 * Per original and payer, the applied refunds stay within what that payer received: a
 * transfer's amount (its payee only), a captured hold's captured amount (its payee only), or
 * the split leg's amount paid to that payer. A refund of anything else has nothing to refund.
 */
function refundsBounded(tx: Reader, limit: number): Promise<Row[]> {
  return tx.$queryRaw<Row[]>`
    SELECT r.original_id, r.payer, r.refunds, r.refunded, o.kind AS original_kind, b.refundable
      FROM (SELECT original_id, from_wallet AS payer, count(*) AS refunds, sum(amount) AS refunded FROM transfers
             WHERE kind = 'refund' AND status = 'applied' GROUP BY original_id, from_wallet) r
      LEFT JOIN transfers o ON o.operation_id = r.original_id AND o.status = 'applied'
     CROSS JOIN LATERAL (SELECT CASE o.kind
             WHEN 'transfer' THEN CASE WHEN o.to_wallet = r.payer THEN o.amount END
             WHEN 'hold' THEN (SELECT h.captured FROM holds h
                                WHERE h.hold_id = r.original_id AND h.state = 'captured' AND h.to_wallet = r.payer)
             WHEN 'split' THEN (SELECT s.amount FROM split_legs s
                                 WHERE s.operation_id = r.original_id AND s.to_wallet = r.payer)
           END AS refundable) b
     WHERE r.refunded > coalesce(b.refundable, 0)
     ORDER BY r.original_id, r.payer LIMIT ${limit}`;
}
