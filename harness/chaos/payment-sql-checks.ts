// The payments' invariants that the tables prove on their own, each one a SQL query that returns
// its counterexamples (no row: the invariant holds). database-state.ts runs them all once, after
// the drain; sqlInvariant() turns each into a check of the list (payment-checks.ts).
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { CheckGroup, Counterexample, Invariant } from './check-result.ts';

/** An invariant in SQL: the query answers one row per counterexample. */
export interface SqlInvariant {
  readonly name: string;
  readonly group: CheckGroup;
  readonly rows: (prisma: PrismaClient) => Promise<Record<string, unknown>[]>;
}

/** Each SQL invariant's counterexamples, by its name. */
export type SqlViolations = ReadonlyMap<string, readonly Counterexample[]>;

export const PAYMENT_SQL_INVARIANTS: readonly SqlInvariant[] = [
  {
    name: 'available balance >= -credit limit and held >= 0 on every wallet',
    group: 'money',
    rows: (prisma) =>
      prisma.$queryRaw`SELECT id AS wallet, balance, credit_limit, held FROM wallets
                        WHERE balance < -credit_limit OR held < 0 ORDER BY id`,
  },
  {
    name: 'every hold ended at most once, with captured + released = amount',
    group: 'exactly-once',
    rows: (prisma) =>
      prisma.$queryRaw`
        WITH endings AS (
          SELECT original_id AS hold_id, count(*) AS n FROM transfers
           WHERE kind IN ('capture', 'void') AND status = 'applied' GROUP BY original_id
          UNION ALL
          SELECT substr(operation_id, 9), count(*) FROM ledger_entries
           WHERE operation_id LIKE '$expiry:%' AND kind = 'debit' GROUP BY operation_id
        ), per_hold AS (SELECT hold_id, sum(n) AS endings FROM endings GROUP BY hold_id)
        SELECT h.hold_id, h.state, h.amount, h.captured, h.released, coalesce(p.endings, 0) AS endings
          FROM holds h LEFT JOIN per_hold p ON p.hold_id = h.hold_id
         WHERE coalesce(p.endings, 0) > 1
            OR (h.state <> 'active' AND (h.captured + h.released <> h.amount OR coalesce(p.endings, 0) <> 1))
            OR (h.state = 'active' AND coalesce(p.endings, 0) <> 0)
         ORDER BY h.hold_id`,
  },
  {
    name: "each wallet's held equals the sum of its active holds",
    group: 'money',
    rows: (prisma) =>
      prisma.$queryRaw`
        SELECT w.id AS wallet, w.held, coalesce(a.held, 0)::bigint AS active_holds
          FROM wallets w
          LEFT JOIN (SELECT from_wallet, sum(amount) AS held FROM holds WHERE state = 'active' GROUP BY from_wallet) a
            ON a.from_wallet = w.id
         WHERE w.held <> coalesce(a.held, 0)
         ORDER BY w.id`,
  },
  {
    name: 'every hold past its expiry was released by the sweep (none still active)',
    group: 'money',
    rows: (prisma) =>
      prisma.$queryRaw`
        SELECT hold_id, from_wallet, amount, expires_at::text AS expires_at FROM holds
         WHERE state = 'active' AND expires_at <= clock_timestamp() ORDER BY hold_id`,
  },
  {
    name: 'no refund total above its original',
    group: 'money',
    rows: (prisma) =>
      prisma.$queryRaw`
        WITH refunded AS (
          SELECT original_id, from_wallet, sum(amount)::bigint AS total FROM transfers
           WHERE kind = 'refund' AND status = 'applied' GROUP BY original_id, from_wallet
        )
        SELECT r.original_id, r.from_wallet AS payer, r.total, o.kind,
               CASE o.kind WHEN 'transfer' THEN CASE WHEN o.to_wallet = r.from_wallet THEN o.amount ELSE 0 END
                           WHEN 'hold' THEN (SELECT CASE WHEN h.to_wallet = r.from_wallet THEN h.captured ELSE 0 END
                                               FROM holds h WHERE h.hold_id = r.original_id)
                           WHEN 'split' THEN (SELECT coalesce(sum(s.amount), 0) FROM split_legs s
                                               WHERE s.operation_id = r.original_id AND s.to_wallet = r.from_wallet)
                           ELSE 0 END AS refundable
          FROM refunded r LEFT JOIN transfers o ON o.operation_id = r.original_id
         WHERE o.operation_id IS NULL OR o.status <> 'applied' OR r.total > coalesce(
               CASE o.kind WHEN 'transfer' THEN CASE WHEN o.to_wallet = r.from_wallet THEN o.amount ELSE 0 END
                           WHEN 'hold' THEN (SELECT CASE WHEN h.to_wallet = r.from_wallet THEN h.captured ELSE 0 END
                                               FROM holds h WHERE h.hold_id = r.original_id)
                           WHEN 'split' THEN (SELECT coalesce(sum(s.amount), 0) FROM split_legs s
                                               WHERE s.operation_id = r.original_id AND s.to_wallet = r.from_wallet)
                           ELSE 0 END, 0)
         ORDER BY r.original_id`,
  },
  {
    name: "every split's legs sum to its debit",
    group: 'money',
    rows: (prisma) =>
      prisma.$queryRaw`
        SELECT t.operation_id, t.amount,
               (SELECT coalesce(sum(s.amount), 0) FROM split_legs s WHERE s.operation_id = t.operation_id)::bigint AS legs,
               (SELECT coalesce(-sum(e.amount), 0) FROM ledger_entries e
                 WHERE e.operation_id = t.operation_id AND e.kind = 'debit')::bigint AS debit
          FROM transfers t
         WHERE t.kind = 'split' AND t.status = 'applied'
           AND ((SELECT coalesce(sum(s.amount), 0) FROM split_legs s WHERE s.operation_id = t.operation_id) <> t.amount
                OR (SELECT coalesce(-sum(e.amount), 0) FROM ledger_entries e
                     WHERE e.operation_id = t.operation_id AND e.kind = 'debit') <> t.amount)
         ORDER BY t.operation_id`,
  },
  {
    name: 'no applied capture of a voided or expired hold, no applied void of a captured one',
    group: 'exactly-once',
    rows: (prisma) =>
      prisma.$queryRaw`
        SELECT t.operation_id, t.kind, t.original_id AS hold, h.state, h.ended_by,
               EXISTS (SELECT 1 FROM ledger_entries e WHERE e.operation_id = '$expiry:' || t.original_id) AS expiry_released
          FROM transfers t JOIN holds h ON h.hold_id = t.original_id
         WHERE t.kind IN ('capture', 'void') AND t.status = 'applied'
           AND (h.state <> CASE t.kind WHEN 'capture' THEN 'captured' ELSE 'voided' END
                OR h.ended_by IS DISTINCT FROM t.operation_id
                OR EXISTS (SELECT 1 FROM ledger_entries e WHERE e.operation_id = '$expiry:' || t.original_id))
         ORDER BY t.operation_id`,
  },
];

/** A row as a counterexample: bigints as text. */
function counterexampleOf(row: Record<string, unknown>): Counterexample {
  return Object.fromEntries(
    Object.entries(row).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : (v as string | null)]),
  );
}

/** Runs every SQL invariant of the list, one after the other. */
export async function readSqlViolations(
  prisma: PrismaClient,
  list: readonly SqlInvariant[] = PAYMENT_SQL_INVARIANTS,
): Promise<SqlViolations> {
  const out = new Map<string, Counterexample[]>();
  for (const invariant of list) out.set(invariant.name, (await invariant.rows(prisma)).map(counterexampleOf));
  return out;
}

/** The check of one SQL invariant: each row its query answered is a counterexample. */
export function sqlInvariant(sql: SqlInvariant): Invariant<{ readonly sqlViolations: SqlViolations }> {
  return {
    name: sql.name,
    group: sql.group,
    find: ({ sqlViolations }, fail) => {
      const rows = sqlViolations.get(sql.name);
      if (rows === undefined) fail({ problem: 'its query was not run' });
      for (const example of rows ?? []) fail(example);
    },
  };
}
