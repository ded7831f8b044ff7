// `npm run db:new-migration -- <name> "<why>"`: the next migration, written from prisma/sql/. A
// scratch database is migrated, every source file is run on it, and the migration holds the files
// whose definitions differ from what the migrations left (whole files, so each object keeps its
// privileges and attributes), after a DROP for every function or trigger no file defines any more.
// Nothing is written when nothing changed. Then prisma/schema.sql is rewritten from a database the
// new migrations built, and the check is run on it, so what the command writes is what `npm test`
// accepts.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { withDatabase } from '../../src/config/config.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { applySqlSources, catalogObjects, checkSqlSources, dumpSchema, readSqlSources } from './sql-sources.ts';

export interface NewMigrationOptions {
  /** Any database URL of the server to use; scratch databases are made beside it and dropped. */
  serverUrl: string;
  migrationsDir: string;
  sourcesDir: string;
  snapshotPath: string;
  /** Folder suffix: lower-case words joined by `_`. */
  name: string;
  /** The migration's first comment: what it changes and why (the migrations reference shows it). */
  why: string;
}

export interface NewMigrationResult {
  /** The folder written, or null when the files and the migrations already agree. */
  folder: string | null;
  files: string[];
  dropped: string[];
}

export const MIGRATION_NAME_PATTERN = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

/** The folder name after the last one: its day plus one, at midnight, as the migrations are numbered. */
export function nextMigrationFolder(existing: string[], name: string): string {
  const last = existing
    .filter((n) => /^\d{14}_/.test(n))
    .sort()
    .at(-1);
  const day = last
    ? new Date(Date.UTC(Number(last.slice(0, 4)), Number(last.slice(4, 6)) - 1, Number(last.slice(6, 8)) + 1, 0, 0, 0))
    : new Date();
  const stamp = `${day.getUTCFullYear()}${String(day.getUTCMonth() + 1).padStart(2, '0')}${String(day.getUTCDate()).padStart(2, '0')}000000`;
  return `${stamp}_${name}`;
}

function commentLines(text: string): string {
  const words = text.trim().split(/\s+/);
  const lines: string[] = [];
  let line = '--';
  for (const word of words) {
    if (line.length + word.length + 1 > 99 && line !== '--') {
      lines.push(line);
      line = '--';
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines.join('\n');
}

function dropStatement(key: string): string {
  const fn = /^function (.+)$/.exec(key);
  if (fn) return `DROP FUNCTION ${fn[1]};`;
  const trigger = /^trigger (\S+) on (\S+)$/.exec(key);
  if (trigger) return `DROP TRIGGER "${trigger[1]}" ON "${trigger[2]}";`;
  throw new Error(`cannot drop ${key}`);
}

async function withScratch<T>(serverUrl: string, use: (url: string) => Promise<T>): Promise<T> {
  const url = withDatabase(serverUrl, `ft_sql_${process.pid}_${randomBytes(4).toString('hex')}`);
  try {
    return await use(url);
  } finally {
    await dropDatabase(url).catch(() => undefined);
  }
}

export async function writeNewMigration(options: NewMigrationOptions): Promise<NewMigrationResult> {
  if (!MIGRATION_NAME_PATTERN.test(options.name)) {
    throw new Error(`migration name ${JSON.stringify(options.name)}: lower-case words joined by _`);
  }
  if (options.why.trim().length < 10) throw new Error('say what the migration changes and why (10 characters or more)');
  const sources = readSqlSources(options.sourcesDir);
  const plan = await withScratch(options.serverUrl, async (url) => {
    await migrate(url, options.migrationsDir);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const before = await catalogObjects(client);
      const applied = await applySqlSources(client, sources);
      const defined = new Set(applied.flatMap((a) => a.defines));
      return {
        files: applied.filter((a) => a.changed.length > 0).map((a) => a.file),
        dropped: [...before.keys()].filter((key) => !defined.has(key)).sort(),
      };
    } finally {
      await client.end();
    }
  });
  if (plan.files.length === 0 && plan.dropped.length === 0) return { folder: null, ...plan };

  const folder = nextMigrationFolder(readdirSync(options.migrationsDir), options.name);
  const byFile = new Map(sources.map((s) => [s.file, s.sql]));
  const parts = [
    commentLines(options.why),
    '--',
    commentLines(
      `Written by \`npm run db:new-migration\` from prisma/sql/: ${plan.files.join(', ') || 'no file'}${
        plan.dropped.length > 0 ? `; drops ${plan.dropped.map((key) => key.replace(/\(.*\)$/, '(…)')).join(', ')}` : ''
      }.`,
    ),
    '',
    '-- A function may name one defined further down; each is checked when it runs.',
    'SET LOCAL check_function_bodies = off;',
    '',
    ...plan.dropped.map(dropStatement),
    ...plan.files.flatMap((file) => [`-- prisma/sql/${file}`, (byFile.get(file) ?? '').trimEnd(), '']),
  ];
  const dir = join(options.migrationsDir, folder);
  if (existsSync(dir)) throw new Error(`${dir} exists already`);
  mkdirSync(dir);
  writeFileSync(join(dir, 'migration.sql'), `${parts.join('\n').trimEnd()}\n`);
  await writeSnapshot(options);
  return { folder, ...plan };
}

/**
 * Rewrites prisma/schema.sql from a database the migrations built, after checking on two such
 * databases that the source files agree with them; refuses (and writes nothing) when they do not.
 */
export async function writeSnapshot(options: Omit<NewMigrationOptions, 'name' | 'why'>): Promise<void> {
  await withScratch(options.serverUrl, (migratedUrl) =>
    withScratch(options.serverUrl, async (sourcedUrl) => {
      await Promise.all([migrate(migratedUrl, options.migrationsDir), migrate(sourcedUrl, options.migrationsDir)]);
      const migratedDump = await dumpSchema(migratedUrl);
      const check = await checkSqlSources(migratedUrl, sourcedUrl, readSqlSources(options.sourcesDir), migratedDump);
      if (check.problems.length > 0) throw new Error(check.problems.join('\n'));
      writeFileSync(options.snapshotPath, migratedDump);
    }),
  );
}
