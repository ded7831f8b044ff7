// No test switch in a production database (issue 41): a database migrated as `npm run db:migrate`
// migrates it has no function that can skip a check, neither a parameter named like one
// (p_check_*, p_skip_*), nor a body that reads such a parameter, nor a function named unsafe.
// The negative controls' variants exist only where the chaos harness installs them
// (harness/chaos/unsafe/); a worker with TRANSFERS_UNSAFE pointed at a migrated database gets a
// LedgerContractError that says so. The scan's own negative control installs those variants and
// must find every one. An upgraded database keeps its roles working: the decisions whose signature
// lost the switches were the owner's alone, and the worker's functions kept theirs.

import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { installUnsafeDecisionsAt, UNSAFE_FUNCTIONS } from '../../harness/chaos/unsafe/unsafe-decisions.ts';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { dropWorkerRole, ensureLoginRole, roleUrl, WORKER_ROLE_SPEC } from '../../src/db/worker-role-grants.ts';
import { LedgerContractError } from '../../src/errors.ts';
import { applyPayments as applyPaymentsOf, PAYMENT_DECISION_FUNCTION } from '../../src/ledger/apply-payments.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { INVALID_REQUEST_FUNCTION } from '../../src/ledger/undecidable-request.ts';
import { LOCK_FUNCTIONS } from '../../src/lock/lock-epochs.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments, said } from '../support/payments.ts';
import { uniqueName } from '../support/test-db.ts';

/** The migration that took the switches out (with the decision's edges). */
const NO_TEST_SWITCHES = '20261217000000_decision_edges';
const HOLD_EXPIRY_MAX_MS = 604_800_000;

const config = loadConfig();
const databases: string[] = [];
const roles: { url: string; role: string }[] = [];
const tempDirs: string[] = [];

function freshDatabaseUrl(): string {
  const url = withDatabase(config.databaseUrl, uniqueName('ft_noswitch'));
  databases.push(url);
  return url;
}

afterAll(async () => {
  for (const { url, role } of roles) await dropWorkerRole(url, role).catch(() => undefined);
  for (const url of databases) await dropDatabase(url).catch(() => undefined);
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Every function of the schema that can skip a check, with why: a parameter named p_check_* or
 * p_skip_*, a body that names such a parameter, or a name that says unsafe.
 */
async function switchableFunctions(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ fn: string; name: string; args: string[]; body: string }>(`
      SELECT p.oid::regprocedure::TEXT AS fn, p.proname AS name, coalesce(p.proargnames, '{}') AS args,
             p.prosrc AS body
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = current_schema()
       ORDER BY 1`);
    const switchName = /^p_(check|skip)_/i;
    return rows.flatMap((r) => [
      ...(/unsafe/i.test(r.name) ? [`${r.fn}: named unsafe`] : []),
      ...r.args.filter((a) => switchName.test(a)).map((a) => `${r.fn}: parameter ${a}`),
      ...[...new Set([...r.body.matchAll(/\bp_(?:check|skip)_\w+/gi)].map((m) => m[0]))].map(
        (a) => `${r.fn}: body reads ${a}`,
      ),
    ]);
  } finally {
    await client.end();
  }
}

const transfer = (operationId: string, fence: bigint) => ({
  request: { operationId, from: 'w1', to: 'w2', amountMinor: 10n, currency: null },
  fence,
  leaseId: leaseIdFor(fence),
});

describe('a database migrated as `npm run db:migrate` does', () => {
  const url = freshDatabaseUrl();

  it('has no function that can skip a check', async () => {
    await migrate(url, MIGRATIONS_DIR);
    expect(await switchableFunctions(url)).toEqual([]);
  });

  it("refuses a negative control's decision with an error that says where the variants live", async () => {
    const prisma = createPrisma({ ...config, databaseUrl: url });
    try {
      await seedWallets(prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
      for (const off of [{ skipFence: true }, { skipIdempotency: true }, { skipLeaseCheck: true }]) {
        const refused = await applyTransfers(prisma, [transfer('t-1', 1n)], off).catch((err: unknown) => err);
        expect(refused).toBeInstanceOf(LedgerContractError);
        expect(refused).toMatchObject({ violation: 'unsafe_decision_missing' });
        expect(String(refused)).toMatch(/apply_transfers_unsafe\(\) is not in this database.*harness\/chaos\/unsafe/);
      }
      const payment = {
        request: {
          kind: 'void' as const,
          operationId: 'v-1',
          from: 'w1',
          hold: 'h-none',
        },
        fence: 1n,
        leaseId: leaseIdFor(1n),
      };
      for (const off of [{ skipHoldState: true }, { skipRefundBound: true }]) {
        const refused = await applyPaymentsOf(prisma, [payment], {
          holdExpiryMaxMs: HOLD_EXPIRY_MAX_MS,
          ...off,
        }).catch((err: unknown) => err);
        expect(refused).toMatchObject({ violation: 'unsafe_decision_missing' });
        expect(String(refused)).toMatch(/apply_payments_unsafe\(\) is not in this database/);
      }
      // Nothing was decided, and the production path decides as ever.
      expect(await applyTransfers(prisma, [transfer('t-1', 1n)])).toEqual([
        { outcome: 'applied', operationId: 't-1', fence: '1' },
      ]);
    } finally {
      await closePrisma(prisma);
    }
  });

  it("negative control: the harness's variants, installed, are each found", async () => {
    await installUnsafeDecisionsAt(url);
    const found = await switchableFunctions(url);
    const named = new Set(found.map((line) => /^([a-z_]+)\(/.exec(line)?.[1]));
    expect([...named].sort()).toEqual([...UNSAFE_FUNCTIONS].sort());
    expect(found).toContain(
      'apply_transfer_unsafe(text,text,text,text,bigint,text,bigint,uuid,boolean,boolean,boolean): parameter p_check_fence',
    );
    expect(found.some((line) => /^decision_hold_ended_unsafe\(.*: body reads p_check_hold_state$/.test(line))).toBe(
      true,
    );
  });
});

describe(`an upgraded database (${NO_TEST_SWITCHES})`, () => {
  it('loses the switches and keeps the worker role deciding', async () => {
    const url = freshDatabaseUrl();
    const before = mkdtempSync(join(tmpdir(), 'ft-migrations-before-'));
    tempDirs.push(before);
    cpSync(MIGRATIONS_DIR, before, { recursive: true });
    const fromThisOne = readdirSync(before)
      .filter((name) => /^\d{14}_/.test(name) && name >= NO_TEST_SWITCHES)
      .sort();
    for (const name of fromThisOne) rmSync(join(before, name), { recursive: true });
    await migrate(url, before);
    // Before: the decisions could skip their checks.
    expect((await switchableFunctions(url)).length).toBeGreaterThan(0);
    const role = uniqueName('ft_w');
    const password = 'noswitch-worker-password';
    // The worker role as the release before made it: without the function this migration adds
    // (nor the lock functions of a later one, which re-grants them the same way),
    // which its re-grant then gives every role that decides, and with apply_payments() as it was
    // then (the operation-metadata migration gives its new form to whoever held the old one).
    const olderSpec = {
      ...WORKER_ROLE_SPEC,
      functions: WORKER_ROLE_SPEC.functions
        .filter((f) => f !== INVALID_REQUEST_FUNCTION && !LOCK_FUNCTIONS.includes(f))
        .map((f) => (f === PAYMENT_DECISION_FUNCTION ? PAYMENT_DECISION_FUNCTION.replace(',jsonb[])', ')') : f)),
    };
    await ensureLoginRole(olderSpec, url, role, password, config);
    roles.push({ url, role });

    const result = await migrate(url, MIGRATIONS_DIR);
    expect(result.applied).toEqual(fromThisOne);
    expect(await switchableFunctions(url)).toEqual([]);
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    const granted = await probe
      .query<{ ok: boolean }>('SELECT has_function_privilege($1, $2, $3) AS ok', [
        role,
        INVALID_REQUEST_FUNCTION,
        'EXECUTE',
      ])
      .finally(() => probe.end());
    expect(granted.rows[0]?.ok).toBe(true);
    // And the lock services' migration re-granted its functions to the same role.
    const lockGrants = new pg.Client({ connectionString: url });
    await lockGrants.connect();
    const lockRows = await lockGrants
      .query<{ ok: boolean }>('SELECT has_function_privilege($1, f, $2) AS ok FROM unnest($3::text[]) f', [
        role,
        'EXECUTE',
        LOCK_FUNCTIONS,
      ])
      .finally(() => lockGrants.end());
    expect(lockRows.rows.map((r) => r.ok)).toEqual(LOCK_FUNCTIONS.map(() => true));

    const owner = createPrisma({ ...config, databaseUrl: url });
    const asWorker = createPrisma({ ...config, databaseUrl: roleUrl(url, role, password) });
    const pool = new pg.Pool({ connectionString: roleUrl(url, role, password), max: 1 });
    // An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
    pool.on('error', () => undefined);
    try {
      await seedWallets(owner, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
      expect(await applyTransfers(asWorker, [transfer('up-1', 1n)])).toEqual([
        { outcome: 'applied', operationId: 'up-1', fence: '1' },
      ]);
      const held = await applyPayments(pool, [
        { kind: 'hold', operationId: 'up-h', from: 'w1', to: 'w2', amount: 5n, expiresInMs: 600_000, fence: 2n },
      ]);
      expect(held.map(said)).toEqual(['applied']);
    } finally {
      await pool.end();
      await closePrisma(asWorker);
      await closePrisma(owner);
    }
  });
});
