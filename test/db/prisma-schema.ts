// A small parser for the part of the Prisma schema language that prisma/schema.prisma uses:
// models; scalar fields with `?`, `@id`, `@default(...)`, `@map("...")`, `@db.X(...)`;
// block attributes `@@map("...")`, `@@index([...], map: "...")` (a field's `(ops: …)` read as
// the field), `@@id([...])`. Anything else it meets (enums, @unique, @updatedAt, ...) is an error naming the line, so that a schema change
// the drift test does not understand fails loudly instead of being skipped.

export interface PrismaAttribute {
  /** Without the `@`/`@@`: `id`, `default`, `map`, `db.Char`, `index`. */
  name: string;
  /** The text between the parentheses, unparsed; null when there are none. */
  args: string | null;
}

export interface PrismaField {
  name: string;
  type: string;
  optional: boolean;
  list: boolean;
  attributes: PrismaAttribute[];
  line: number;
}

export interface PrismaModel {
  name: string;
  fields: PrismaField[];
  attributes: PrismaAttribute[];
  line: number;
}

export class PrismaSchemaError extends Error {
  override name = 'PrismaSchemaError';
}

const SCALAR_TYPES = new Set(['String', 'Boolean', 'Int', 'BigInt', 'Float', 'Decimal', 'DateTime', 'Json', 'Bytes']);
const FIELD_ATTRIBUTES = new Set(['id', 'default', 'map', 'relation']);
const BLOCK_ATTRIBUTES = new Set(['map', 'index', 'id']);
const SKIPPED_BLOCKS = new Set(['generator', 'datasource']);

/** The line without its `//` comment; `//` inside a string literal is kept. */
function stripComment(line: string): string {
  let inString = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (ch === '\\' && inString) i++;
    else if (ch === '"') inString = !inString;
    else if (!inString && ch === '/' && line[i + 1] === '/') return line.slice(0, i);
  }
  return line;
}

/** Reads `@name` or `@name(args)` repeatedly from `text`, balancing parentheses and quotes. */
function parseAttributes(text: string, prefix: '@' | '@@', lineNo: number): PrismaAttribute[] {
  const attributes: PrismaAttribute[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new PrismaSchemaError(`schema.prisma line ${lineNo}: ${why} in ${JSON.stringify(text.trim())}`);
  };
  for (;;) {
    while (i < text.length && /\s/.test(text[i] ?? '')) i++;
    if (i >= text.length) return attributes;
    if (!text.startsWith(prefix, i) || (prefix === '@' && text[i + 1] === '@')) fail(`expected ${prefix}attribute`);
    i += prefix.length;
    const nameMatch = /^[A-Za-z_][A-Za-z0-9_.]*/.exec(text.slice(i));
    if (nameMatch === null) return fail('attribute without a name');
    const name = nameMatch[0];
    i += name.length;
    let args: string | null = null;
    if (text[i] === '(') {
      let depth = 0;
      let inString = false;
      const start = i + 1;
      for (; i < text.length; i++) {
        const ch = text[i];
        if (inString) {
          if (ch === '\\') i++;
          else if (ch === '"') inString = false;
        } else if (ch === '"') inString = true;
        else if (ch === '(') depth++;
        else if (ch === ')' && --depth === 0) break;
      }
      if (depth !== 0) fail('unbalanced parentheses');
      args = text.slice(start, i);
      i++;
    }
    attributes.push({ name, args });
  }
}

export function parsePrismaSchema(source: string): PrismaModel[] {
  const models: PrismaModel[] = [];
  let block: { kind: string; model: PrismaModel | null } | null = null;
  const lines = source.split('\n');
  for (let index = 0; index < lines.length; index++) {
    const lineNo = index + 1;
    const line = stripComment(lines[index] ?? '').trim();
    if (line === '') continue;
    if (block === null) {
      const open = /^(\w+)\s+(\w+)\s*\{$/.exec(line);
      if (open === null)
        throw new PrismaSchemaError(`schema.prisma line ${lineNo}: expected a block, got ${JSON.stringify(line)}`);
      const [, kind = '', name = ''] = open;
      if (kind === 'model') {
        const model: PrismaModel = { name, fields: [], attributes: [], line: lineNo };
        models.push(model);
        block = { kind, model };
      } else if (SKIPPED_BLOCKS.has(kind)) {
        block = { kind, model: null };
      } else {
        throw new PrismaSchemaError(
          `schema.prisma line ${lineNo}: \`${kind}\` blocks are not supported by test/db/prisma-schema.ts`,
        );
      }
      continue;
    }
    if (line === '}') {
      block = null;
      continue;
    }
    const model = block.model;
    if (model === null) continue;
    if (line.startsWith('@@')) {
      for (const attribute of parseAttributes(line, '@@', lineNo)) {
        if (!BLOCK_ATTRIBUTES.has(attribute.name)) {
          throw new PrismaSchemaError(
            `schema.prisma line ${lineNo}: @@${attribute.name} is not supported by test/db/prisma-schema.ts`,
          );
        }
        model.attributes.push(attribute);
      }
      continue;
    }
    const field = /^(\w+)\s+(\w+)(\[\])?(\?)?(.*)$/.exec(line);
    if (field === null)
      throw new PrismaSchemaError(`schema.prisma line ${lineNo}: cannot read field ${JSON.stringify(line)}`);
    const [, name = '', type = '', list, optional, rest = ''] = field;
    const attributes = parseAttributes(rest, '@', lineNo);
    for (const attribute of attributes) {
      if (!FIELD_ATTRIBUTES.has(attribute.name) && !attribute.name.startsWith('db.')) {
        throw new PrismaSchemaError(
          `schema.prisma line ${lineNo}: @${attribute.name} is not supported by test/db/prisma-schema.ts`,
        );
      }
    }
    model.fields.push({ name, type, optional: optional === '?', list: list === '[]', attributes, line: lineNo });
  }
  if (block !== null) throw new PrismaSchemaError('schema.prisma: a block is not closed');
  return models;
}

// ---------------------------------------------------------------------------------------------
// What the schema implies for PostgreSQL.

/** A PostgreSQL type as information_schema.columns describes it. */
export interface ColumnType {
  /** information_schema.columns.data_type */
  dataType: string;
  /** character_maximum_length, datetime_precision or numeric precision/scale, when they matter. */
  length?: number;
  precision?: number;
  scale?: number;
}

export type ColumnDefault =
  | { kind: 'none' }
  | { kind: 'autoincrement' }
  | { kind: 'now' }
  | { kind: 'literal'; value: string }
  | { kind: 'expression'; sql: string };

export interface ExpectedColumn {
  field: string;
  column: string;
  type: ColumnType;
  nullable: boolean;
  default: ColumnDefault;
}

export interface ExpectedIndex {
  name: string;
  columns: string[];
}

export interface ExpectedTable {
  model: string;
  table: string;
  columns: ExpectedColumn[];
  primaryKey: string[];
  indexes: ExpectedIndex[];
}

/** The first string literal of an attribute's arguments (`"x"` or `name: "x"` → x). */
function stringArg(args: string | null, key?: string): string | null {
  if (args === null) return null;
  const pattern =
    key === undefined ? /^\s*"((?:[^"\\]|\\.)*)"/ : new RegExp(`\\b${key}\\s*:\\s*"((?:[^"\\\\]|\\\\.)*)"`);
  const match = pattern.exec(args);
  return match === null ? null : (match[1] ?? null);
}

/** `[a, b]` at the start of an attribute's arguments (or after `fields:`); a field's `(ops: …)` dropped. */
function listArg(args: string | null): string[] {
  const match = /^\s*(?:fields\s*:\s*)?\[([^\]]*)\]/.exec(args ?? '');
  if (match === null) return [];
  return (match[1] ?? '')
    .split(',')
    .map((s) => s.replace(/\(\s*ops\s*:\s*\w+\s*\)$/, '').trim())
    .filter((s) => s !== '');
}

function attribute(list: readonly PrismaAttribute[], name: string): PrismaAttribute | undefined {
  return list.find((a) => a.name === name);
}

function numbers(args: string | null): number[] {
  return (args ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map(Number);
}

function columnType(model: string, field: PrismaField): ColumnType {
  const native = field.attributes.find((a) => a.name.startsWith('db.'));
  const nativeName = native?.name.slice(3);
  const args = numbers(native?.args ?? null);
  const where = `${model}.${field.name}`;
  const unsupported = (): never => {
    throw new PrismaSchemaError(
      `${where}: ${field.type}${native ? ` @${native.name}` : ''} is not mapped by test/db/prisma-schema.ts`,
    );
  };
  switch (field.type) {
    case 'String':
      if (nativeName === undefined || nativeName === 'Text') return { dataType: 'text' };
      if (nativeName === 'Char') return { dataType: 'character', length: args[0] ?? 1 };
      if (nativeName === 'VarChar')
        return args[0] === undefined
          ? { dataType: 'character varying' }
          : { dataType: 'character varying', length: args[0] };
      if (nativeName === 'Uuid') return { dataType: 'uuid' };
      return unsupported();
    case 'BigInt':
      return nativeName === undefined ? { dataType: 'bigint' } : unsupported();
    case 'Int':
      if (nativeName === undefined || nativeName === 'Integer') return { dataType: 'integer' };
      if (nativeName === 'SmallInt') return { dataType: 'smallint' };
      return unsupported();
    case 'Boolean':
      return nativeName === undefined ? { dataType: 'boolean' } : unsupported();
    case 'Float':
      return nativeName === undefined ? { dataType: 'double precision' } : unsupported();
    case 'Decimal':
      if (nativeName === undefined) return { dataType: 'numeric', precision: 65, scale: 30 };
      if (nativeName === 'Decimal') return { dataType: 'numeric', precision: args[0] ?? 65, scale: args[1] ?? 30 };
      return unsupported();
    case 'DateTime':
      if (nativeName === undefined) return { dataType: 'timestamp without time zone', precision: 3 };
      if (nativeName === 'Timestamptz') return { dataType: 'timestamp with time zone', precision: args[0] ?? 6 };
      if (nativeName === 'Timestamp') return { dataType: 'timestamp without time zone', precision: args[0] ?? 6 };
      if (nativeName === 'Date') return { dataType: 'date' };
      return unsupported();
    case 'Json':
      return nativeName === undefined ? { dataType: 'jsonb' } : unsupported();
    case 'Bytes':
      return nativeName === undefined ? { dataType: 'bytea' } : unsupported();
    default:
      return unsupported();
  }
}

function columnDefault(model: string, field: PrismaField): ColumnDefault {
  const def = attribute(field.attributes, 'default');
  if (def === undefined) return { kind: 'none' };
  const args = (def.args ?? '').trim();
  if (args === 'autoincrement()') return { kind: 'autoincrement' };
  if (args === 'now()') return { kind: 'now' };
  // Filled in by the Prisma client, not by the database.
  if (/^(uuid|cuid|nanoid|ulid)\(.*\)$/.test(args)) return { kind: 'none' };
  const generated = /^dbgenerated\(\s*"((?:[^"\\]|\\.)*)"\s*\)$/.exec(args);
  if (generated !== null) return { kind: 'expression', sql: generated[1] ?? '' };
  if (/^-?\d+(\.\d+)?$/.test(args) || args === 'true' || args === 'false') return { kind: 'literal', value: args };
  const str = /^"((?:[^"\\]|\\.)*)"$/.exec(args);
  if (str !== null) return { kind: 'literal', value: str[1] ?? '' };
  throw new PrismaSchemaError(
    `${model}.${field.name}: @default(${args}) is not understood by test/db/prisma-schema.ts`,
  );
}

/** Tables, columns, keys and indexes that the models describe, with Prisma's naming rules. */
export function expectedTables(models: readonly PrismaModel[]): ExpectedTable[] {
  const modelNames = new Set(models.map((m) => m.name));
  return models.map((model) => {
    const table = stringArg(attribute(model.attributes, 'map')?.args ?? null) ?? model.name;
    const columns: ExpectedColumn[] = [];
    const columnOf = new Map<string, string>();
    for (const field of model.fields) {
      if (modelNames.has(field.type)) continue; // A relation field: no column of its own.
      if (!SCALAR_TYPES.has(field.type))
        throw new PrismaSchemaError(`${model.name}.${field.name}: unknown type ${field.type}`);
      if (field.list)
        throw new PrismaSchemaError(
          `${model.name}.${field.name}: scalar lists are not supported by test/db/prisma-schema.ts`,
        );
      const column = stringArg(attribute(field.attributes, 'map')?.args ?? null) ?? field.name;
      columnOf.set(field.name, column);
      columns.push({
        field: field.name,
        column,
        type: columnType(model.name, field),
        nullable: field.optional,
        default: columnDefault(model.name, field),
      });
    }
    const toColumns = (fields: string[]): string[] =>
      fields.map((f) => {
        const column = columnOf.get(f);
        if (column === undefined) throw new PrismaSchemaError(`${model.name}: no scalar field ${f}`);
        return column;
      });
    const idFields = model.fields.filter((f) => attribute(f.attributes, 'id') !== undefined).map((f) => f.name);
    const blockId = attribute(model.attributes, 'id');
    const primaryKey = toColumns(blockId !== undefined ? listArg(blockId.args) : idFields);
    const indexes = model.attributes
      .filter((a) => a.name === 'index')
      .map((a) => {
        const cols = toColumns(listArg(a.args));
        return { name: stringArg(a.args, 'map') ?? `${table}_${cols.join('_')}_idx`, columns: cols };
      });
    return { model: model.name, table, columns, primaryKey, indexes };
  });
}
