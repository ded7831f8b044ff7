// Looking back at a wallet: its balance and held amount at an instant (wallet_balance_at()) and
// its statement over a range of time, page by page (wallet_statement()), both read from the
// running balance every ledger entry carries (the running-balances migration). The read role may
// call both (`npm run db:read-role`).
// A statement's cursor carries the last entry's time as the database wrote it and its id, the
// statement's order (page-cursor.ts says why text).
import { serverErrorOf } from '../db/database-errors.ts';
import { UnknownWalletError } from '../errors.ts';
import { WIRE_LIMITS } from '../ledger/wire-limits.ts';
import { type IntakeClient, queryRows } from './intake.ts';
import { atTextSql, type CursorKey, decodePageCursor, encodePageCursor } from './page-cursor.ts';

/** The balance function, which the read role may execute (`regprocedure`). */
export const WALLET_BALANCE_AT_FUNCTION = 'wallet_balance_at(text,timestamp with time zone)';
/** The statement function, which the read role may execute (`regprocedure`). */
export const WALLET_STATEMENT_FUNCTION =
  'wallet_statement(text,timestamp with time zone,timestamp with time zone,timestamp with time zone,bigint,integer,boolean)';
/** Entries per statement page, at most (the function refuses more). */
export const STATEMENT_LIMIT_MAX = 1_000;
/** Entries per statement page unless asked otherwise. */
export const STATEMENT_LIMIT_DEFAULT = 100;

/** SQLSTATE of both functions for a wallet without a row (the running-balances migration). */
const NO_WALLET_SQLSTATE = 'P0002';
/** The years a timestamptz sent as an ISO string can name: toISOString() writes others as ±YYYYYY. */
const YEAR_MIN = 1;
const YEAR_MAX = 9999;
const ENTRY_ID_MAX = 2n ** 63n - 1n;
/** A statement cursor's key: the last entry's id. */
const ENTRY_ID_KEY: CursorKey = { pattern: String.raw`\d{1,19}`, lengthMax: 19 };

/** What the history is read through: a `pg` client or pool, or a Prisma transaction client. */
export type HistoryClient = IntakeClient;

/** A wallet's money at an instant, as its ledger entries up to then left it. */
export interface WalletBalance {
  readonly wallet: string;
  readonly currency: string;
  /** Its available balance then, in minor units: 0 before its first entry. */
  readonly balance: bigint;
  /** What its holds kept aside then (its account `$held:<wallet>`), in minor units. */
  readonly held: bigint;
  /** The id of the latest entry of either account at or before the instant; null when none. */
  readonly lastEntry: bigint | null;
  /** The instant asked about. */
  readonly at: Date;
}

/** Every kind of ledger entry: a seeded wallet's opening credit and its funding debit, then debits and credits. */
export const LEDGER_ENTRY_KINDS = ['opening', 'funding', 'debit', 'credit'] as const;
/** The kind of a ledger entry: see {@link LEDGER_ENTRY_KINDS}. */
export type LedgerEntryKind = (typeof LEDGER_ENTRY_KINDS)[number];

/** One ledger entry of a statement, with its account's balance after it. */
export interface StatementEntry {
  readonly entryId: bigint;
  /** When it was decided (a Date keeps milliseconds: `atText` has the microseconds). */
  readonly at: Date;
  /** When it was decided, as the database keeps it: UTC, six fractional digits (`…T10:00:00.123456Z`). */
  readonly atText: string;
  readonly operationId: string;
  /** The wallet itself, or its holding account `$held:<wallet>` (with `held: true`). */
  readonly account: string;
  readonly kind: LedgerEntryKind;
  /** Signed, in minor units: negative for a debit or funding entry. */
  readonly amount: bigint;
  /** The account's balance after this entry, in minor units. */
  readonly balanceAfter: bigint;
}

/** Which entries statement() reads. */
export interface StatementOptions {
  /** The first instant included. */
  readonly from: Date;
  /** The first instant excluded: after `from`. */
  readonly to: Date;
  /**
   * The `nextCursor` of the page before; none for the first page.
   * @defaultValue none
   */
  readonly cursor?: string;
  /**
   * Entries per page, from 1 to STATEMENT_LIMIT_MAX.
   * @defaultValue 100
   */
  readonly limit?: number;
  /**
   * Also the entries of the wallet's holding account (`$held:<wallet>`), in the same order.
   * @defaultValue false
   */
  readonly held?: boolean;
}

/** A page of a statement. */
export interface StatementPage {
  /** In the order they were decided: by time, then by id. */
  readonly entries: readonly StatementEntry[];
  /** Pass it as `cursor` for the next page; null when this page was not full (the last). */
  readonly nextCursor: string | null;
}

interface BalanceRow {
  wallet_id: string;
  currency: string;
  balance: string;
  held: string;
  last_entry: string | null;
}

interface EntryRow {
  entry_id: string;
  at_text: string;
  operation_id: string;
  account: string;
  kind: string;
  amount: string;
  balance_after: string;
}

const BALANCE_SQL = `
  SELECT wallet_id, trim(currency) AS currency, balance::text AS balance, held::text AS held,
         last_entry::text AS last_entry
    FROM wallet_balance_at($1::text, $2::timestamptz)`;

const STATEMENT_SQL = `
  SELECT entry_id::text AS entry_id, ${atTextSql('at')} AS at_text,
         operation_id, account, kind, amount::text AS amount, balance_after::text AS balance_after
    FROM wallet_statement($1::text, $2::timestamptz, $3::timestamptz, $4::timestamptz, $5::bigint, $6::integer, $7::boolean)`;

async function query<T extends object>(
  client: HistoryClient,
  sql: string,
  values: unknown[],
  wallet: string,
): Promise<T[]> {
  try {
    return await queryRows<T>(client, sql, values);
  } catch (err) {
    if (serverErrorOf(err)?.sqlState === NO_WALLET_SQLSTATE) throw new UnknownWalletError(wallet);
    throw err;
  }
}

/** A wallet id within the wire's bounds, or a RangeError before any query. */
export function checkWallet(wallet: string): void {
  if (typeof wallet !== 'string' || wallet.length < 1 || wallet.length > WIRE_LIMITS.idLengthMax)
    throw new RangeError(`wallet must be 1 to ${WIRE_LIMITS.idLengthMax} characters, got ${JSON.stringify(wallet)}`);
}

/** The instant as an ISO string PostgreSQL reads exactly, or a RangeError naming `name`. */
export function instantText(instant: Date, name: string): string {
  if (!(instant instanceof Date) || Number.isNaN(instant.getTime()))
    throw new RangeError(`${name} must be a valid Date, got ${String(instant)}`);
  const year = instant.getUTCFullYear();
  if (year < YEAR_MIN || year > YEAR_MAX)
    throw new RangeError(`${name} must be in the years ${YEAR_MIN} to ${YEAR_MAX}, got ${instant.toISOString()}`);
  return instant.toISOString();
}

/**
 * The wallet's balance and held amount at `instant`: the running balances of the last entries at
 * or before it (0 before its first). Two index lookups, whatever the ledger's size.
 *
 * @throws {@link UnknownWalletError} (`UNKNOWN_WALLET`) when the wallet has no row; a RangeError
 * for a wallet id out of bounds or an invalid instant; the driver's error else.
 */
export async function balanceAt(client: HistoryClient, wallet: string, instant: Date): Promise<WalletBalance> {
  checkWallet(wallet);
  const at = instantText(instant, 'instant');
  const rows = await query<BalanceRow>(client, BALANCE_SQL, [wallet, at], wallet);
  const row = rows[0];
  // The function raises P0002 rather than answer nothing; an empty answer is a broken contract.
  if (row === undefined || rows.length !== 1)
    throw new Error(`wallet_balance_at answered ${rows.length} rows for wallet ${JSON.stringify(wallet)}`);
  return {
    wallet: row.wallet_id,
    currency: row.currency,
    balance: BigInt(row.balance),
    held: BigInt(row.held),
    lastEntry: row.last_entry === null ? null : BigInt(row.last_entry),
    at: new Date(at),
  };
}

/** The cursor's time and entry id, or a RangeError before any query. */
function decodeCursor(cursor: string): { atText: string; entryId: bigint } {
  const { atText, key } = decodePageCursor(cursor, ENTRY_ID_KEY, 'statement()');
  const entryId = BigInt(key);
  if (entryId < 1n || entryId > ENTRY_ID_MAX) {
    throw new RangeError(`cursor is not one statement() handed out: ${JSON.stringify(cursor)}`);
  }
  return { atText, entryId };
}

function entryOf(row: EntryRow): StatementEntry {
  if (!(LEDGER_ENTRY_KINDS as readonly string[]).includes(row.kind))
    throw new Error(`wallet_statement: unknown entry kind ${JSON.stringify(row.kind)} at entry ${row.entry_id}`);
  return {
    entryId: BigInt(row.entry_id),
    at: new Date(row.at_text),
    atText: row.at_text,
    operationId: row.operation_id,
    account: row.account,
    kind: row.kind as LedgerEntryKind,
    amount: BigInt(row.amount),
    balanceAfter: BigInt(row.balance_after),
  };
}

/**
 * The wallet's ledger entries with `from <= time < to`, in the order they were decided, one page
 * of at most `limit` after `cursor`. Read every page by passing each `nextCursor` back until it is
 * null; entries decided later inside the range show on a later page when they sort after the cursor.
 *
 * @throws {@link UnknownWalletError} (`UNKNOWN_WALLET`) when the wallet has no row; a RangeError,
 * before any query, for a wallet id out of bounds, an invalid instant, `from` not before `to`, a
 * limit out of range or a cursor statement() did not hand out; the driver's error else.
 */
export async function statement(
  client: HistoryClient,
  wallet: string,
  options: StatementOptions,
): Promise<StatementPage> {
  checkWallet(wallet);
  const from = instantText(options.from, 'from');
  const to = instantText(options.to, 'to');
  if (options.from.getTime() >= options.to.getTime()) throw new RangeError(`from must be before to: ${from} to ${to}`);
  const limit = options.limit ?? STATEMENT_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > STATEMENT_LIMIT_MAX)
    throw new RangeError(`limit must be from 1 to ${STATEMENT_LIMIT_MAX}, got ${limit}`);
  const after = options.cursor === undefined ? null : decodeCursor(options.cursor);
  const values = [
    wallet,
    from,
    to,
    after?.atText ?? null,
    after?.entryId.toString() ?? null,
    limit,
    options.held === true,
  ];
  const entries = (await query<EntryRow>(client, STATEMENT_SQL, values, wallet)).map(entryOf);
  const last = entries.at(-1);
  return {
    entries,
    nextCursor:
      entries.length === limit && last !== undefined ? encodePageCursor(last.atText, last.entryId.toString()) : null,
  };
}
