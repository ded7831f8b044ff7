// Every ledger entry beside what its running balance must be, computed here on its own: the sum
// of its account's entries up to it in id order, and whether its time ascends with its id.
import type pg from 'pg';

export interface EntryWithRunningSum {
  id: string;
  wallet_id: string;
  amount: string;
  balance_after: string | null;
  running: string;
  ascending: boolean;
}

export async function entriesWithRunningSums(sql: Pick<pg.Pool, 'query'>): Promise<EntryWithRunningSum[]> {
  const { rows } = await sql.query<EntryWithRunningSum>(`
    SELECT id::text, wallet_id, amount::text, balance_after::text,
           (sum(amount) OVER w)::text AS running,
           coalesce(lag(created_at) OVER w <= created_at, TRUE) AS ascending
      FROM ledger_entries WINDOW w AS (PARTITION BY wallet_id ORDER BY id) ORDER BY ledger_entries.id`);
  return rows;
}
