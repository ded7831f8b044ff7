// The migration runner (src/db/migrations.ts, `npm run db:migrate`): a second run is a no-op,
// runners started at the same moment apply each migration exactly once, an edited applied
// migration and a failed migration stop it with a message that says what to fix.
import { createHash } from 'node:crypto';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate, readMigrations } from '../../src/db/migrations.ts';
import { MigrationError } from '../../src/errors.ts';
import { describeRun, lastJsonLine, runCommand, runSource } from '../support/cli-process.ts';
import { uniqueName } from '../support/test-db.ts';

const serverUrl = loadConfig().databaseUrl;
const databases: string[] = [];
const tempDirs: string[] = [];

/** The URL of a database that does not exist yet; dropped after the file's tests. */
function freshDatabaseUrl(): string {
  const name = uniqueName('ft_migrate');
  databases.push(name);
  return withDatabase(serverUrl, name);
}

/** A private copy of prisma/migrations that a test may edit. */
function migrationsCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ft-migrations-'));
  tempDirs.push(dir);
  cpSync(MIGRATIONS_DIR, dir, { recursive: true });
  return dir;
}

function addMigration(dir: string, name: string, sql: string): void {
  mkdirSync(join(dir, name));
  writeFileSync(join(dir, name, 'migration.sql'), sql);
}

interface MigrationRecord {
  id: string;
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
  applied_steps_count: number;
  logs: string | null;
}

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  // Errors reach the test through the query in flight; the event after it must not crash the file.
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

function migrationRecords(url: string): Promise<MigrationRecord[]> {
  return withClient(
    url,
    async (c) =>
      (
        await c.query<MigrationRecord>(
          `SELECT id, migration_name, checksum, finished_at, rolled_back_at, applied_steps_count, logs
       FROM "_prisma_migrations" ORDER BY migration_name, started_at`,
        )
      ).rows,
  );
}

async function tableExists(url: string, table: string): Promise<boolean> {
  return withClient(url, async (c) => (await c.query('SELECT to_regclass($1) AS t', [table])).rows[0].t !== null);
}

function sha256Hex(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** Every migration of the repository recorded exactly once, finished, with the file's checksum. */
function expectEachAppliedOnce(records: MigrationRecord[]): void {
  const files = readMigrations(MIGRATIONS_DIR);
  expect(files.length).toBeGreaterThan(0);
  expect(records.map((r) => r.migration_name)).toEqual(files.map((f) => f.name));
  for (const file of files) {
    const record = records.find((r) => r.migration_name === file.name);
    expect(record, file.name).toMatchObject({
      checksum: sha256Hex(file.path),
      applied_steps_count: 1,
      rolled_back_at: null,
      logs: null,
    });
    expect(record?.checksum).toMatch(/^[0-9a-f]{64}$/);
    expect(record?.finished_at).toBeInstanceOf(Date);
  }
}

afterAll(async () => {
  for (const name of databases) await dropDatabase(withDatabase(serverUrl, name));
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

describe('npm run db:migrate', () => {
  it('creates the database and applies every migration, then does nothing the second time', async () => {
    const url = freshDatabaseUrl();
    const names = readMigrations(MIGRATIONS_DIR).map((m) => m.name);

    const first = await runCommand('npm', ['run', 'db:migrate'], { DATABASE_URL: url });
    expect(first.code, describeRun(first)).toBe(0);
    expect(lastJsonLine(first)).toMatchObject({ createdDatabase: true, applied: names, alreadyApplied: [] });
    const afterFirst = await migrationRecords(url);
    expectEachAppliedOnce(afterFirst);

    const second = await runCommand('npm', ['run', 'db:migrate'], { DATABASE_URL: url });
    expect(second.code, describeRun(second)).toBe(0);
    expect(lastJsonLine(second)).toMatchObject({ createdDatabase: false, applied: [], alreadyApplied: names });
    // Same rows, untouched: same ids and finish times.
    expect(await migrationRecords(url)).toEqual(afterFirst);
  });

  it('three runners started at the same moment on a missing database apply each migration once', async () => {
    const url = freshDatabaseUrl();
    const names = readMigrations(MIGRATIONS_DIR).map((m) => m.name);

    const runs = await Promise.all([1, 2, 3].map(() => runSource('src/cli/migrate.ts', [], { DATABASE_URL: url })));
    for (const run of runs) expect(run.code, describeRun(run)).toBe(0);
    const results = runs.map(
      (r) => lastJsonLine(r) as { createdDatabase: boolean; applied: string[]; alreadyApplied: string[] },
    );
    expect(results.filter((r) => r.createdDatabase)).toHaveLength(1);
    // Exactly one runner applied each migration; the two others found it done.
    expect(results.flatMap((r) => r.applied).sort()).toEqual(names);
    expect(results.flatMap((r) => r.alreadyApplied).sort()).toEqual([...names, ...names].sort());
    expectEachAppliedOnce(await migrationRecords(url));
  });
});

describe('migrate(url, dir)', () => {
  it('refuses an applied migration whose file was edited, naming the file', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsCopy();
    const first = readMigrations(dir)[0];
    if (first === undefined) throw new Error('no migration in the repository');
    await migrate(url, dir);
    const before = await migrationRecords(url);

    appendFileSync(first.path, '\n-- an innocent-looking edit\n');
    const error = await migrate(url, dir).then(
      () => null,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toContain(first.path);
    expect((error as Error).message).toContain('was edited after it was applied');
    expect((error as Error).message).toContain(sha256Hex(first.path));
    expect(await migrationRecords(url)).toEqual(before);
  });

  it('a failing migration stops the runner, records its log, and the next run refuses with that log', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsCopy();
    const base = readMigrations(dir).map((m) => m.name);
    // The file runs as one implicit transaction: the table created before the error must not stay.
    addMigration(dir, '29990101000000_broken', 'CREATE TABLE "half_done" (x int);\nSELECT 1 / 0;\n');
    addMigration(dir, '29990102000000_after', 'CREATE TABLE "after_broken" (x int);\n');

    const error = await migrate(url, dir).then(
      () => null,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(MigrationError);
    expect((error as Error).message).toMatch(/migration 29990101000000_broken failed: division by zero/);

    const records = await migrationRecords(url);
    expect(records.map((r) => r.migration_name)).toEqual([...base, '29990101000000_broken']);
    expect(records.find((r) => r.migration_name === '29990101000000_broken')).toMatchObject({
      finished_at: null,
      rolled_back_at: null,
      applied_steps_count: 0,
      logs: expect.stringContaining('division by zero'),
    });
    expect(await tableExists(url, 'half_done')).toBe(false);
    expect(await tableExists(url, 'after_broken')).toBe(false);

    // Fixing the file is not enough: a failed migration must be resolved by hand (P3009).
    writeFileSync(join(dir, '29990101000000_broken', 'migration.sql'), 'CREATE TABLE "half_done" (x int);\n');
    const refusal = await migrate(url, dir).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(MigrationError);
    expect((refusal as Error).message).toContain('29990101000000_broken');
    expect((refusal as Error).message).toContain('P3009');
    expect((refusal as Error).message).toContain('division by zero');
    expect(await tableExists(url, 'half_done')).toBe(false);
    expect(await tableExists(url, 'after_broken')).toBe(false);
    expect(await migrationRecords(url)).toEqual(records);
  });

  it('the CLI reports a failed migration on stderr with exit code 1', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsCopy();
    addMigration(dir, '29990101000000_broken', 'SELECT 1 / 0;\n');
    await migrate(url, dir).catch(() => undefined);
    // The repository's own folder now meets a database with a failed migration recorded.
    const run = await runSource('src/cli/migrate.ts', [], { DATABASE_URL: url });
    expect(run.code, describeRun(run)).toBe(1);
    expect(run.stderr).toMatch(/^error: migration 29990101000000_broken failed before .*P3009/);
    expect(run.stderr).toContain('division by zero');
    expect(run.stderr).not.toContain('    at ');
  });
});
