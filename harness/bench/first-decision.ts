// The pinned anchor of the single-transfer path (issue 20): the first migration's
// apply_transfer(), the project's own decision as it shipped, taken verbatim from
// prisma/migrations/20261130000000_init (an applied migration never changes) and created in the
// bench's scratch database under another name. The case db-ceiling-first calls it exactly as
// db-ceiling calls today's apply_transfer(), so `singleToFirstDecisionRatio` (db-ceiling over
// db-ceiling-first, same run) falls below 1 whenever a migration slows the single path. It
// writes the tables of today's schema (the columns added since are nullable, but for the running
// balance, which its database lets be empty: see functionOfMigration()) and has no lease check,
// intake or feed: an anchor, never a decision the product may call.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { type SqlRunner, UNLOCKED_FENCE } from './decision-call.ts';

export const FIRST_DECISION_MIGRATION = '20261130000000_init';
export const FIRST_DECISION_FUNCTION = 'bench_first_apply_transfer';

/** The migration from which every ledger entry carries its running balance (NOT NULL). */
export const RUNNING_BALANCES_MIGRATION = '20261219000000_running_balances';

/**
 * Function `fn` as `migration` defined it (CREATE FUNCTION or CREATE OR REPLACE FUNCTION, the
 * first definition in the file, its options included), as a CREATE OR REPLACE FUNCTION
 * statement named `name`; throws when the migration defines none. Applied migrations never
 * change, so this is that version's exact body. A body older than the running balances writes
 * its entries without one, so the statement first lets `balance_after` be empty in the database
 * it runs on (a scratch database: the bench's, a test's), which costs the other writers nothing.
 */
export function functionOfMigration(
  migration: string,
  fn: string,
  name: string,
  migrationsDir = MIGRATIONS_DIR,
): string {
  const text = readFileSync(join(migrationsDir, migration, 'migration.sql'), 'utf8');
  const head = new RegExp(`CREATE (?:OR REPLACE )?FUNCTION "${fn}"\\(`);
  const start = head.exec(text);
  const end = start === null ? -1 : text.indexOf('\n$$;\n', start.index);
  if (start === null || end < 0) throw new Error(`${migration} defines no ${fn}()`);
  const body = text.slice(start.index, end + '\n$$;\n'.length).replace(head, `CREATE OR REPLACE FUNCTION "${name}"(`);
  return migration < RUNNING_BALANCES_MIGRATION
    ? `ALTER TABLE ledger_entries ALTER COLUMN balance_after DROP NOT NULL;\n${body}`
    : body;
}

/** apply_transfer() as `migration` defined it, renamed `name` (functionOfMigration). */
export function applyTransferOfMigration(migration: string, name: string, migrationsDir = MIGRATIONS_DIR): string {
  return functionOfMigration(migration, 'apply_transfer', name, migrationsDir);
}

/** The first migration's CREATE FUNCTION "apply_transfer" statement, renamed; throws when it cannot be found. */
export function firstDecisionSql(migrationsDir: string = MIGRATIONS_DIR): string {
  return applyTransferOfMigration(FIRST_DECISION_MIGRATION, FIRST_DECISION_FUNCTION, migrationsDir);
}

// The five columns the function returns, read as the first migration's worker read them
// (`SELECT outcome, status, reason, fence, wallet_fence FROM apply_transfer(...)` in
// src/ledger/apply-transfer.ts of commit ff5a4b0) and as db-ceiling reads today's: selecting only
// `outcome`, as this call did until the paired case showed it, made each call cheaper for the
// anchor alone.
const FIRST_DECISION_CALL =
  `SELECT outcome, status, reason, fence, wallet_fence FROM ${FIRST_DECISION_FUNCTION}(` +
  '$1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text, $7::bigint, TRUE, TRUE)';

/** One decision through the first migration's function, with the worker's arguments (both checks on). */
export async function decideFirst(client: SqlRunner, request: TransferRequest): Promise<string> {
  const { rows } = await client.query(FIRST_DECISION_CALL, [
    request.operationId,
    requestHash(request),
    request.from,
    request.to,
    request.amountMinor.toString(),
    request.currency,
    UNLOCKED_FENCE.toString(),
  ]);
  const row = rows[0] as { outcome?: unknown } | undefined;
  if (rows.length !== 1 || typeof row?.outcome !== 'string') {
    throw new Error(`${FIRST_DECISION_FUNCTION} returned ${rows.length} rows`);
  }
  return row.outcome;
}
