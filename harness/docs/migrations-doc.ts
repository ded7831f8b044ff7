// Renders the migrations table of docs/reference/migrations.md from the migrations themselves:
// one row per folder of prisma/migrations, in the order `npm run db:migrate` applies them
// (src/db/migrations.ts reads them the same way), each described by the first paragraph of the
// leading comment of its migration.sql. The rest of migrations.md is written by hand; only the
// part between the two markers is generated. The migrations are a parameter so that a test can
// render a changed list and see the drift check catch it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS_DIR, PROJECT_ROOT } from '../../src/config/paths.ts';
import { readMigrations } from '../../src/db/migrations.ts';
import type { ReferenceDoc } from './reference-docs.ts';

export const MIGRATIONS_DOC = 'docs/reference/migrations.md';

/** The markers around the generated table; everything outside them is the page's own. */
export const MIGRATIONS_BEGIN =
  '<!-- Begin of the migrations table: `npm run docs` writes it from prisma/migrations; edit the migrations, not the table. -->';
export const MIGRATIONS_END = '<!-- End of the migrations table. -->';

export interface DescribedMigration {
  /** The folder, e.g. `20261130000000_init`. */
  readonly name: string;
  readonly sql: string;
}

/**
 * The first paragraph of the comment that opens `sql`: its `--` lines up to the first empty
 * comment line or the first line that is not a comment, joined into one line (a compound broken
 * after its hyphen, `plain-` then `insert`, joined again), without its sentences that only point
 * elsewhere (`See …`). A migration that opens with no comment is an error, so every new folder
 * says what it does.
 */
export function leadingParagraph(name: string, sql: string): string {
  const lines: string[] = [];
  for (const line of sql.replace(/^\uFEFF/, '').split('\n')) {
    const comment = /^\s*--\s?(.*?)\s*$/.exec(line);
    if (comment === null) break;
    const text = comment[1] as string;
    if (text === '') {
      if (lines.length === 0) continue;
      break;
    }
    lines.push(text);
  }
  if (lines.length === 0) throw new Error(`${name}/migration.sql opens with no comment saying what it does`);
  const paragraph = lines.reduce((joined, line) => (/\p{L}-$/u.test(joined) ? joined + line : `${joined} ${line}`));
  // A sentence that only points elsewhere ("See README, ...") is left out: the table says what a
  // migration does, and a pointer frozen in an applied migration can outlive its target.
  return paragraph
    .split(/(?<=\.)\s+(?=[A-Z])/)
    .filter((sentence) => !sentence.startsWith('See '))
    .join(' ');
}

/** The generated part: the markers and, between them, the table. */
export function renderMigrationsTable(migrations: readonly DescribedMigration[]): string {
  const rows = migrations.map((m) => `| \`${m.name}\` | ${leadingParagraph(m.name, m.sql).replace(/\|/g, '\\|')} |`);
  return [
    MIGRATIONS_BEGIN,
    '',
    '| folder | what it does (the first paragraph of its comment) |',
    '| --- | --- |',
    ...rows,
    '',
    MIGRATIONS_END,
  ].join('\n');
}

/** `page` with the part between the markers replaced by `table`; an error when a marker is missing. */
export function withMigrationsTable(page: string, table: string): string {
  const begin = page.indexOf(MIGRATIONS_BEGIN);
  const end = page.indexOf(MIGRATIONS_END);
  if (begin === -1 || end === -1 || end < begin) {
    throw new Error(`${MIGRATIONS_DOC} lacks the migrations table's markers (${MIGRATIONS_BEGIN} … ${MIGRATIONS_END})`);
  }
  return page.slice(0, begin) + table + page.slice(end + MIGRATIONS_END.length);
}

/** migrations.md as committed, its migrations table rendered from `migrations` (by default, prisma/migrations). */
export function migrationsReferenceDoc(
  migrations: () => readonly DescribedMigration[] = () => readMigrations(MIGRATIONS_DIR),
): ReferenceDoc {
  return {
    path: MIGRATIONS_DOC,
    render: () =>
      withMigrationsTable(
        readFileSync(join(PROJECT_ROOT, MIGRATIONS_DOC), 'utf8'),
        renderMigrationsTable(migrations()),
      ),
  };
}
