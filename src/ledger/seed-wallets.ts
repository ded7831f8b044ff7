// Creates wallets with their opening balance posted through the ledger, idempotently: a wallet
// that exists already is left as it is (no new entry, no balance change).
import type { PrismaClient } from '../db/prisma.ts';
import { WIRE_LIMITS } from './wire-limits.ts';

export const SEED_WALLETS_MAX = 1_000_000;
export const SEED_BALANCE_MAX = 10n ** 17n;
/**
 * The largest credit limit a wallet may have (the table's CHECK, wallets_credit_limit_range): a
 * balance plus its limit stays far inside a bigint whatever the ledger holds. The same ceiling as
 * a credit_limit operation's on the wire.
 */
export const CREDIT_LIMIT_MAX = WIRE_LIMITS.creditLimitCeilingMinor;
/** Total money one seed may create: below PostgreSQL's bigint maximum (about 9.2e18). */
export const SEED_TOTAL_MAX = 10n ** 18n;
/** Opening entries are posted against this account per currency; `$` is outside the wallet-id alphabet. */
export const FUNDING_ACCOUNT_PREFIX = '$funding:';
export const OPENING_OPERATION_PREFIX = '$opening:';

export interface SeedRequest {
  wallets: number;
  balanceMinor: bigint;
  /** How far below zero debits may take each new wallet's balance; 0 when absent. */
  creditLimitMinor?: bigint;
  prefix: string;
  currency: string;
}

export interface SeedResult {
  requested: number;
  created: number;
  openingEntries: number;
}

export function validateSeedRequest(req: SeedRequest): void {
  if (!Number.isInteger(req.wallets) || req.wallets < 1 || req.wallets > SEED_WALLETS_MAX) {
    throw new RangeError(`--wallets must be a whole number from 1 to ${SEED_WALLETS_MAX}`);
  }
  if (req.balanceMinor < 0n || req.balanceMinor > SEED_BALANCE_MAX) {
    throw new RangeError(`--balance must be an integer amount in minor units from 0 to ${SEED_BALANCE_MAX}`);
  }
  const limit = req.creditLimitMinor ?? 0n;
  if (limit < 0n || limit > CREDIT_LIMIT_MAX) {
    throw new RangeError(`--credit-limit must be an integer amount in minor units from 0 to ${CREDIT_LIMIT_MAX}`);
  }
  // Every balance, and their sum, must fit in a bigint column however the money moves later.
  if (BigInt(req.wallets) * req.balanceMinor > SEED_TOTAL_MAX) {
    throw new RangeError(`--wallets × --balance must not exceed ${SEED_TOTAL_MAX} in total`);
  }
  if (!/^[A-Za-z0-9._:-]{0,100}$/.test(req.prefix)) {
    throw new RangeError('--prefix must be up to 100 characters of [A-Za-z0-9._:-]');
  }
  if (!/^[A-Z]{3}$/.test(req.currency)) throw new RangeError('--currency must be three capital letters, like EUR');
}

/** The seed's transaction: its statement bounded by the server's statement_timeout, not Prisma's 5 s. */
const SEED_TRANSACTION = { maxWait: 60_000, timeout: 3_600_000 } as const;

export async function seedWallets(prisma: PrismaClient, req: SeedRequest): Promise<SeedResult> {
  validateSeedRequest(req);
  const funding = `${FUNDING_ACCOUNT_PREFIX}${req.currency}`;
  // One statement after the funding account's lock (two seeds of a currency post its running
  // balance one after the other): the wallets that are new get their opening entry pair, in
  // wallet-id order, each entry with its account's balance after it; the others nothing.
  const rows = await prisma.$transaction(async (tx) => {
    await tx.$queryRaw`SELECT pg_advisory_xact_lock(hashtextextended(${funding}::text, 0))::text AS locked`;
    return tx.$queryRaw<{ created: bigint; entries: bigint }[]>`
      WITH new_wallets AS (
        INSERT INTO wallets (id, currency, balance, credit_limit)
        SELECT ${req.prefix}::text || g, ${req.currency}::text, ${req.balanceMinor}::bigint,
               ${req.creditLimitMinor ?? 0n}::bigint
          FROM generate_series(1, ${req.wallets}::int) AS g
        ON CONFLICT (id) DO NOTHING
        RETURNING id, currency, balance, credit_limit
      ), funded AS (
        SELECT n.id, n.balance, n.credit_limit,
               coalesce((SELECT e.balance_after FROM ledger_entries e WHERE e.wallet_id = ${funding}::text
                          ORDER BY e.created_at DESC, e.id DESC LIMIT 1), 0)
                 - sum(n.balance) OVER (ORDER BY n.id) AS funding_after
          FROM new_wallets n WHERE n.balance > 0
      ), entries AS (
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, created_at)
        SELECT ${OPENING_OPERATION_PREFIX}::text || f.id, x.wallet, x.kind, x.amount, x.after, x.credit_limit,
               clock_timestamp()
          FROM funded f
         CROSS JOIN LATERAL (VALUES (1, f.id, 'opening', f.balance, f.balance, f.credit_limit),
                                    (2, ${funding}::text, 'funding', -f.balance, f.funding_after, NULL::bigint))
               AS x(n, wallet, kind, amount, after, credit_limit)
         ORDER BY f.id, x.n
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM new_wallets) AS created, (SELECT count(*) FROM entries) AS entries`;
  }, SEED_TRANSACTION);
  const row = rows[0];
  if (row === undefined) throw new Error('seed statement returned no row');
  return { requested: req.wallets, created: Number(row.created), openingEntries: Number(row.entries) };
}
