// prisma/schema.prisma and prisma/migrations must describe the same tables. The comparison
// (test/db/schema-drift.ts) runs against a freshly migrated database and must find nothing; run
// against a deliberately drifted database, or with a drifted schema, it must name each drift.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { expectedTables, PrismaSchemaError, parsePrismaSchema } from './prisma-schema.ts';
import { describeDifferences, type SchemaDifference, schemaDrift } from './schema-drift.ts';

const SCHEMA = readFileSync(join(PROJECT_ROOT, 'prisma', 'schema.prisma'), 'utf8');

let clean: TestDatabase;
let drifted: TestDatabase;

beforeAll(async () => {
  [clean, drifted] = await Promise.all([createTestDatabase('ft_drift'), createTestDatabase('ft_drifted')]);
  // Each statement is one way a migration could disagree with schema.prisma.
  await drifted.pg.query(`
    ALTER TABLE transfers ALTER COLUMN status DROP NOT NULL;
    ALTER TABLE transfers ALTER COLUMN amount TYPE integer;
    ALTER TABLE ledger_entries DROP COLUMN fence;
    ALTER TABLE ledger_entries ALTER COLUMN id DROP DEFAULT;
    ALTER TABLE wallets ALTER COLUMN balance DROP DEFAULT;
    ALTER TABLE wallets ALTER COLUMN currency TYPE char(4);
    ALTER TABLE wallets ALTER COLUMN created_at TYPE timestamp(6) without time zone;
    ALTER TABLE wallets ADD COLUMN nickname text;
    DROP INDEX ledger_entries_wallet_time_idx;
    CREATE INDEX wallets_currency_idx ON wallets (currency);
    CREATE TABLE stray (id int);
  `);
});

afterAll(async () => {
  await Promise.all([clean?.drop(), drifted?.drop()]);
});

function sorted(differences: SchemaDifference[]): SchemaDifference[] {
  const key = (d: SchemaDifference) => `${d.table}|${d.column ?? d.index ?? ''}|${d.kind}`;
  return [...differences].sort((a, b) => key(a).localeCompare(key(b)));
}

describe('the schema parser', () => {
  it('reads the models, tables and columns of prisma/schema.prisma', () => {
    const tables = expectedTables(parsePrismaSchema(SCHEMA));
    expect(tables.map((t) => [t.model, t.table])).toEqual([
      ['Wallet', 'wallets'],
      ['Transfer', 'transfers'],
      ['LedgerEntry', 'ledger_entries'],
      ['TransferRequest', 'transfer_requests'],
      ['OutcomeEvent', 'outcome_events'],
      ['OutcomeCursor', 'outcome_cursors'],
      ['LockEpoch', 'lock_epochs'],
      ['Hold', 'holds'],
      ['SplitLeg', 'split_legs'],
    ]);
    const wallets = tables[0];
    expect(wallets?.primaryKey).toEqual(['id']);
    expect(wallets?.columns.find((c) => c.field === 'lastFence')).toEqual({
      field: 'lastFence',
      column: 'last_fence',
      type: { dataType: 'bigint' },
      nullable: false,
      default: { kind: 'literal', value: '0' },
    });
    expect(wallets?.columns.find((c) => c.field === 'currency')?.type).toEqual({ dataType: 'character', length: 3 });
    expect(wallets?.columns.find((c) => c.field === 'createdAt')).toMatchObject({
      column: 'created_at',
      type: { dataType: 'timestamp with time zone', precision: 6 },
      default: { kind: 'now' },
    });
    const transfers = tables[1];
    expect(transfers?.columns.find((c) => c.field === 'reason')).toMatchObject({
      type: { dataType: 'text' },
      nullable: true,
      default: { kind: 'none' },
    });
    const entries = tables[2];
    expect(entries?.columns.find((c) => c.field === 'id')?.default).toEqual({ kind: 'autoincrement' });
    expect(entries?.indexes).toEqual([
      { name: 'ledger_entries_wallet_time_idx', columns: ['wallet_id', 'created_at', 'id'] },
      { name: 'ledger_entries_operation_id_idx', columns: ['operation_id'] },
    ]);
  });

  it('keeps `//` inside strings and drops comments', () => {
    const [model] = parsePrismaSchema(`
      // leading comment
      model Site { /// doc
        url String @id @default("https://example.com") // trailing
        @@map("sites")
      }`);
    expect(model?.fields[0]?.attributes).toEqual([
      { name: 'id', args: null },
      { name: 'default', args: '"https://example.com"' },
    ]);
    expect(
      expectedTables(parsePrismaSchema('model A {\n  x String @id @default("a//b")\n}'))[0]?.columns[0]?.default,
    ).toEqual({ kind: 'literal', value: 'a//b' });
  });

  it('refuses what it does not understand instead of skipping it', () => {
    expect(() => parsePrismaSchema('model A {\n  id Int @id @unique\n}')).toThrow(PrismaSchemaError);
    expect(() => parsePrismaSchema('enum Status {\n  applied\n}')).toThrow(/enum/);
    expect(() => expectedTables(parsePrismaSchema('model A {\n  id Int @id @db.Oid\n}'))).toThrow(/not mapped/);
    expect(() => parsePrismaSchema('model A {\n  id Int @id\n')).toThrow(/not closed/);
  });
});

describe('schema.prisma against the migrated database', () => {
  it('finds no difference', async () => {
    const differences = await schemaDrift(SCHEMA, clean.pg);
    expect(differences, describeDifferences(differences)).toEqual([]);
  });

  it("names every drift of a database changed behind the schema's back", async () => {
    const differences = await schemaDrift(SCHEMA, drifted.pg);
    expect(sorted(differences), describeDifferences(differences)).toEqual(
      sorted([
        { kind: 'nullability', table: 'transfers', column: 'status', expected: 'NOT NULL', actual: 'NULL' },
        { kind: 'type', table: 'transfers', column: 'amount', expected: 'bigint', actual: 'integer' },
        { kind: 'missing_column', table: 'ledger_entries', column: 'fence' },
        { kind: 'default', table: 'ledger_entries', column: 'id', expected: 'autoincrement()', actual: 'no default' },
        { kind: 'default', table: 'wallets', column: 'balance', expected: 'literal "0"', actual: 'no default' },
        { kind: 'type', table: 'wallets', column: 'currency', expected: 'character(3)', actual: 'character(4)' },
        {
          kind: 'type',
          table: 'wallets',
          column: 'created_at',
          expected: 'timestamp with time zone(6)',
          actual: 'timestamp without time zone(6)',
        },
        { kind: 'extra_column', table: 'wallets', column: 'nickname' },
        {
          kind: 'missing_index',
          table: 'ledger_entries',
          index: 'ledger_entries_wallet_time_idx',
          expected: 'wallet_id, created_at, id',
        },
        { kind: 'extra_index', table: 'wallets', index: 'wallets_currency_idx', actual: 'currency' },
        { kind: 'extra_table', table: 'stray' },
      ]),
    );
  });

  it('names every drift of a schema changed without a migration', async () => {
    const changed = SCHEMA.replace(/^(\s*)kind(\s+)String$/m, '$1kind$2String?')
      .replace('model Wallet {', 'model Wallet {\n  nickname String?')
      .replace('fence       BigInt\n', 'fence       Int\n')
      .replace('@@map("transfers")', '@@index([toWallet])\n  @@map("transfers")')
      .replace(/^model LedgerEntry/m, 'model Audit {\n  id Int @id @default(autoincrement())\n}\n\nmodel LedgerEntry');
    expect(changed).not.toBe(SCHEMA);
    const differences = await schemaDrift(changed, clean.pg);
    expect(sorted(differences), describeDifferences(differences)).toEqual(
      sorted([
        { kind: 'nullability', table: 'ledger_entries', column: 'kind', expected: 'NULL', actual: 'NOT NULL' },
        { kind: 'missing_column', table: 'wallets', column: 'nickname' },
        { kind: 'type', table: 'transfers', column: 'fence', expected: 'integer', actual: 'bigint' },
        { kind: 'missing_index', table: 'transfers', index: 'transfers_to_wallet_idx', expected: 'to_wallet' },
        { kind: 'missing_table', table: 'Audit' },
      ]),
    );
  });
});
