// The acquisitions and releases asked for in one event-loop turn go to Redis as one call each
// (src/lock/lock-scripts.ts), on a private redis-server so its command counts are ours alone.
// Gathering must change nothing a caller sees: every wallet of the call is decided on its own,
// exactly as if it had been sent alone.
import { rmSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { LOCK_CALL_WALLETS_MAX } from '../../src/lock/lock-scripts.ts';
import { lockConnection } from '../../src/queue/redis-connection.ts';
import { connectPrivate, makeTempDir } from './lock-fixtures.ts';

const TTL_MS = 30_000;

let dir: string;
let server: LocalRedis;
let direct: Redis;
let client: Redis;

/** Script calls (EVALSHA, or EVAL after a NOSCRIPT) the server has run so far. */
async function scriptCalls(): Promise<number> {
  const stats = await direct.info('commandstats');
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
  return calls;
}

beforeAll(async () => {
  dir = makeTempDir('turn-batching');
  server = await LocalRedis.start({ dir });
  direct = connectPrivate(server);
  client = lockConnection(`redis://127.0.0.1:${server.port}`) as Redis;
  await client.ping();
});

afterAll(async () => {
  client?.disconnect();
  direct?.disconnect();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('lock calls gathered per event-loop turn', () => {
  it('takes the wallets of one turn in one call, each decided on its own', async () => {
    const lock = new FencedLock({ redis: client, lockTtlMs: TTL_MS, keyPrefix: 'turn:' });
    const other = new FencedLock({ redis: client, lockTtlMs: TTL_MS, keyPrefix: 'turn:' });
    const held = await other.acquire('w-held');
    expect(held.kind).toBe('acquired');
    await direct.set(lock.keysOf('w-corrupt').fenceKey, 'not-a-number');
    await direct.set(lock.keysOf('w-advanced').fenceKey, '41');

    const before = await scriptCalls();
    const wallets = ['w-1', 'w-held', 'w-2', 'w-corrupt', 'w-advanced', 'w-3'];
    const results = await Promise.allSettled(wallets.map((w) => lock.acquire(w)));
    // The corrupt wallet's failed acquire gives its lease back in a call of its own, flushed on
    // the next turn: let it go out, then a round trip on the same connection sees it run, so
    // the count does not depend on which of two connections Redis reads first.
    await new Promise((resolve) => setImmediate(resolve));
    await client.ping();
    expect(await scriptCalls()).toBe(before + 2);

    const [w1, wHeld, w2, wCorrupt, wAdvanced, w3] = results;
    for (const r of [w1, w2, w3]) expect(r).toMatchObject({ status: 'fulfilled', value: { kind: 'acquired' } });
    expect(w1).toMatchObject({ value: { lease: { token: 1n } } });
    // Held by another owner: busy with its TTL, and no token issued for it.
    expect(wHeld).toMatchObject({ status: 'fulfilled', value: { kind: 'busy' } });
    expect(await direct.get(lock.keysOf('w-held').fenceKey)).toBe('1');
    expect(await direct.get(lock.keysOf('w-held').lockKey)).toBe(held.kind === 'acquired' ? held.lease.owner : '');
    // A corrupt counter fails that wallet alone, and its lock is given back.
    expect(wCorrupt).toMatchObject({
      status: 'rejected',
      reason: { message: expect.stringMatching(/not an integer/) },
    });
    expect(await direct.exists(lock.keysOf('w-corrupt').lockKey)).toBe(0);
    expect(wAdvanced).toMatchObject({ status: 'fulfilled', value: { lease: { token: 42n } } });

    // Their releases in one turn: one call; a lease that is not ours any more is refused alone.
    const leases = [w1, w2, w3, wAdvanced].map((r) =>
      r?.status === 'fulfilled' && r.value.kind === 'acquired' ? r.value.lease : null,
    );
    await direct.set(lock.keysOf('w-3').lockKey, 'a-later-holder');
    const releasing = await scriptCalls();
    const released = await Promise.all(leases.map((l) => (l === null ? false : lock.release(l.walletId, l.owner))));
    expect(await scriptCalls()).toBe(releasing + 1);
    expect(released).toEqual([true, true, false, true]);
    expect(await direct.get(lock.keysOf('w-3').lockKey)).toBe('a-later-holder');
    expect(await direct.exists(lock.keysOf('w-1').lockKey, lock.keysOf('w-2').lockKey)).toBe(0);
  });

  it('gives a wallet back before taking it again when both are asked for in one turn', async () => {
    const lock = new FencedLock({ redis: client, lockTtlMs: TTL_MS, keyPrefix: 'again:' });
    const first = await lock.acquire('w');
    if (first.kind !== 'acquired') throw new Error('not acquired');
    const [released, second] = await Promise.all([lock.release('w', first.lease.owner), lock.acquire('w')]);
    expect(released).toBe(true);
    expect(second).toMatchObject({ kind: 'acquired', lease: { token: 2n } });
  });

  it(`splits a turn of more than ${LOCK_CALL_WALLETS_MAX} wallets into calls of at most that many`, async () => {
    const lock = new FencedLock({ redis: client, lockTtlMs: TTL_MS, keyPrefix: 'many:' });
    const count = LOCK_CALL_WALLETS_MAX * 2 + 1;
    const before = await scriptCalls();
    const results = await Promise.all(Array.from({ length: count }, (_, i) => lock.acquire(`w-${i}`)));
    expect(await scriptCalls()).toBe(before + 3);
    expect(results.every((r) => r.kind === 'acquired')).toBe(true);
  });
});
