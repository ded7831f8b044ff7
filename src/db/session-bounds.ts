// The server-side bounds of every session the service opens (statement_timeout, lock_timeout,
// idle_in_transaction_session_timeout, TimeZone=UTC): how they reach the session, and the check
// that they did. Straight to PostgreSQL (DATABASE_POOLER=none) they are start-up parameters.
// PgBouncer refuses those (`unsupported startup parameter: statement_timeout`) or, told to
// ignore them, drops them silently; in transaction mode a SET would stay on whichever server
// connection ran it. Behind PgBouncer (DATABASE_POOLER=pgbouncer) they are therefore the role's
// defaults in the database (ALTER ROLE … IN DATABASE … SET), which PostgreSQL applies to every
// server connection PgBouncer opens for that role, and which DISCARD ALL and RESET ALL return to.
// Either way each new connection reads what is in force and is refused when it differs.
import type pg from 'pg';
import type { Config } from '../config/config.ts';
import { SessionBoundsError } from '../errors.ts';

export type SessionBoundsConfig = Pick<
  Config,
  'databasePooler' | 'dbStatementTimeoutMs' | 'dbLockTimeoutMs' | 'dbIdleInTransactionTimeoutMs'
>;

/** Session time zone: timestamps are read and written in UTC. */
export const SESSION_TIME_ZONE = 'UTC';
/** Names PostgreSQL may report for that zone (a server's default is often `Etc/UTC`). */
const UTC_NAMES: readonly string[] = ['UTC', 'Etc/UTC'];

/** The settings checked, as pg_settings names them, with their configured values (ms, or the zone). */
export function expectedSessionSettings(config: SessionBoundsConfig): Readonly<Record<SessionSetting, string>> {
  return {
    statement_timeout: String(config.dbStatementTimeoutMs),
    lock_timeout: String(config.dbLockTimeoutMs),
    idle_in_transaction_session_timeout: String(config.dbIdleInTransactionTimeoutMs),
    TimeZone: SESSION_TIME_ZONE,
  };
}

export const SESSION_SETTINGS = [
  'statement_timeout',
  'lock_timeout',
  'idle_in_transaction_session_timeout',
  'TimeZone',
] as const;
export type SessionSetting = (typeof SESSION_SETTINGS)[number];

/**
 * What a pg client sends at start-up for the bounds: all of them straight to PostgreSQL,
 * nothing behind PgBouncer (application_name, which PgBouncer accepts, is the caller's).
 */
export function sessionStartupParameters(config: SessionBoundsConfig): pg.ClientConfig {
  if (config.databasePooler === 'pgbouncer') return {};
  return {
    statement_timeout: config.dbStatementTimeoutMs,
    lock_timeout: config.dbLockTimeoutMs,
    idle_in_transaction_session_timeout: config.dbIdleInTransactionTimeoutMs,
    options: `-c TimeZone=${SESSION_TIME_ZONE}`,
  };
}

/** The session's values of SESSION_SETTINGS (pg_settings: ms without unit, the zone's name). */
export async function readSessionSettings(client: pg.ClientBase): Promise<Record<SessionSetting, string>> {
  const { rows } = await client.query<{ name: SessionSetting; setting: string }>(
    'SELECT name, setting FROM pg_settings WHERE name = ANY($1::text[])',
    [SESSION_SETTINGS],
  );
  const out = {} as Record<SessionSetting, string>;
  for (const name of SESSION_SETTINGS) out[name] = rows.find((r) => r.name === name)?.setting ?? '(unknown)';
  return out;
}

/** What differs from the configuration, as `statement_timeout is 0, expected 5000 (ms)`; empty when nothing. */
export function sessionSettingsDiffer(
  actual: Readonly<Record<SessionSetting, string>>,
  config: SessionBoundsConfig,
): string[] {
  const expected = expectedSessionSettings(config);
  const out: string[] = [];
  for (const name of SESSION_SETTINGS) {
    const ok =
      name === 'TimeZone'
        ? UTC_NAMES.some((z) => z.toLowerCase() === actual[name].toLowerCase())
        : actual[name] === expected[name];
    if (!ok) out.push(`${name} is ${actual[name]}, expected ${expected[name]}${name === 'TimeZone' ? '' : ' ms'}`);
  }
  return out;
}

/** The one line that names the fix, for the pooler configured. */
export function sessionBoundsFix(config: SessionBoundsConfig): string {
  return config.databasePooler === 'pgbouncer'
    ? "behind PgBouncer (DATABASE_POOLER=pgbouncer) the bounds are the role's defaults in the database: " +
        'with the same DB_*_TIMEOUT_MS, run npm run db:worker-role for the worker role or npm run db:session-bounds ' +
        'for the role in DATABASE_URL (docs/operating/deploy.md#pgbouncer)'
    : 'the start-up parameters did not arrive (a pooler that ignores them, ignore_startup_parameters?): ' +
        'behind PgBouncer set DATABASE_POOLER=pgbouncer (docs/operating/deploy.md#pgbouncer)';
}

/** Rejects with a SessionBoundsError naming the fix when the session's bounds are not the configured ones. */
export async function assertSessionBounds(client: pg.ClientBase, config: SessionBoundsConfig): Promise<void> {
  const differ = sessionSettingsDiffer(await readSessionSettings(client), config);
  if (differ.length > 0)
    throw new SessionBoundsError(`session bounds not in force: ${differ.join('; ')}; ${sessionBoundsFix(config)}`);
}

/**
 * Makes the configured bounds `role`'s defaults in the database of the connected client (the
 * owner, or the role itself): every session it opens there afterwards starts with them, however
 * it connects. Returns what it set.
 */
export async function setRoleSessionBounds(
  client: pg.ClientBase,
  role: string,
  config: SessionBoundsConfig,
): Promise<Record<SessionSetting, string>> {
  const expected = expectedSessionSettings(config);
  const {
    rows: [where],
  } = await client.query<{ db: string }>('SELECT current_database() AS db');
  if (where === undefined) throw new Error('cannot read the current database');
  const target = `ROLE ${client.escapeIdentifier(role)} IN DATABASE ${client.escapeIdentifier(where.db)}`;
  for (const name of SESSION_SETTINGS) {
    await client.query(`ALTER ${target} SET ${name} = ${client.escapeLiteral(expected[name])}`);
  }
  return { ...expected };
}
