// The database's code as source files. Every function and trigger the migrations define has its
// current definition in one file under prisma/sql/ (a function's overloads share its file), so a
// reader finds the decision in one place and a change to it is reviewed as the diff of one file.
// Applied migrations are never edited: `npm run db:new-migration` writes the next migration from
// the files whose definitions differ from what the migrations leave, and the check below (part of
// `npm test`) proves that the migrations, the files and the committed snapshot prisma/schema.sql
// agree, and says which of them moved when they do not.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

export const SQL_SOURCES_DIR = join(PROJECT_ROOT, 'prisma', 'sql');
export const SCHEMA_SNAPSHOT_PATH = join(PROJECT_ROOT, 'prisma', 'schema.sql');

export interface SqlSource {
  /** The file's name, e.g. `decide_batch.sql`. */
  file: string;
  sql: string;
}

export function readSqlSources(dir = SQL_SOURCES_DIR): SqlSource[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.sql'))
    .sort()
    .map((file) => ({ file, sql: readFileSync(join(dir, file), 'utf8') }));
}

/**
 * What the catalog says of each function and trigger of the current schema: a key
 * (`function name(args)`, `trigger name on table`) and a definition text that changes whenever
 * anything a source file can say changes (body, attributes, settings, privileges).
 */
export async function catalogObjects(client: pg.ClientBase): Promise<Map<string, string>> {
  const objects = new Map<string, string>();
  const functions = await client.query<{ key: string; definition: string }>(`
    SELECT 'function ' || p.oid::regprocedure::TEXT AS key,
           pg_get_functiondef(p.oid) || E'\\n-- acl ' || coalesce(p.proacl::TEXT, 'default') AS definition
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = current_schema() AND p.prokind IN ('f', 'p')`);
  for (const row of functions.rows) objects.set(row.key, row.definition);
  const triggers = await client.query<{ key: string; definition: string }>(`
    SELECT 'trigger ' || t.tgname || ' on ' || c.relname AS key, pg_get_triggerdef(t.oid) AS definition
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND NOT t.tgisinternal`);
  for (const row of triggers.rows) objects.set(row.key, row.definition);
  return objects;
}

/** The keys of the objects this transaction created or replaced (their catalog rows carry its id). */
async function touchedInTransaction(client: pg.ClientBase): Promise<string[]> {
  const rows = await client.query<{ key: string }>(`
    SELECT 'function ' || p.oid::regprocedure::TEXT AS key
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = current_schema() AND p.xmin = pg_current_xact_id()::xid
    UNION ALL
    SELECT 'trigger ' || t.tgname || ' on ' || c.relname
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND NOT t.tgisinternal AND t.xmin = pg_current_xact_id()::xid`);
  return rows.rows.map((r) => r.key).sort();
}

export interface AppliedSource {
  file: string;
  /** The objects the file created or replaced. */
  defines: string[];
  /** Those whose definition differs from what the database had before the file ran (new ones included). */
  changed: string[];
}

/**
 * Runs every source file on a migrated database, each in a transaction of its own that commits,
 * and tells per file what it defines and what it changed. A file that fails names itself.
 */
export async function applySqlSources(client: pg.ClientBase, sources: SqlSource[]): Promise<AppliedSource[]> {
  const applied: AppliedSource[] = [];
  for (const source of sources) {
    const before = await catalogObjects(client);
    await client.query('BEGIN');
    try {
      await client.query('SET LOCAL check_function_bodies = off');
      await client.query(source.sql);
      const defines = await touchedInTransaction(client);
      const after = await catalogObjects(client);
      await client.query('COMMIT');
      applied.push({
        file: source.file,
        defines,
        changed: defines.filter((key) => before.get(key) !== after.get(key)),
      });
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw new Error(`prisma/sql/${source.file} failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return applied;
}

const execFileP = promisify(execFile);

/**
 * `pg_dump --schema-only` of a database, normalised so the same schema gives the same text from
 * run to run and machine to machine: no server or client version, no per-run `\restrict` key,
 * no owner, and the migrations runner's own table left out.
 */
export async function dumpSchema(databaseUrl: string): Promise<string> {
  const { stdout } = await execFileP(
    'pg_dump',
    ['--schema-only', '--no-owner', '--exclude-table=_prisma_migrations', '--dbname', databaseUrl],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return normaliseDump(stdout);
}

export function normaliseDump(dump: string): string {
  return `${dump
    .split('\n')
    .filter((line) => !/^-- Dumped (from database|by pg_dump) version/.test(line))
    .filter((line) => !/^\\(un)?restrict /.test(line))
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim()}\n`;
}

export interface SourceCheck {
  /** Human sentences, one per disagreement; empty when migrations, files and snapshot agree. */
  problems: string[];
  /** The normalised dump of the migrated database, for writing a new snapshot. */
  migratedDump: string;
}

/**
 * Compares three things that must say the same: `migrated` (a database the migrations alone built),
 * `sourced` (another one, with every source file run on top) and the committed snapshot. Both
 * databases must be freshly migrated from the same migrations; `sourced` is changed.
 */
export async function checkSqlSources(
  migratedUrl: string,
  sourcedUrl: string,
  sources: SqlSource[],
  snapshot: string,
): Promise<SourceCheck> {
  const problems: string[] = [];
  const migrated = new pg.Client({ connectionString: migratedUrl });
  const sourced = new pg.Client({ connectionString: sourcedUrl });
  await Promise.all([migrated.connect(), sourced.connect()]);
  try {
    const fromMigrations = await catalogObjects(migrated);
    const applied = await applySqlSources(sourced, sources);
    const fromSources = await catalogObjects(sourced);
    const [migratedDump, sourcedDump] = await Promise.all([dumpSchema(migratedUrl), dumpSchema(sourcedUrl)]);
    const fileOf = new Map<string, string>();
    for (const a of applied) for (const key of a.defines) fileOf.set(key, a.file);

    for (const key of fromMigrations.keys()) {
      if (!fileOf.has(key)) problems.push(`${key} is defined by the migrations but by no file in prisma/sql/`);
    }
    const differing = [...fromSources.keys()].filter((key) => fromMigrations.get(key) !== fromSources.get(key));
    if (differing.length > 0) {
      const where = differing.map((key) => `${key} (prisma/sql/${fileOf.get(key) ?? '?'})`).join(', ');
      problems.push(
        migratedDump === snapshot
          ? `source files changed without a migration: ${where}; run \`npm run db:new-migration -- <name> "<why>"\`` +
              ' (or a migration changed them together with prisma/schema.sql but without their files)'
          : sourcedDump === snapshot
            ? `a migration changed ${where} without its source file and prisma/schema.sql: copy the definition into the file`
            : `the migrations and the source files disagree on ${where}`,
      );
    }
    if (migratedDump !== snapshot && differing.length === 0) {
      problems.push(
        `the migrations change the schema and prisma/schema.sql was not updated (first difference: ${firstDifference(snapshot, migratedDump)}); run \`npm run db:snapshot\``,
      );
    } else if (migratedDump !== snapshot && sourcedDump !== snapshot && migratedDump !== sourcedDump) {
      problems.push('prisma/schema.sql matches neither the migrations nor the source files');
    }
    return { problems, migratedDump };
  } finally {
    await Promise.all([migrated.end(), sourced.end()]);
  }
}

/** The first line where two texts part, as `line N: "expected" / "actual"`. */
export function firstDifference(expected: string, actual: string): string {
  const a = expected.split('\n');
  const b = actual.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `line ${i + 1}: ${JSON.stringify(a[i] ?? '(end)')} / ${JSON.stringify(b[i] ?? '(end)')}`;
  }
  return 'none';
}

/** The longest a function's definition may be, `CREATE` through its closing `$$;` (issue 41). */
export const SQL_FUNCTION_LINES_MAX = 150;

export interface FunctionLength {
  file: string;
  fn: string;
  lines: number;
}

/** Every function definition in the sources, with its length in lines, longest first. */
export function functionLengths(sources: SqlSource[]): FunctionLength[] {
  const lengths: FunctionLength[] = [];
  for (const source of sources) {
    const lines = source.sql.split('\n');
    let start: number | null = null;
    let fn = '';
    lines.forEach((line, i) => {
      const head = /^CREATE (?:OR REPLACE )?FUNCTION "?([a-z_]+)"?\(/.exec(line);
      if (head !== null) {
        start = i;
        fn = head[1] ?? '';
      } else if (start !== null && line === '$$;') {
        lengths.push({ file: source.file, fn, lines: i - start + 1 });
        start = null;
      }
    });
    if (start !== null) throw new Error(`prisma/sql/${source.file}: ${fn}() has no closing $$;`);
  }
  return lengths.sort((a, b) => b.lines - a.lines);
}
