// Recovery after Redis lost its data, on a private redis-server: the fence counter restarts
// low, advanceFence raises it above what the database has seen, and never lowers it.
import { readFileSync, rmSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { connectPrivate, makeTempDir } from './lock-fixtures.ts';

const TTL_MS = 5_000;
const TOKENS_BEFORE_LOSS = 5;

let dir: string;
let server: LocalRedis;
let redis: Redis;
let lock: FencedLock;

async function acquireAndRelease(walletId: string): Promise<bigint> {
  const result = await lock.acquire(walletId);
  if (result.kind !== 'acquired') throw new Error(`expected the lock on ${walletId}`);
  expect(await lock.release(walletId, result.lease.owner)).toBe(true);
  return result.lease.token;
}

beforeAll(async () => {
  dir = makeTempDir('fence');
  server = await LocalRedis.start({ dir });
  redis = connectPrivate(server);
  lock = new FencedLock({ redis, lockTtlMs: TTL_MS, keyPrefix: 'ft:' });
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('advanceFence', () => {
  it('after FLUSHALL the counter restarts low; advancing makes the next token greater, a lower value changes nothing', async () => {
    let highestSeen = 0n; // what "the database" would have seen
    for (let index = 0; index < TOKENS_BEFORE_LOSS; index += 1) highestSeen = await acquireAndRelease('flushed');
    expect(highestSeen).toBe(BigInt(TOKENS_BEFORE_LOSS));

    await redis.flushall();
    const afterLoss = await acquireAndRelease('flushed');
    expect(afterLoss).toBe(1n);
    expect(afterLoss).toBeLessThan(highestSeen);

    const databaseHighest = highestSeen + 1_000n;
    expect(await lock.advanceFence('flushed', databaseHighest)).toEqual({ kind: 'raised', fence: databaseHighest });
    const recovered = await acquireAndRelease('flushed');
    expect(recovered).toBeGreaterThan(databaseHighest);
    expect(recovered).toBe(databaseHighest + 1n);

    expect(await lock.advanceFence('flushed', 3n)).toEqual({ kind: 'unchanged', fence: recovered });
    expect(await lock.advanceFence('flushed', recovered)).toEqual({ kind: 'unchanged', fence: recovered });
    expect(await redis.get(lock.keysOf('flushed').fenceKey)).toBe(recovered.toString());
    expect(await acquireAndRelease('flushed')).toBe(recovered + 1n);
  });

  it('recovers the same way after a restart without persistence', async () => {
    for (let index = 0; index < TOKENS_BEFORE_LOSS; index += 1) await acquireAndRelease('restarted');
    await server.restart();
    // The client reconnects on its own; the counter starts over.
    expect(await acquireAndRelease('restarted')).toBe(1n);
    await lock.advanceFence('restarted', 40n);
    expect(await acquireAndRelease('restarted')).toBe(41n);
  });

  it('works on a wallet that never had a counter, and leaves the lock key alone', async () => {
    const held = await lock.acquire('untouched-lock');
    if (held.kind !== 'acquired') throw new Error('expected the lock');
    expect(await lock.advanceFence('untouched-lock', 0n)).toEqual({ kind: 'unchanged', fence: 1n });
    expect(await lock.advanceFence('fresh', 0n)).toEqual({ kind: 'unchanged', fence: 0n });
    expect(await lock.advanceFence('fresh', 7n)).toEqual({ kind: 'raised', fence: 7n });
    expect(await redis.get(lock.keysOf('untouched-lock').lockKey)).toBe(held.lease.owner);
  });

  it('the script itself refuses targets it cannot compare exactly, whoever calls it', async () => {
    const lua = readFileSync(new URL('../../lua/advance-fence.lua', import.meta.url), 'utf8');
    const fenceKey = lock.keysOf('guarded').fenceKey;
    await expect(redis.eval(lua, 1, fenceKey, '9007199254740992')).rejects.toThrow(/below 2\^53/);
    await expect(redis.eval(lua, 1, fenceKey, '-1')).rejects.toThrow(/decimal integer/);
    await expect(redis.eval(lua, 1, fenceKey, '007')).rejects.toThrow(/decimal integer/);
    await expect(redis.eval(lua, 1, fenceKey, '1e5')).rejects.toThrow(/decimal integer/);
    expect(await redis.eval(lua, 1, fenceKey, '9007199254740991')).toEqual(['raised', '9007199254740991']);
    expect(await redis.eval(lua, 1, fenceKey, '9007199254740990')).toEqual(['unchanged', '9007199254740991']);
  });
});
