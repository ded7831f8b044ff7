// The readiness probes of a worker: does Redis answer, does PostgreSQL answer, does the
// database carry every migration of this build, are the session bounds in force, and may the
// worker's role execute the decision functions. Each probe is bounded by a timeout and needs no
// privilege beyond `SELECT 1`, reading `_prisma_migrations` and `pg_settings` and asking the
// catalogs (every role may), so it works for a role that may otherwise only execute the decision
// functions.
import type { Redis } from 'ioredis';
import pg from 'pg';
import { redactUrl } from '../config/config.ts';
import { databaseFaultOf, describeDatabaseFault } from '../db/database-errors.ts';
import type { MigrationFile } from '../db/migrations.ts';
import {
  readSessionSettings,
  type SessionBoundsConfig,
  sessionBoundsFix,
  sessionSettingsDiffer,
  sessionStartupParameters,
} from '../db/session-bounds.ts';
import { DECISION_FUNCTIONS } from '../db/worker-role-grants.ts';

export type ProbeVariable = 'REDIS_URL' | 'DATABASE_URL' | 'ETCD_ENDPOINTS' | 'LOCK_DATABASE_URL' | 'LOCK_BACKEND';

export type ProbeResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly variable: ProbeVariable; readonly detail: string };

/** Rejects with `what did not answer within …` when `work` takes longer than timeoutMs. */
export async function withinMs<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function messageOf(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) return messageOf(err.errors[0]);
  const text = err instanceof Error ? err.message : String(err);
  return text === '' && err instanceof Error ? err.name : text;
}

/** `connectionError`: what the client's last connection attempt said, more telling than a failed PING. */
export async function probeRedis(
  redis: Redis,
  redisUrl: string,
  timeoutMs: number,
  connectionError: () => string | null = () => null,
): Promise<ProbeResult> {
  try {
    const reply = await withinMs(redis.ping(), timeoutMs, 'PING');
    if (reply !== 'PONG')
      return {
        ok: false,
        variable: 'REDIS_URL',
        detail: `Redis at ${redactUrl(redisUrl)} answered PING with ${JSON.stringify(reply)}`,
      };
    return { ok: true };
  } catch (err) {
    return {
      ok: false,
      variable: 'REDIS_URL',
      detail: `Redis at ${redactUrl(redisUrl)}: ${connectionError() ?? messageOf(err)}`,
    };
  }
}

/** What the server answered, with the step that fixes it when it is a setup mistake (database missing, role refused). */
function postgresProblem(err: unknown): string {
  const fault = databaseFaultOf(err);
  return fault === null || fault.unreachable ? messageOf(err) : describeDatabaseFault(fault);
}

interface MigrationRow {
  migration_name: string;
  checksum: string;
}

/**
 * What the database lacks of `expected`: folders without a finished, not rolled back row, or
 * whose recorded checksum differs from the file. Null when nothing is missing.
 */
export function missingMigrations(
  expected: readonly Pick<MigrationFile, 'name' | 'checksum'>[],
  applied: readonly MigrationRow[],
): string | null {
  const byName = new Map(applied.map((r) => [r.migration_name, r.checksum]));
  const absent = expected.filter((m) => !byName.has(m.name)).map((m) => m.name);
  const changed = expected.filter((m) => byName.has(m.name) && byName.get(m.name) !== m.checksum).map((m) => m.name);
  const parts: string[] = [];
  if (absent.length > 0) parts.push(`migrations not applied: ${absent.join(', ')} (run npm run db:migrate)`);
  if (changed.length > 0) parts.push(`applied migrations differ from this build's files: ${changed.join(', ')}`);
  return parts.length === 0 ? null : parts.join('; ');
}

interface PrivilegeRow {
  signature: string;
  present: boolean;
  executable: boolean | null;
  role: string;
}

/** The command that grants a process's role its functions: the worker's, or the relay's. */
export type RoleCommand = 'db:worker-role' | 'db:relay-role';

/**
 * What keeps the connected role from calling the decision functions (`signatures`, as
 * DECISION_FUNCTIONS spells them: the one place a new signature is written), with the fix; null
 * when it may call every one.
 */
export function decisionPrivilegeProblem(
  rows: readonly PrivilegeRow[],
  roleCommand: RoleCommand = 'db:worker-role',
): string | null {
  const problems = rows.flatMap((r) => {
    if (!r.present)
      return [
        `${r.signature} does not exist in the role's search_path (run npm run db:migrate, and npm run ${roleCommand} -- --role ${r.role} as the database owner)`,
      ];
    if (r.executable !== true)
      return [
        `the role ${r.role} may not execute ${r.signature}; run npm run ${roleCommand} -- --role ${r.role} as the database owner`,
      ];
    return [];
  });
  return problems.length === 0 ? null : `permission_denied: ${problems.join('; ')}`;
}

/**
 * PostgreSQL through one connection of its own, outside the worker's pool: a pool busy with
 * decisions must not look like a server that does not answer. The connection is opened again
 * after any failure. The migrations and the session bounds (opened as the pool opens its
 * connections: src/db/session-bounds.ts) are compared at the first success and again after every
 * outage (the database may have been restored from a backup meanwhile).
 */
export class PostgresProbe {
  private client: pg.Client | null = null;
  private migrationsVerified = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly expectedMigrations: readonly Pick<MigrationFile, 'name' | 'checksum'>[],
    private readonly session: SessionBoundsConfig,
    private readonly decisionFunctions: readonly string[] = DECISION_FUNCTIONS,
    private readonly roleCommand: RoleCommand = 'db:worker-role',
  ) {}

  async probe(timeoutMs: number): Promise<ProbeResult> {
    const where = `PostgreSQL at ${redactUrl(this.databaseUrl)}`;
    try {
      await withinMs(this.check(timeoutMs), timeoutMs, 'PostgreSQL');
      if (!this.migrationsVerified) {
        const detail =
          (await withinMs(this.compareMigrations(), timeoutMs, 'PostgreSQL')) ??
          (await withinMs(this.compareSessionBounds(), timeoutMs, 'PostgreSQL'));
        if (detail !== null) return { ok: false, variable: 'DATABASE_URL', detail: `${where}: ${detail}` };
        this.migrationsVerified = true;
      }
      // Every round: a grant can be revoked at any time (a migration that replaces the function).
      const privileges = await withinMs(this.decisionPrivileges(), timeoutMs, 'PostgreSQL');
      if (privileges !== null) return { ok: false, variable: 'DATABASE_URL', detail: `${where}: ${privileges}` };
      return { ok: true };
    } catch (err) {
      this.drop();
      // PgBouncer's answer to the start-up parameters sent straight to PostgreSQL.
      const hint = messageOf(err).includes('unsupported startup parameter')
        ? '; behind PgBouncer set DATABASE_POOLER=pgbouncer'
        : '';
      return { ok: false, variable: 'DATABASE_URL', detail: `${where}: ${postgresProblem(err)}${hint}` };
    }
  }

  async close(timeoutMs: number): Promise<void> {
    const client = this.client;
    this.client = null;
    if (client !== null) await withinMs(client.end(), timeoutMs, 'PostgreSQL').catch(() => undefined);
  }

  private async check(timeoutMs: number): Promise<void> {
    if (this.client === null) {
      const client = new pg.Client({
        connectionString: this.databaseUrl,
        connectionTimeoutMillis: timeoutMs,
        ...sessionStartupParameters(this.session),
        application_name: 'fenced-transfers-probe',
      });
      // A connection ended by the server (restart, pg_terminate_backend) emits here; the next probe reconnects.
      client.on('error', () => {
        if (this.client === client) this.drop();
      });
      this.client = client;
      await client.connect();
    }
    await this.client.query('SELECT 1');
  }

  private async decisionPrivileges(): Promise<string | null> {
    const client = this.client;
    if (client === null) throw new Error('not connected');
    const rows = (
      await client.query<PrivilegeRow>(
        `SELECT s.signature, to_regprocedure(s.signature) IS NOT NULL AS present,
                has_function_privilege(to_regprocedure(s.signature), 'EXECUTE') AS executable, current_user AS role
           FROM unnest($1::text[]) AS s(signature)`,
        [this.decisionFunctions],
      )
    ).rows;
    return decisionPrivilegeProblem(rows, this.roleCommand);
  }

  private async compareMigrations(): Promise<string | null> {
    const client = this.client;
    if (client === null) throw new Error('not connected');
    try {
      const rows = (
        await client.query<MigrationRow>(
          'SELECT migration_name, checksum FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
        )
      ).rows;
      return missingMigrations(this.expectedMigrations, rows);
    } catch (err) {
      // 42P01: no _prisma_migrations table, so nothing was ever migrated here.
      if ((err as { code?: unknown }).code === '42P01') return missingMigrations(this.expectedMigrations, []);
      throw err;
    }
  }

  private async compareSessionBounds(): Promise<string | null> {
    const client = this.client;
    if (client === null) throw new Error('not connected');
    const differ = sessionSettingsDiffer(await readSessionSettings(client), this.session);
    return differ.length === 0
      ? null
      : `session bounds not in force: ${differ.join('; ')}; ${sessionBoundsFix(this.session)}`;
  }

  /** Forgets the connection without waiting for it to close: on a stalled link, closing could hang too. */
  private drop(): void {
    const client = this.client;
    this.client = null;
    this.migrationsVerified = false;
    if (client !== null) void client.end().catch(() => undefined);
  }
}
