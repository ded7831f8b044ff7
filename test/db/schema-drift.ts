// Compares what prisma/schema.prisma says about the tables with what a migrated database has
// (information_schema and pg_catalog), and returns every difference it finds: an empty list
// means the schema and the migrations agree on tables, columns, types, nullability, defaults,
// primary keys and indexes. CHECK constraints and functions are outside Prisma's schema and
// are not compared.
import type pg from 'pg';
import {
  type ColumnDefault,
  type ColumnType,
  type ExpectedTable,
  expectedTables,
  parsePrismaSchema,
} from './prisma-schema.ts';

export type DifferenceKind =
  | 'missing_table'
  | 'extra_table'
  | 'missing_column'
  | 'extra_column'
  | 'type'
  | 'nullability'
  | 'default'
  | 'primary_key'
  | 'missing_index'
  | 'index_columns'
  | 'extra_index';

export interface SchemaDifference {
  kind: DifferenceKind;
  table: string;
  column?: string;
  index?: string;
  /** What schema.prisma implies, and what the database has (absent for missing/extra). */
  expected?: string;
  actual?: string;
}

/** Tables the migration runner owns, not described by the schema. */
// outcome_pending has no key since the lean-single-decision migration (a holding area the feed's
// sequencer empties), and Prisma cannot model a table without one: it is left out of the schema.
const IGNORED_TABLES = new Set(['_prisma_migrations', 'outcome_pending']);

export interface Queryable {
  query<R extends pg.QueryResultRow>(text: string): Promise<pg.QueryResult<R>>;
}

interface ColumnRow {
  table_name: string;
  column_name: string;
  data_type: string;
  character_maximum_length: number | null;
  datetime_precision: number | null;
  numeric_precision: number | null;
  numeric_scale: number | null;
  is_nullable: 'YES' | 'NO';
  column_default: string | null;
}

interface IndexRow {
  table_name: string;
  index_name: string;
  is_primary: boolean;
  backs_constraint: boolean;
  columns: string[];
}

export function formatType(type: ColumnType): string {
  if (type.length !== undefined) return `${type.dataType}(${type.length})`;
  if (type.dataType === 'numeric' && type.precision !== undefined)
    return `numeric(${type.precision},${type.scale ?? 0})`;
  if (type.precision !== undefined) return `${type.dataType}(${type.precision})`;
  return type.dataType;
}

function actualType(row: ColumnRow): ColumnType {
  switch (row.data_type) {
    case 'character':
    case 'character varying':
      return row.character_maximum_length === null
        ? { dataType: row.data_type }
        : { dataType: row.data_type, length: row.character_maximum_length };
    case 'timestamp with time zone':
    case 'timestamp without time zone':
      return row.datetime_precision === null
        ? { dataType: row.data_type }
        : { dataType: row.data_type, precision: row.datetime_precision };
    case 'numeric':
      return row.numeric_precision === null
        ? { dataType: 'numeric' }
        : { dataType: 'numeric', precision: row.numeric_precision, scale: row.numeric_scale ?? 0 };
    default:
      return { dataType: row.data_type };
  }
}

export function formatDefault(def: ColumnDefault): string {
  switch (def.kind) {
    case 'none':
      return 'no default';
    case 'autoincrement':
      return 'autoincrement()';
    case 'now':
      return 'now()';
    case 'literal':
      return `literal ${JSON.stringify(def.value)}`;
    case 'expression':
      return `dbgenerated(${JSON.stringify(def.sql)})`;
  }
}

/** The literal inside a column default as PostgreSQL prints it: `'EUR'::bpchar` → EUR, `0` → 0. */
function literalOf(columnDefault: string): string {
  let text = columnDefault.trim();
  for (;;) {
    const cast = /^(.*)::[a-z][a-z0-9_ ]*(\(\d+(,\d+)?\))?(\[\])?$/is.exec(text);
    if (cast === null) break;
    text = (cast[1] ?? '').trim();
  }
  while (text.startsWith('(') && text.endsWith(')')) text = text.slice(1, -1).trim();
  if (text.startsWith("'") && text.endsWith("'")) text = text.slice(1, -1).replaceAll("''", "'");
  return text;
}

function defaultMatches(expected: ColumnDefault, actual: string | null): boolean {
  switch (expected.kind) {
    case 'none':
      return actual === null;
    case 'autoincrement':
      return actual !== null && /^nextval\(/.test(actual);
    case 'now':
      return actual !== null && /^(CURRENT_TIMESTAMP(\(\d\))?|now\(\))$/i.test(actual.trim());
    case 'literal':
      return actual !== null && literalOf(actual) === expected.value;
    case 'expression':
      return actual !== null && actual.trim() === expected.sql.trim();
  }
}

async function readDatabase(db: Queryable): Promise<{ tables: string[]; columns: ColumnRow[]; indexes: IndexRow[] }> {
  const tables = await db.query<{ table_name: string }>(`
    SELECT table_name FROM information_schema.tables
     WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
     ORDER BY table_name`);
  const columns = await db.query<ColumnRow>(`
    SELECT table_name, column_name, data_type, character_maximum_length, datetime_precision,
           numeric_precision, numeric_scale, is_nullable, column_default
      FROM information_schema.columns
     WHERE table_schema = current_schema()
     ORDER BY table_name, ordinal_position`);
  const indexes = await db.query<IndexRow>(`
    SELECT t.relname::text AS table_name, i.relname::text AS index_name, ix.indisprimary AS is_primary,
           EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid) AS backs_constraint,
           array_agg(a.attname::text ORDER BY k.ord) AS columns
      FROM pg_index ix
      JOIN pg_class i ON i.oid = ix.indexrelid
      JOIN pg_class t ON t.oid = ix.indrelid
      JOIN pg_namespace n ON n.oid = t.relnamespace
      CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
     WHERE n.nspname = current_schema()
     GROUP BY t.relname, i.relname, ix.indisprimary, ix.indexrelid
     ORDER BY t.relname, i.relname`);
  return { tables: tables.rows.map((r) => r.table_name), columns: columns.rows, indexes: indexes.rows };
}

/** Every difference between the expected tables and the database, in a stable order. */
export async function compareTables(expected: readonly ExpectedTable[], db: Queryable): Promise<SchemaDifference[]> {
  const actual = await readDatabase(db);
  const differences: SchemaDifference[] = [];
  const expectedNames = new Set(expected.map((t) => t.table));

  for (const table of expected) {
    if (!actual.tables.includes(table.table)) {
      differences.push({ kind: 'missing_table', table: table.table });
      continue;
    }
    const columns = actual.columns.filter((c) => c.table_name === table.table);
    for (const column of table.columns) {
      const row = columns.find((c) => c.column_name === column.column);
      if (row === undefined) {
        differences.push({ kind: 'missing_column', table: table.table, column: column.column });
        continue;
      }
      const expectedType = formatType(column.type);
      const actualTypeText = formatType(actualType(row));
      if (expectedType !== actualTypeText) {
        differences.push({
          kind: 'type',
          table: table.table,
          column: column.column,
          expected: expectedType,
          actual: actualTypeText,
        });
      }
      const nullable = row.is_nullable === 'YES';
      if (nullable !== column.nullable) {
        differences.push({
          kind: 'nullability',
          table: table.table,
          column: column.column,
          expected: column.nullable ? 'NULL' : 'NOT NULL',
          actual: nullable ? 'NULL' : 'NOT NULL',
        });
      }
      if (!defaultMatches(column.default, row.column_default)) {
        differences.push({
          kind: 'default',
          table: table.table,
          column: column.column,
          expected: formatDefault(column.default),
          actual: row.column_default ?? 'no default',
        });
      }
    }
    for (const row of columns) {
      if (!table.columns.some((c) => c.column === row.column_name)) {
        differences.push({ kind: 'extra_column', table: table.table, column: row.column_name });
      }
    }

    const indexes = actual.indexes.filter((i) => i.table_name === table.table);
    const primary = indexes.find((i) => i.is_primary);
    const actualKey = primary?.columns.join(', ') ?? '(none)';
    const expectedKey = table.primaryKey.length === 0 ? '(none)' : table.primaryKey.join(', ');
    if (actualKey !== expectedKey) {
      differences.push({ kind: 'primary_key', table: table.table, expected: expectedKey, actual: actualKey });
    }
    for (const index of table.indexes) {
      const found = indexes.find((i) => i.index_name === index.name);
      if (found === undefined) {
        differences.push({
          kind: 'missing_index',
          table: table.table,
          index: index.name,
          expected: index.columns.join(', '),
        });
      } else if (found.columns.join(', ') !== index.columns.join(', ')) {
        differences.push({
          kind: 'index_columns',
          table: table.table,
          index: index.name,
          expected: index.columns.join(', '),
          actual: found.columns.join(', '),
        });
      }
    }
    for (const index of indexes) {
      if (index.is_primary || index.backs_constraint) continue;
      if (!table.indexes.some((i) => i.name === index.index_name)) {
        differences.push({
          kind: 'extra_index',
          table: table.table,
          index: index.index_name,
          actual: index.columns.join(', '),
        });
      }
    }
  }

  for (const table of actual.tables) {
    if (!expectedNames.has(table) && !IGNORED_TABLES.has(table)) differences.push({ kind: 'extra_table', table });
  }
  return differences;
}

/** Parses the schema text and compares it with the database. */
export async function schemaDrift(schemaSource: string, db: Queryable): Promise<SchemaDifference[]> {
  return compareTables(expectedTables(parsePrismaSchema(schemaSource)), db);
}

/** One line per difference, for assertion messages. */
export function describeDifferences(differences: readonly SchemaDifference[]): string {
  return differences
    .map((d) => {
      const where = [d.table, d.column ?? d.index].filter((s) => s !== undefined).join('.');
      const detail = [
        d.expected === undefined ? '' : `schema: ${d.expected}`,
        d.actual === undefined ? '' : `database: ${d.actual}`,
      ]
        .filter((s) => s !== '')
        .join('; ');
      return `${d.kind} ${where}${detail === '' ? '' : ` (${detail})`}`;
    })
    .join('\n');
}
