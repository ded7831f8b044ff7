// Applies prisma/migrations with plain pg, compatibly with `prisma migrate deploy` (whose
// native engine cannot be downloaded everywhere): same _prisma_migrations table and rows,
// same checksum, same advisory lock, so either tool can take over from the other.
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { databaseName } from '../config/config.ts';
import { MigrationError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import { ensureDatabase } from './database-admin.ts';

/** The key Prisma's schema engine locks around deploy; sharing it makes runners exclude each other. */
export const PRISMA_MIGRATE_ADVISORY_LOCK_KEY = 72707369;
export const MIGRATIONS_DIR_NAME = 'migrations';

export interface MigrationFile {
  name: string;
  path: string;
  sql: string;
  checksum: string;
}

export interface MigrateResult {
  database: string;
  createdDatabase: boolean;
  applied: string[];
  alreadyApplied: string[];
}

export function readMigrations(migrationsDir: string): MigrationFile[] {
  if (!existsSync(migrationsDir)) throw new MigrationError(`no migrations folder at ${migrationsDir}`);
  return readdirSync(migrationsDir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
    .map((name) => {
      const path = join(migrationsDir, name, 'migration.sql');
      if (!existsSync(path)) throw new MigrationError(`migration folder ${name} has no migration.sql`);
      const bytes = readFileSync(path);
      return { name, path, sql: bytes.toString('utf8'), checksum: createHash('sha256').update(bytes).digest('hex') };
    });
}

const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                  VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"            VARCHAR(64) NOT NULL,
    "finished_at"         TIMESTAMPTZ,
    "migration_name"      VARCHAR(255) NOT NULL,
    "logs"                TEXT,
    "rolled_back_at"      TIMESTAMPTZ,
    "started_at"          TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

interface MigrationRow {
  id: string;
  checksum: string;
  migration_name: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  logs: string | null;
}

export async function migrate(databaseUrl: string, migrationsDir: string, logger?: Logger): Promise<MigrateResult> {
  const migrations = readMigrations(migrationsDir);
  const createdDatabase = await ensureDatabase(databaseUrl);
  const client = new pg.Client({
    connectionString: databaseUrl,
    // Unbounded, whatever the role's defaults (the session bounds db:session-bounds may set for
    // the owner): a migration on a large table may take long. As start-up parameters, which
    // PgBouncer refuses: migrations need a session of their own (the advisory lock below) and
    // run straight against PostgreSQL.
    options: '-c statement_timeout=0 -c lock_timeout=0 -c idle_in_transaction_session_timeout=0',
  });
  // A session the server ends fails the query in flight, which reaches the caller; the client then
  // also emits 'error', which must not crash the process.
  client.on('error', () => undefined);
  await client.connect();
  const result: MigrateResult = {
    database: databaseName(databaseUrl),
    createdDatabase,
    applied: [],
    alreadyApplied: [],
  };
  try {
    await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_ADVISORY_LOCK_KEY]);
    await client.query(CREATE_MIGRATIONS_TABLE);
    const rows = (
      await client.query<MigrationRow>(
        'SELECT id, checksum, migration_name, finished_at, rolled_back_at, logs FROM "_prisma_migrations" ORDER BY started_at',
      )
    ).rows;

    const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
    if (failed) {
      throw new MigrationError(
        `migration ${failed.migration_name} failed before and must be resolved by hand (Prisma's P3009); its log:\n${failed.logs ?? '(none)'}`,
      );
    }

    for (const migration of migrations) {
      const done = rows.find(
        (r) => r.migration_name === migration.name && r.finished_at !== null && r.rolled_back_at === null,
      );
      if (done) {
        if (done.checksum !== migration.checksum) {
          throw new MigrationError(
            `${migration.path} was edited after it was applied (checksum ${migration.checksum} differs from the recorded ${done.checksum}); add a new migration instead`,
          );
        }
        result.alreadyApplied.push(migration.name);
        continue;
      }

      const id = randomUUID();
      await client.query(
        'INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count) VALUES ($1, $2, $3, now(), 0)',
        [id, migration.checksum, migration.name],
      );
      try {
        // One query through the simple protocol: PostgreSQL runs the whole file as one implicit
        // transaction, and PL/pgSQL bodies ($$ ... $$) reach the server intact.
        await client.query(migration.sql);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        await client.query('UPDATE "_prisma_migrations" SET logs = $2 WHERE id = $1', [id, message]);
        throw new MigrationError(`migration ${migration.name} failed: ${message}`);
      }
      await client.query('UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1', [
        id,
      ]);
      logger?.info({ migration: migration.name }, 'migration applied');
      result.applied.push(migration.name);
    }
    return result;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [PRISMA_MIGRATE_ADVISORY_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
}
