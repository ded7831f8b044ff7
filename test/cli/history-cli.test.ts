// `npm run balance`, `npm run statement` (a wallet's history) and `npm run operations` (the query
// API), run as the read role, the way a reader does: the balance now and before the first entry as
// one JSON line; the statement and the operations as NDJSON, page after page through --cursor,
// ending with a null cursor; a usage mistake is one line and the usage on stderr, exit 1.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIntakeRole, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let readRole: string;
let readUrl: string;
let beforeSeed: string;
/** Nothing listens there: neither command needs Redis. */
const NO_REDIS = 'redis://127.0.0.1:1';

const run = (file: 'balance' | 'statement' | 'operations', args: string[]) =>
  runSource(`src/cli/${file}.ts`, args, { DATABASE_URL: readUrl, REDIS_URL: NO_REDIS });
const lines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

beforeAll(async () => {
  db = await createTestDatabase('ft_histcli');
  beforeSeed = new Date(Date.now() - 1_000).toISOString();
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  for (const [n, amountMinor] of [
    [1n, 100n],
    [2n, 7n],
  ] as const) {
    await applyTransfers(db.prisma, [
      {
        request: { operationId: `t${n}`, from: 'w1', to: 'w2', amountMinor, currency: null },
        fence: n,
        leaseId: leaseIdFor(n),
      },
    ]);
  }
  readRole = uniqueName('ft_hcli_r');
  const password = randomBytes(16).toString('hex');
  await ensureIntakeRole(INTAKE_ROLES.read, db.url, readRole, password, db.config);
  readUrl = roleUrl(db.url, readRole, password);
});

afterAll(async () => {
  await db.drop();
  await dropWorkerRole(db.url, readRole);
});

describe('npm run balance, npm run statement and npm run operations, as the read role', () => {
  it('balance: now by default, and --at before the first entry', async () => {
    const [now, before] = await Promise.all([run('balance', ['w1']), run('balance', ['w1', '--at', beforeSeed])]);
    expect(now.code, describeRun(now)).toBe(0);
    expect(lastJsonLine(now)).toMatchObject({ wallet: 'w1', currency: 'EUR', balance: '893', held: '0' });
    expect(before.code, describeRun(before)).toBe(0);
    expect(lastJsonLine(before)).toEqual({
      wallet: 'w1',
      currency: 'EUR',
      balance: '0',
      held: '0',
      lastEntry: null,
      at: beforeSeed,
    });
  });

  it('statement: NDJSON pages through --cursor, each entry with its balance after, a null cursor at the end', async () => {
    const range = ['w1', '--from', beforeSeed, '--to', '2100-01-01', '--limit', '2'];
    const first = await run('statement', range);
    expect(first.code, describeRun(first)).toBe(0);
    const page1 = lines(first.stdout);
    expect(page1.slice(0, 2).map((e) => `${e.operationId}:${e.kind}:${e.amount}:${e.balanceAfter}`)).toEqual([
      '$opening:w1:opening:1000:1000',
      't1:debit:-100:900',
    ]);
    expect(page1[0]?.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const cursor = page1[2]?.nextCursor;
    expect(typeof cursor).toBe('string');
    const second = await run('statement', [...range, '--cursor', String(cursor)]);
    expect(second.code, describeRun(second)).toBe(0);
    expect(lines(second.stdout)).toEqual([
      expect.objectContaining({ operationId: 't2', amount: '-7', balanceAfter: '893', account: 'w1' }),
      { nextCursor: null },
    ]);
  });

  it('a usage mistake (no --from) is an error line and the usage, exit 1; a forged cursor one line, exit 1', async () => {
    const [usage, forged] = await Promise.all([
      run('statement', ['w1', '--to', '2100-01-01']),
      run('statement', ['w1', '--from', beforeSeed, '--to', '2100-01-01', '--cursor', 'forged']),
    ]);
    expect(usage.code, describeRun(usage)).toBe(1);
    expect(usage.stdout).toBe('');
    expect(usage.stderr).toMatch(/^error: missing --from\nusage: npm run statement -- <wallet> --from <ISO>/);
    expect(forged.code, describeRun(forged)).toBe(1);
    expect(forged.stderr.trim().split('\n')).toEqual(['error: cursor is not one statement() handed out: "forged"']);
  });

  it('operations: NDJSON pages through --cursor by wallet and side, a kind with none, a mistake exit 1', async () => {
    const byWallet = ['--wallet', 'w1', '--side', 'from', '--limit', '1'];
    const first = await run('operations', byWallet);
    expect(first.code, describeRun(first)).toBe(0);
    const page1 = lines(first.stdout);
    expect(page1[0]).toMatchObject({ operationId: 't1', kind: 'transfer', status: 'applied', from: 'w1', to: 'w2' });
    expect(page1[0]?.amount).toBe('100');
    const second = await run('operations', [...byWallet, '--cursor', String(page1[1]?.nextCursor)]);
    expect(second.code, describeRun(second)).toBe(0);
    const page2 = lines(second.stdout);
    expect(page2[0]).toMatchObject({ operationId: 't2', amount: '7' });
    const third = await run('operations', [...byWallet, '--cursor', String(page2[1]?.nextCursor)]);
    expect(lines(third.stdout)).toEqual([{ nextCursor: null }]);
    const [none, side, metadata] = await Promise.all([
      run('operations', ['--kind', 'hold', '--metadata', 'order=8812']),
      run('operations', ['--wallet', 'w1', '--side', 'left']),
      run('operations', ['--metadata', 'order']),
    ]);
    expect(none.code, describeRun(none)).toBe(0);
    expect(lines(none.stdout)).toEqual([{ nextCursor: null }]);
    expect(side.code, describeRun(side)).toBe(1);
    expect(side.stderr).toMatch(/^error: side must be one of from, to, any, got "left"\nusage: npm run operations --/);
    expect(metadata.code, describeRun(metadata)).toBe(1);
    expect(metadata.stderr).toMatch(/^error: --metadata must be KEY=VALUE, got "order"/);
  });
});
