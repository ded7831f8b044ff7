// A fleet switching lock services with work in flight (issue 44, item 4): Redis, then PostgreSQL,
// then Redis again, while a PostgreSQL holder of the middle epoch is still deciding. Each lock
// service counts in numbers of its own (a Redis counter per wallet, one sequence for every
// wallet), so without lock epochs the old holder's token can be far above the new holder's and
// its write passes after the newer one: the second case shows that hazard on the same steps.
// With epochs (the token is epoch × 2^53 + the service's number) the old holder is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { currentLockEpoch, openLockEpoch } from '../../src/lock/lock-epochs.ts';
import type { LockLease, LockService } from '../../src/lock/lock-service.ts';
import { PostgresLock } from '../../src/lock/postgres-lock.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';
import { connectShared, deleteKeysWithPrefix, uniqueKeyPrefix } from './lock-fixtures.ts';

const TTL_MS = 5_000;
/** Where the shared sequence stands when the fleet moves to PostgreSQL: every wallet draws from it. */
const SEQUENCE_AHEAD = 5_000;

const redis = connectShared();
let db: TestDatabase;
const closing: LockService[] = [];

beforeAll(async () => {
  db = await createTestDatabase('ft_lock_switch');
});

afterAll(async () => {
  await Promise.all(closing.map((lock) => lock.close()));
  redis.disconnect();
  await db?.drop();
});

async function leaseOn(lock: LockService, walletId: string): Promise<LockLease> {
  const result = await lock.acquire(walletId);
  if (result.kind !== 'acquired') throw new Error(`expected the lock on ${walletId}`);
  return result.lease;
}

async function decide(operationId: string, from: string, lease: LockLease): Promise<ApplyResult> {
  const [result] = await applyTransfers(db.prisma, [
    {
      request: { operationId, from, to: 'sink1', amountMinor: 10n, currency: null },
      fence: lease.token,
      leaseId: lease.leaseId,
    },
  ]);
  if (result === undefined) throw new Error('no result');
  return result;
}

/**
 * The steps, on wallet `wallet`: epoch 0 (Redis) writes; an epoch for PostgreSQL opens and its
 * holder acquires, then stalls; an epoch for Redis opens again and its holder writes; then the
 * stalled PostgreSQL holder decides. `epochs: false` builds every service with epoch 0, as a
 * fleet that switched without them. Returns what the stalled holder's decision answered.
 */
async function switchWithWorkInFlight(wallet: string, epochs: boolean): Promise<ApplyResult> {
  const keyPrefix = uniqueKeyPrefix('switch');
  const epochOf = async () => (epochs ? (await currentLockEpoch(db.pg)).epoch : 0);
  const redisLock = (epoch: number) => new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix, epoch });
  try {
    const before = redisLock(await epochOf());
    const first = await leaseOn(before, wallet);
    expect((await decide(`${wallet}-a`, wallet, first)).outcome).toBe('applied');
    await before.release(wallet, first.owner);

    await openLockEpoch(db.pg, 'postgres', 'the fleet moves to PostgreSQL');
    await db.pg.query('SELECT setval($1, $2)', ['lock_tokens', SEQUENCE_AHEAD]);
    const postgres = new PostgresLock({
      connectionString: db.url,
      lockTtlMs: TTL_MS,
      keyPrefix,
      epoch: await epochOf(),
    });
    closing.push(postgres);
    const stalled = await leaseOn(postgres, wallet);

    await openLockEpoch(db.pg, 'redis', 'and back to Redis');
    const back = await leaseOn(redisLock(await epochOf()), wallet);
    expect((await decide(`${wallet}-b`, wallet, back)).outcome).toBe('applied');

    return await decide(`${wallet}-c`, wallet, stalled);
  } finally {
    await deleteKeysWithPrefix(redis, keyPrefix);
  }
}

describe('switching lock services with work in flight', () => {
  it('with lock epochs, the holder of the older epoch is refused after the newer one wrote', async () => {
    await seedWallets(db.prisma, { wallets: 1, balanceMinor: 1_000n, prefix: 'on', currency: 'EUR' });
    await seedWallets(db.prisma, { wallets: 1, balanceMinor: 1n, prefix: 'sink', currency: 'EUR' });
    const late = await switchWithWorkInFlight('on1', true);
    expect(late.outcome).toBe('stale_fence');
    expect(await balance('on1')).toBe(980n);
  });

  it('without them (every service in epoch 0), the same steps let the older holder write after the newer one', async () => {
    await seedWallets(db.prisma, { wallets: 1, balanceMinor: 1_000n, prefix: 'off', currency: 'EUR' });
    const late = await switchWithWorkInFlight('off1', false);
    expect(late.outcome).toBe('applied');
    expect(await balance('off1')).toBe(970n);
  });
});

async function balance(id: string): Promise<bigint> {
  const { rows } = await db.pg.query<{ balance: string }>('SELECT balance FROM wallets WHERE id = $1', [id]);
  return BigInt(rows[0]?.balance ?? '-1');
}
