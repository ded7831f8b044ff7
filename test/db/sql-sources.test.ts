// The database's code lives in prisma/sql/ (one file per function or trigger, its current
// definition) and its shape in the committed snapshot prisma/schema.sql. The check must pass on
// the repository as it is, and must fail, saying which side moved, when a migration changes a
// function without its file, when a file changes without a migration, when a migration changes the
// schema without the snapshot, and when a function has no file. `npm run db:new-migration` must
// write exactly the migration that makes a changed file pass again.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nextMigrationFolder, writeNewMigration } from '../../harness/schema/new-migration.ts';
import {
  checkSqlSources,
  readSqlSources,
  SCHEMA_SNAPSHOT_PATH,
  SQL_SOURCES_DIR,
} from '../../harness/schema/sql-sources.ts';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { uniqueName } from '../support/test-db.ts';

const serverUrl = loadConfig().databaseUrl;
const scratch: string[] = [];
const folders: string[] = [];

afterAll(async () => {
  await Promise.all(scratch.map((url) => dropDatabase(url)));
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

async function migrated(migrationsDir: string): Promise<string> {
  const url = withDatabase(serverUrl, uniqueName('ft_sql'));
  scratch.push(url);
  await migrate(url, migrationsDir);
  return url;
}

function scratchFolder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ft-sql-'));
  folders.push(dir);
  cpSync(MIGRATIONS_DIR, join(dir, 'migrations'), { recursive: true });
  cpSync(SQL_SOURCES_DIR, join(dir, 'sql'), { recursive: true });
  cpSync(SCHEMA_SNAPSHOT_PATH, join(dir, 'schema.sql'));
  return dir;
}

function addMigration(dir: string, name: string, sql: string): void {
  const folder = join(dir, 'migrations', name);
  mkdirSync(folder);
  writeFileSync(join(folder, 'migration.sql'), sql);
}

async function check(dir: string): Promise<string[]> {
  const [a, b] = await Promise.all([migrated(join(dir, 'migrations')), migrated(join(dir, 'migrations'))]);
  const result = await checkSqlSources(
    a,
    b,
    readSqlSources(join(dir, 'sql')),
    readFileSync(join(dir, 'schema.sql'), 'utf8'),
  );
  return result.problems;
}

const POSITION = readFileSync(join(SQL_SOURCES_DIR, 'outcome_cursor_position.sql'), 'utf8');
/** The same function with another body: what a careless change would look like. */
const POSITION_CHANGED = POSITION.replace('), 0);', '), -1);');

describe('the SQL source files and the schema snapshot', () => {
  it('agree with the migrations as committed', async () => {
    expect(POSITION_CHANGED).not.toBe(POSITION);
    const [a, b] = await Promise.all([migrated(MIGRATIONS_DIR), migrated(MIGRATIONS_DIR)]);
    const result = await checkSqlSources(a, b, readSqlSources(), readFileSync(SCHEMA_SNAPSHOT_PATH, 'utf8'));
    expect(result.problems).toEqual([]);
    expect(result.migratedDump).toContain('CREATE FUNCTION public.decide_batch(');
  });

  it('fail when a migration changes a function without its source file', async () => {
    const dir = scratchFolder();
    addMigration(dir, '20991231000000_careless', POSITION_CHANGED);
    const problems = await check(dir);
    expect(problems).toEqual([
      expect.stringMatching(
        /^a migration changed function outcome_cursor_position\(text\) \(prisma\/sql\/outcome_cursor_position\.sql\) without its source file/,
      ),
    ]);
  });

  it('fail when a source file changes without a migration', async () => {
    const dir = scratchFolder();
    writeFileSync(join(dir, 'sql', 'outcome_cursor_position.sql'), POSITION_CHANGED);
    const problems = await check(dir);
    expect(problems).toEqual([
      expect.stringMatching(
        /^source files changed without a migration: function outcome_cursor_position\(text\) \(prisma\/sql\/outcome_cursor_position\.sql\); run `npm run db:new-migration/,
      ),
    ]);
  });

  it('fail when a migration changes the schema without the snapshot', async () => {
    const dir = scratchFolder();
    addMigration(dir, '20991231000000_index', 'CREATE INDEX "holds_to_idx" ON "holds" ("to_wallet");\n');
    const problems = await check(dir);
    expect(problems).toEqual([
      expect.stringMatching(
        /^the migrations change the schema and prisma\/schema\.sql was not updated \(first difference: line \d+/,
      ),
    ]);
  });

  it('fail when a function has no source file', async () => {
    const dir = scratchFolder();
    addMigration(
      dir,
      '20991231000000_stray',
      'CREATE FUNCTION "stray"() RETURNS INTEGER LANGUAGE sql AS $$ SELECT 1 $$;\n',
    );
    const problems = await check(dir);
    expect(problems).toContain('function stray() is defined by the migrations but by no file in prisma/sql/');
  });
});

describe('npm run db:new-migration', () => {
  it('names the next folder after the last one, a day later', () => {
    expect(nextMigrationFolder(['20261215000000_relay_trace_lookup', 'migration_lock.toml'], 'next')).toBe(
      '20261216000000_next',
    );
    expect(nextMigrationFolder(['20261231000000_a'], 'b')).toBe('20270101000000_b');
  });

  it('writes the changed files and the drops, and then the check passes; a second run writes nothing', async () => {
    const dir = scratchFolder();
    const paths = {
      serverUrl,
      migrationsDir: join(dir, 'migrations'),
      sourcesDir: join(dir, 'sql'),
      snapshotPath: join(dir, 'schema.sql'),
    };
    writeFileSync(join(dir, 'sql', 'outcome_cursor_position.sql'), POSITION_CHANGED);
    rmSync(join(dir, 'sql', 'relay_count_lost.sql'));
    const before = readdirSync(paths.migrationsDir);
    const result = await writeNewMigration({
      ...paths,
      name: 'cursor_change',
      why: 'A test changes one function and drops another.',
    });
    expect(result.files).toEqual(['outcome_cursor_position.sql']);
    expect(result.dropped).toEqual(['function relay_count_lost(text[])']);
    expect(result.folder).toBe(nextMigrationFolder(before, 'cursor_change'));
    const written = readFileSync(join(paths.migrationsDir, result.folder ?? '', 'migration.sql'), 'utf8');
    expect(written.startsWith('-- A test changes one function and drops another.\n')).toBe(true);
    expect(written).toContain('DROP FUNCTION relay_count_lost(text[]);');
    expect(written).toContain(POSITION_CHANGED.trimEnd());
    expect(written).not.toContain('decide_batch');
    expect(readFileSync(paths.snapshotPath, 'utf8')).not.toContain('relay_count_lost');

    expect(await check(dir)).toEqual([]);
    const again = await writeNewMigration({ ...paths, name: 'nothing', why: 'Nothing changed since the last one.' });
    expect(again).toEqual({ folder: null, files: [], dropped: [] });
  });
});
