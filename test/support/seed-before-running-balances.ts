// Wallets with their opening entries as the seed wrote them before the running-balances
// migration (no balance_after column): for the upgrade tests, which build a database of an older
// schema and migrate it forward.
import type pg from 'pg';

export async function seedBeforeRunningBalances(
  sql: Pick<pg.Pool, 'query'>,
  wallets: number,
  balanceMinor: bigint,
  prefix = 'w',
  currency = 'EUR',
): Promise<void> {
  await sql.query(
    `WITH new_wallets AS (
       INSERT INTO wallets (id, currency, balance)
       SELECT $1::text || g, $2::text, $3::bigint FROM generate_series(1, $4::int) AS g
       RETURNING id, currency, balance
     )
     INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount)
     SELECT '$opening:' || id, id, 'opening', balance FROM new_wallets
     UNION ALL
     SELECT '$opening:' || id, '$funding:' || currency, 'funding', -balance FROM new_wallets`,
    [prefix, currency, balanceMinor.toString(), wallets],
  );
}
