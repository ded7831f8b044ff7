// The running-balances migration on a database that already has a ledger: every entry written
// before it gets its account's running balance (in id order), the column becomes NOT NULL, the
// wallet-time index replaces the wallet index, and the decisions after it go on from there.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { migrateBefore } from '../support/migrate-before.ts';
import { applyPayments, holdsExpire, said } from '../support/payments.ts';
import { entriesWithRunningSums } from '../support/running-sums.ts';
import { seedBeforeRunningBalances } from '../support/seed-before-running-balances.ts';
import { uniqueName } from '../support/test-db.ts';

const RUNNING_BALANCES = '20261219000000_running_balances';
const url = withDatabase(loadConfig().databaseUrl, uniqueName('ft_runup'));
const before = mkdtempSync(join(tmpdir(), 'ft-migrations-before-'));
const pool = new pg.Pool({ connectionString: url, max: 2 });
pool.on('error', () => undefined);

afterAll(async () => {
  await pool.end();
  await dropDatabase(url);
  rmSync(before, { recursive: true, force: true });
});

describe(`migration ${RUNNING_BALANCES}`, () => {
  it('gives every entry written before it its running balance, and the decisions after go on', async () => {
    const fromRunning = await migrateBefore(url, RUNNING_BALANCES, before);
    await seedBeforeRunningBalances(pool, 3, 1_000n);
    const decided = await applyPayments(pool, [
      { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 300n, expiresInMs: 1, fence: 1n },
      { kind: 'hold', operationId: 'h2', from: 'w1', to: 'w3', amount: 50n, expiresInMs: 600_000, fence: 1n },
      {
        kind: 'split',
        operationId: 's1',
        from: 'w2',
        legs: [
          { to: 'w1', amount: 7n },
          { to: 'w3', amount: 9n },
        ],
        fence: 1n,
      },
    ]);
    expect(decided.map(said)).toEqual(['applied', 'applied', 'applied']);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await holdsExpire(pool)).toBe(1);
    const columns = await pool.query("SELECT 1 FROM information_schema.columns WHERE column_name = 'balance_after'");
    expect(columns.rows).toEqual([]);

    const result = await migrate(url, MIGRATIONS_DIR);
    expect(result.applied).toEqual(fromRunning);
    const upgraded = await entriesWithRunningSums(pool);
    expect(upgraded).toHaveLength(6 + 4 + 3 + 2);
    expect(upgraded.filter((e) => e.balance_after !== e.running)).toEqual([]);
    const { rows: indexes } = await pool.query(
      "SELECT indexname FROM pg_indexes WHERE tablename = 'ledger_entries' ORDER BY indexname",
    );
    expect(indexes.map((r) => r.indexname)).toEqual([
      'ledger_entries_operation_id_idx',
      'ledger_entries_pkey',
      'ledger_entries_wallet_time_idx',
    ]);
    await expect(pool.query("UPDATE ledger_entries SET balance_after = 0 WHERE wallet_id = 'w1'")).rejects.toThrow(
      /append-only/,
    );

    // The hold placed before ends after, and every running balance still adds up.
    expect(
      (await applyPayments(pool, [{ kind: 'capture', operationId: 'c2', from: 'w1', ref: 'h2', fence: 2n }])).map(said),
    ).toEqual(['applied']);
    expect((await entriesWithRunningSums(pool)).filter((e) => e.balance_after !== e.running)).toEqual([]);
    const prisma = createPrisma({ ...loadConfig(), databaseUrl: url });
    try {
      expect((await reconcile(prisma)).invariants.filter((i) => !i.ok)).toEqual([]);
    } finally {
      await closePrisma(prisma);
    }
  });
});
