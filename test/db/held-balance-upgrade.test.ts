// The held_balance migration on a database that already has holds: each holding wallet row
// (`$held:<wallet>`, the payments migration's) becomes its wallet's `held`, the rows go, and
// the ledger reconciles as it did, with every hold still capturable and releasable.
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
import { applyPayments, balancesOf, said } from '../support/payments.ts';
import { seedBeforeRunningBalances } from '../support/seed-before-running-balances.ts';
import { uniqueName } from '../support/test-db.ts';

const HELD_BALANCE = '20261211000000_held_balance';
const url = withDatabase(loadConfig().databaseUrl, uniqueName('ft_heldup'));
const before = mkdtempSync(join(tmpdir(), 'ft-migrations-before-'));
const pool = new pg.Pool({ connectionString: url, max: 2 });
// An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
pool.on('error', () => undefined);

afterAll(async () => {
  await pool.end();
  await dropDatabase(url);
  rmSync(before, { recursive: true, force: true });
});

describe(`migration ${HELD_BALANCE}`, () => {
  it("moves every holding wallet's balance into its wallet's held and drops the rows", async () => {
    // The schema as it was before: every migration up to the payments'. The later ones go too:
    // they may redefine a function over the held column (the decision-edges migration does).
    const fromHeldBalance = await migrateBefore(url, HELD_BALANCE, before);
    await seedBeforeRunningBalances(pool, 3, 1_000n);
    const decided = await applyPayments(pool, [
      { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 300n, expiresInMs: 600_000, fence: 1n },
      { kind: 'hold', operationId: 'h2', from: 'w1', to: 'w3', amount: 50n, expiresInMs: 600_000, fence: 1n },
      { kind: 'hold', operationId: 'h3', from: 'w2', to: 'w3', amount: 10n, expiresInMs: 600_000, fence: 1n },
    ]);
    expect(decided.map(said)).toEqual(['applied', 'applied', 'applied']);
    expect(await applyPayments(pool, [{ kind: 'void', operationId: 'v3', from: 'w2', ref: 'h3', fence: 2n }])).toEqual([
      expect.objectContaining({ outcome: 'applied' }),
    ]);
    const rowsBefore = await pool.query("SELECT id, balance::int FROM wallets WHERE id LIKE '$%' ORDER BY id");
    expect(rowsBefore.rows).toEqual([
      { id: '$held:w1', balance: 350 },
      { id: '$held:w2', balance: 0 },
    ]);

    // The migration itself, and what it leaves.
    const result = await migrate(url, MIGRATIONS_DIR);
    expect(result.applied).toEqual(fromHeldBalance);
    expect((await pool.query("SELECT id FROM wallets WHERE id LIKE '$%'")).rows).toEqual([]);
    expect(await balancesOf(pool, ['w1', '$held:w1', 'w2', '$held:w2', 'w3'])).toEqual({
      w1: 650n,
      '$held:w1': 350n,
      w2: 1_000n,
      '$held:w2': 0n,
      w3: 1_000n,
    });
    const upgraded = createPrisma({ ...loadConfig(), databaseUrl: url });
    try {
      expect((await reconcile(upgraded)).invariants.filter((i) => !i.ok)).toEqual([]);
      // The holds placed before go on: one captured in part, one voided.
      const ended = await applyPayments(pool, [
        { kind: 'capture', operationId: 'c1', from: 'w1', ref: 'h1', amount: 200n, fence: 3n },
        { kind: 'void', operationId: 'v2', from: 'w1', ref: 'h2', fence: 3n },
      ]);
      expect(ended.map(said)).toEqual(['applied', 'applied']);
      expect(await balancesOf(pool, ['w1', '$held:w1', 'w2'])).toEqual({ w1: 800n, '$held:w1': 0n, w2: 1_200n });
      expect((await reconcile(upgraded)).invariants.filter((i) => !i.ok)).toEqual([]);
    } finally {
      await closePrisma(upgraded);
    }
  });
});
