// `npm run db:seed` through the path of every operation (src/queue/seed-by-operations.ts): each
// wallet opened and funded under its fenced lock by the decision, with its records and events;
// a wallet that exists left as it is, a second seed a no-op; the ledger reconciled; and a
// transfer from a seeded wallet under the next token of the same lock decided at once (the seed's
// token is the wallet's fence, so the worker's next one passes without a stale_fence round).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { decideOperations } from '../../src/ledger/apply-payments.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { SEED_CHUNK_WALLETS, seedByOperations } from '../../src/queue/seed-by-operations.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let redis: Redis;
let lock: FencedLock;

beforeAll(async () => {
  db = await createTestDatabase('ft_seedops');
  redis = new Redis(db.config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
});
afterAll(async () => {
  redis?.disconnect();
  await db?.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  // A key prefix of its own: the shared Redis is never flushed.
  lock = new FencedLock({ redis, lockTtlMs: 10_000, keyPrefix: `${uniqueName('seedops')}:` });
});

const seed = (wallets: number, balanceMinor: bigint, creditLimitMinor = 0n) =>
  seedByOperations(db.prisma, lock, { wallets, balanceMinor, creditLimitMinor, prefix: 's', currency: 'EUR' });

describe('seedByOperations', () => {
  it('opens and funds each wallet through the decision, with records and events, and reconciles', async () => {
    expect(await seed(3, 100n, 5n)).toEqual({ requested: 3, created: 3, deposits: 3, existing: 0 });
    const wallets = await db.pg.query(
      'SELECT id, status, balance::int, credit_limit::int, last_fence::int FROM wallets ORDER BY id',
    );
    expect(wallets.rows).toEqual(
      ['s1', 's2', 's3'].map((id) => ({ id, status: 'open', balance: 100, credit_limit: 5, last_fence: 1 })),
    );
    const records = await db.pg.query(
      `SELECT operation_id, kind, status, reference FROM transfers ORDER BY kind DESC, operation_id`,
    );
    expect(records.rows).toEqual([
      ...['s1', 's2', 's3'].map((w) => ({
        operation_id: `seed:open:${w}`,
        kind: 'open_wallet',
        status: 'applied',
        reference: null,
      })),
      ...['s1', 's2', 's3'].map((w) => ({
        operation_id: `seed:fund:${w}`,
        kind: 'deposit',
        status: 'applied',
        reference: 'db:seed',
      })),
    ]);
    const events = await db.pg.query('SELECT count(*)::int AS n FROM outcome_pending');
    expect(events.rows[0]?.n).toBe(6);
    const report = await reconcile(db.prisma);
    expect(report.ok, JSON.stringify(report)).toBe(true);
  });

  it('leaves a wallet that exists as it is, and a second seed changes nothing', async () => {
    await seedWallets(db.prisma, { wallets: 1, balanceMinor: 7n, prefix: 's', currency: 'EUR' });
    expect(await seed(2, 100n)).toEqual({ requested: 2, created: 1, deposits: 1, existing: 1 });
    expect(await seed(2, 100n)).toEqual({ requested: 2, created: 0, deposits: 0, existing: 2 });
    const { rows } = await db.pg.query('SELECT id, balance::int FROM wallets ORDER BY id');
    expect(rows).toEqual([
      { id: 's1', balance: 7 },
      { id: 's2', balance: 100 },
    ]);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('funds only the wallets it opened: one opened by someone else meanwhile is left as it is', async () => {
    // The lock's acquire is where the seed waits between its look at the table and its decision.
    const racing = new (class extends FencedLock {
      override async acquireWithRetry(walletId: string) {
        if (walletId === 's2')
          await seedWallets(db.prisma, { wallets: 2, balanceMinor: 9n, prefix: 's', currency: 'EUR' });
        return super.acquireWithRetry(walletId);
      }
    })({ redis, lockTtlMs: 10_000, keyPrefix: `${uniqueName('seedops')}:` });
    const result = await seedByOperations(db.prisma, racing, {
      wallets: 2,
      balanceMinor: 100n,
      prefix: 's',
      currency: 'EUR',
    });
    expect(result).toEqual({ requested: 2, created: 0, deposits: 0, existing: 2 });
    const { rows } = await db.pg.query('SELECT id, balance::int FROM wallets ORDER BY id');
    expect(rows).toEqual([
      { id: 's1', balance: 9 },
      { id: 's2', balance: 9 },
    ]);
    const answers = await db.pg.query('SELECT operation_id, reason FROM transfers ORDER BY operation_id');
    expect(answers.rows).toEqual([
      { operation_id: 'seed:open:s1', reason: 'wallet_exists' },
      { operation_id: 'seed:open:s2', reason: 'wallet_exists' },
    ]);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('opens without a deposit when the balance is 0, across more than one chunk', async () => {
    const wallets = SEED_CHUNK_WALLETS + 3;
    expect(await seed(wallets, 0n)).toEqual({ requested: wallets, created: wallets, deposits: 0, existing: 0 });
    const { rows } = await db.pg.query(`SELECT count(*)::int AS n FROM transfers WHERE kind = 'deposit'`);
    expect(rows[0]?.n).toBe(0);
  });

  it('a transfer from a seeded wallet under the lock`s next token is decided at once', async () => {
    await seed(2, 100n);
    const next = await lock.acquire('s1');
    if (next.kind !== 'acquired') throw new Error('expected the lock on s1');
    expect(next.lease.token).toBe(2n);
    const [result] = await decideOperations(
      db.prisma,
      [
        {
          request: { operationId: 't1', from: 's1', to: 's2', amountMinor: 30n, currency: null },
          fence: next.lease.token,
          leaseId: next.lease.leaseId,
        },
      ],
      { holdExpiryMaxMs: 1_000 },
    );
    expect(result?.outcome).toBe('applied');
    await lock.release('s1', next.lease.owner);
  });

  it('refuses a request out of bounds before any lock or query', async () => {
    await expect(seed(0, 100n)).rejects.toThrow(/--wallets must be a whole number/);
    await expect(
      seedByOperations(db.prisma, lock, { wallets: 1, balanceMinor: 1n, prefix: 'a b', currency: 'EUR' }),
    ).rejects.toThrow(/--prefix must be/);
  });
});
