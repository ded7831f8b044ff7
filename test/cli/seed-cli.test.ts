// `npm run db:seed`, as a user runs it: the wallets opened and funded through the fenced lock and
// the decision (an open_wallet and a deposit each, with their records), the ledger reconciled, a
// second run a no-op; bad flags refused with exit code 1 before anything is written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { openLockEpoch } from '../../src/lock/lock-epochs.ts';
import { describeRun, lastJsonLine, runCommand, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let env: Record<string, string>;

beforeAll(async () => {
  db = await createTestDatabase('ft_seedcli');
  // Lock keys of its own on the shared Redis: their fence counters only ever grow.
  env = { DATABASE_URL: db.url, LOCK_KEY_PREFIX: `${uniqueName('seedcli')}:` };
});

afterAll(async () => {
  await db?.drop();
});

const seedCli = (args: string[]) => runCommand('npm', ['run', 'db:seed', '--', ...args], env);

async function counts(): Promise<{ records: number; entries: number }> {
  const { rows } = await db.pg.query<{ records: number; entries: number }>(
    'SELECT (SELECT count(*) FROM transfers)::int AS records, (SELECT count(*) FROM ledger_entries)::int AS entries',
  );
  return rows[0] ?? { records: -1, entries: -1 };
}

describe('npm run db:seed', () => {
  it('opens and funds 20 wallets through the decision, and a second run leaves everything as it was', async () => {
    const first = await seedCli(['--wallets', '20', '--balance', '1000', '--credit-limit', '50']);
    expect(first.code, describeRun(first)).toBe(0);
    expect(lastJsonLine(first)).toEqual({ requested: 20, created: 20, deposits: 20, existing: 0 });
    const { rows: wallets } = await db.pg.query(
      `SELECT count(*)::int AS n FROM wallets
        WHERE id ~ '^wallet-[0-9]+$' AND balance = 1000 AND credit_limit = 50 AND status = 'open' AND last_fence >= 1`,
    );
    expect(wallets[0]?.n).toBe(20);
    const { rows: entries } = await db.pg.query(
      "SELECT operation_id, kind, amount::int FROM ledger_entries WHERE wallet_id = 'wallet-7'",
    );
    expect(entries).toEqual([{ operation_id: 'seed:fund:wallet-7', kind: 'credit', amount: 1000 }]);
    const after = await counts();
    expect(after.records).toBe(40);
    const report = await reconcile(db.prisma);
    expect(report.ok, JSON.stringify(report)).toBe(true);

    const second = await seedCli(['--wallets', '20', '--balance', '1000']);
    expect(second.code, describeRun(second)).toBe(0);
    expect(lastJsonLine(second)).toEqual({ requested: 20, created: 0, deposits: 0, existing: 20 });
    expect(await counts()).toEqual(after);
  });

  it("takes the locks of LOCK_BACKEND in the epoch in force, and refuses a backend that is not the epoch's", async () => {
    const refused = await runCommand(
      'npm',
      ['run', 'db:seed', '--', '--wallets', '2', '--balance', '10', '--prefix', 'pg-'],
      {
        ...env,
        LOCK_BACKEND: 'postgres',
      },
    );
    expect(refused.code, describeRun(refused)).toBe(1);
    expect(refused.stderr).toMatch(/lock epoch 0 belongs to LOCK_BACKEND=redis, this process runs postgres/);
    const { epoch } = await openLockEpoch(db.pg, 'postgres', 'seed test');
    const seeded = await runCommand(
      'npm',
      ['run', 'db:seed', '--', '--wallets', '2', '--balance', '10', '--prefix', 'pg-'],
      {
        ...env,
        LOCK_BACKEND: 'postgres',
      },
    );
    expect(seeded.code, describeRun(seeded)).toBe(0);
    const { rows } = await db.pg.query<{ epoch: string }>(
      "SELECT DISTINCT (last_fence >> 53)::text AS epoch FROM wallets WHERE id LIKE 'pg-%'",
    );
    expect(rows).toEqual([{ epoch: String(epoch) }]);
  });

  it('refuses bad flags with exit code 1 and writes nothing', async () => {
    const before = await counts();
    const [run, unknown] = await Promise.all([
      runSource('src/cli/seed.ts', ['--wallets', 'many', '--balance', '1000'], env),
      runSource('src/cli/seed.ts', ['--wallets', '2', '--balance', '1', '--walets', '3'], env),
    ]);
    expect(run.code, describeRun(run)).toBe(1);
    expect(run.stderr).toContain('--wallets must be a whole number');
    expect(unknown.code, describeRun(unknown)).toBe(1);
    expect(unknown.stderr).toMatch(/Unknown option '--walets'/);
    expect(await counts()).toEqual(before);
  });
});
