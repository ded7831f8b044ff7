// Every query of the query API is index range scans, whatever the table's size: on 1,000,000
// operation records (every kind the query paths tell apart, one in twenty rejected, one in ten
// with metadata, splits with legs) over 10,000 wallets, every statement operations_matching() runs
// (shown by auto_explain, nested statements included, as notices) reads transfers and split_legs
// through the indexes of the operations-query migration, never by a sequential scan, and reads
// fewer than 2,000 buffers for a page of 50 (a few hundred but for a range alone). Drop one of those indexes and the planner falls back to a
// sequential scan, which fails this test. Each query is held to it twice: with the plan PostgreSQL
// makes for the arguments, and with the generic plan a long-lived session's plpgsql switches to.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buffersOf, nodesOf, type PlanNode, plansOf } from '../support/plans.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const OPERATIONS = 1_000_000;
const PAGE = 50;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_opplan');
  // One second apart from 2026-11-01: payers a0-a9999, payees b0-b9972, split legs to c0-c96.
  await db.pg.query(`
    INSERT INTO transfers (operation_id, request_hash, kind, status, reason, from_wallet, to_wallet, amount, currency,
                           reference, fence, created_at, metadata)
    SELECT 'op' || g, repeat('0', 64), k.kind, s.status, CASE WHEN s.status = 'rejected' THEN 'insufficient_funds' END,
           'a' || (g % 10000),
           CASE k.kind WHEN 'transfer' THEN 'b' || (g % 9973) WHEN 'deposit' THEN 'a' || (g % 10000) END,
           CASE WHEN k.kind <> 'open_wallet' THEN 1 + g % 50 END, 'EUR',
           CASE WHEN k.kind IN ('deposit', 'withdrawal') THEN 'ref' || g END, 0,
           timestamptz '2026-11-01 00:00:00Z' + make_interval(secs => g),
           CASE WHEN g % 10 = 7 THEN jsonb_build_object('order', 'o' || g / 10, 'channel', CASE WHEN g % 20 = 7 THEN 'web' ELSE 'app' END) END
      FROM generate_series(1, ${OPERATIONS}) g,
           LATERAL (SELECT CASE WHEN g % 1000 = 0 THEN 'split' WHEN g % 100 = 1 THEN 'deposit'
                                WHEN g % 100 = 2 THEN 'withdrawal' WHEN g % 500 = 3 THEN 'open_wallet'
                                ELSE 'transfer' END AS kind) k,
           LATERAL (SELECT CASE WHEN g % 20 = 5 THEN 'rejected' ELSE 'applied' END AS status) s`);
  await db.pg.query(`
    INSERT INTO split_legs (operation_id, leg, to_wallet, amount, created_at)
    SELECT t.operation_id, l, CASE l WHEN 1 THEN 'b' || (n % 9973) ELSE 'c' || (n % 97) END, 1, t.created_at
      FROM transfers t, LATERAL (SELECT substr(t.operation_id, 3)::int AS n) x, generate_series(1, 2) l
     WHERE t.kind = 'split' AND t.status = 'applied'`);
  await db.pg.query('VACUUM ANALYZE transfers');
  await db.pg.query('VACUUM ANALYZE split_legs');
}, 300_000);
afterAll(async () => db.drop());

const QUERY_SQL = 'SELECT * FROM operations_matching($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)';

interface Case {
  readonly name: string;
  /** wallet, side, kind, status, from, to, metadata (the function's first seven arguments). */
  readonly args: readonly (string | null)[];
  /** The indexes its statements read transfers and split_legs through. */
  readonly indexes: readonly string[];
  /** Operations it finds on the page: PAGE, or fewer where fewer match. */
  readonly found: number;
}

const NOV_2 = '2026-11-02T00:00:00Z';
const NOV_5 = '2026-11-05T00:00:00Z';
const CASES: Case[] = [
  {
    name: 'a wallet on its from side',
    args: ['a42', 'from', null, null, null, null, null],
    indexes: ['transfers_from_time_idx'],
    found: PAGE,
  },
  {
    name: 'a wallet on its to side (records and split legs)',
    args: ['b42', 'to', null, null, null, null, null],
    indexes: ['transfers_to_time_idx', 'split_legs_to_time_idx'],
    found: PAGE,
  },
  {
    name: 'a wallet on any side, in a range',
    args: ['a42', 'any', null, null, NOV_2, NOV_5, null],
    indexes: ['transfers_from_time_idx', 'transfers_to_time_idx', 'split_legs_to_time_idx'],
    found: 26,
  },
  {
    name: 'a wallet credited by split legs alone',
    args: ['c5', 'to', 'split', null, null, null, null],
    indexes: ['transfers_to_time_idx', 'split_legs_to_time_idx'],
    found: 10,
  },
  {
    name: 'a kind',
    args: [null, null, 'deposit', null, null, null, null],
    indexes: ['transfers_kind_status_time_idx'],
    found: PAGE,
  },
  {
    name: 'a status in a range',
    args: [null, null, null, 'rejected', NOV_2, NOV_5, null],
    indexes: ['transfers_kind_status_time_idx'],
    found: PAGE,
  },
  {
    name: 'a kind and a status',
    args: [null, null, 'transfer', 'applied', null, null, null],
    indexes: ['transfers_kind_status_time_idx'],
    found: PAGE,
  },
  {
    name: 'a range alone',
    args: [null, null, null, null, NOV_2, NOV_5, null],
    indexes: ['transfers_kind_status_time_idx'],
    found: PAGE,
  },
  {
    name: 'everything',
    args: [null, null, null, null, null, null, null],
    indexes: ['transfers_kind_status_time_idx'],
    found: PAGE,
  },
  {
    name: 'a metadata pair',
    args: [null, null, null, null, null, null, '{"order":"o4242"}'],
    indexes: ['transfers_metadata_idx'],
    found: 1,
  },
  {
    name: 'a metadata pair and a wallet',
    args: ['a4247', 'from', null, null, null, null, '{"order":"o54424"}'],
    indexes: ['transfers_metadata_idx'],
    found: 1,
  },
];

/** The indexes a plan read (an index scan's or a bitmap index scan's that ran), and its sequential scans (run or not). */
function reads(nodes: readonly PlanNode[]): { indexes: string[]; seqScans: number } {
  const ran = nodes.filter((n) => Number(n['Actual Loops'] ?? 0) > 0);
  return {
    indexes: ran.flatMap((n) => (typeof n['Index Name'] === 'string' ? [n['Index Name']] : [])),
    seqScans: nodes.filter((n) => String(n['Node Type']).includes('Seq Scan')).length,
  };
}

describe(`the query API on ${OPERATIONS.toLocaleString('en')} operations`, () => {
  it('holds the table it is measured on', async () => {
    const { rows } = await db.pg.query<{ n: number; legs: number }>(
      'SELECT (SELECT count(*) FROM transfers)::int AS n, (SELECT count(*) FROM split_legs)::int AS legs',
    );
    expect(rows[0]).toEqual({ n: OPERATIONS, legs: 2_000 });
  });

  it.each(CASES)('$name: index range scans, no sequential scan, a few buffers', async (c) => {
    await expectIndexed(c);
  });

  // A long-lived session's plpgsql switches to a generic plan after a few calls: the arguments
  // are then parameters the planner cannot see. The same indexes must serve.
  it.each(CASES)('$name: the same with a generic plan', async (c) => {
    await expectIndexed(c, 'SET plan_cache_mode = force_generic_plan');
  });
});

/** Holds one case's plans to its indexes, and its page to what it finds. */
async function expectIndexed(c: Case, setup?: string): Promise<void> {
  const values = [...c.args, null, null, PAGE];
  const notices = await plansOf(db.pg, QUERY_SQL, values, 'transfers', setup);
  expect(notices.length).toBeGreaterThan(0);
  const used = new Set<string>();
  for (const notice of notices) {
    const nodes = nodesOf(notice);
    const { indexes, seqScans } = reads(nodes);
    expect(seqScans, notice).toBe(0);
    for (const index of indexes) used.add(index);

    expect(buffersOf(nodes)).toBeLessThan(2_000);
  }
  for (const index of c.indexes) expect([...used]).toContain(index);
  // Besides: the page's records, and a split's legs, read by their keys.
  for (const index of used) expect(['transfers_pkey', 'split_legs_pkey', ...c.indexes]).toContain(index);
  const { rows } = await db.pg.query(QUERY_SQL, values);
  expect(rows).toHaveLength(c.found);
}
