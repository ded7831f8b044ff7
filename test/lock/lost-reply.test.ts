// An acquire whose reply never reaches the worker, through a fault proxy in front of a private
// redis-server, on the lock connection the worker uses (src/queue/redis-connection.ts). ioredis
// sends an unanswered command again after a reconnect, and keeps a timed-out one queued; either
// way the acquire may run with nobody waiting for its owner id. The wallet must end held by us
// with a valid token, or free: never locked by nobody until the TTL runs out.
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../harness/chaos/fault-proxy.ts';
import { LocalRedis } from '../../harness/services/local-redis.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { LOCK_COMMAND_TIMEOUT_MS, lockConnection } from '../../src/queue/redis-connection.ts';
import { captureLog, makeTempDir } from './lock-fixtures.ts';

/** Far longer than each test: a lock left behind would still be there when it checks. */
const TTL_MS = 60_000;
/** How long the give-back release may take to land once the held bytes flow again. */
const SETTLE_MS = 2_000;

let dir: string;
let server: LocalRedis;
let proxy: FaultProxy;
/** Straight to the server, never through the proxy: what Redis really holds. */
let direct: Redis;
let viaProxy: Redis | null = null;

async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = SETTLE_MS): Promise<void> {
  const deadlineMs = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadlineMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(10);
  }
}

/** The worker's lock connection, through the proxy. */
async function lockThroughProxy(): Promise<{ lock: FencedLock; entries: Record<string, unknown>[] }> {
  viaProxy = lockConnection(`redis://127.0.0.1:${proxy.port}`) as Redis;
  viaProxy.on('error', () => undefined);
  await viaProxy.ping();
  const { logger, entries } = captureLog();
  return { lock: new FencedLock({ redis: viaProxy, lockTtlMs: TTL_MS, logger }), entries };
}

beforeAll(async () => {
  dir = makeTempDir('lost-reply');
  server = await LocalRedis.start({ dir });
  direct = server.client();
  proxy = await FaultProxy.start('lock', '127.0.0.1', server.port);
});

afterEach(() => {
  proxy.heal();
  viaProxy?.disconnect();
  viaProxy = null;
});

afterAll(async () => {
  direct?.disconnect();
  await proxy?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('an acquire whose reply is lost', () => {
  it('ran, the connection was cut before its reply, ioredis sent it again: we hold the lock', async () => {
    const { lock } = await lockThroughProxy();
    const keys = lock.keysOf('resent');
    proxy.stallReplies();
    const pending = lock.acquire('resent');
    await waitFor('the first acquire runs', async () => (await direct.exists(keys.lockKey)) === 1);
    const firstOwner = await direct.get(keys.lockKey);
    expect(await direct.get(keys.fenceKey)).toBe('1');

    // The reply of the run is lost with the connection; ioredis reconnects and resends.
    const resetsBefore = proxy.stats.resets;
    proxy.cut();
    proxy.unstallReplies();
    proxy.uncut();
    const result = await pending;
    expect(proxy.stats.resets).toBeGreaterThan(resetsBefore);

    if (result.kind !== 'acquired') throw new Error(`expected the lock, got ${JSON.stringify(result)}`);
    expect(result.lease.owner).toBe(firstOwner);
    expect(await direct.get(keys.lockKey)).toBe(result.lease.owner);
    // A fresh token, above the one the lost reply carried: that one reached nobody.
    expect(result.lease.token).toBe(2n);
    expect(await direct.get(keys.fenceKey)).toBe('2');
    expect(await lock.renew('resent', result.lease.owner)).toBe(true);
    expect(await lock.release('resent', result.lease.owner)).toBe(true);

    const other = new FencedLock({ redis: direct, lockTtlMs: TTL_MS });
    const next = await other.acquire('resent');
    expect(next).toMatchObject({ kind: 'acquired', lease: { token: 3n } });
  }, 20_000);

  it('timed out while held on the way, then ran: the lock is given back at once', async () => {
    const { lock, entries } = await lockThroughProxy();
    const keys = lock.keysOf('gave-up');
    proxy.stall();
    const startedMs = performance.now();
    await expect(lock.acquire('gave-up')).rejects.toThrow(/timed out/i);
    expect(performance.now() - startedMs).toBeGreaterThanOrEqual(LOCK_COMMAND_TIMEOUT_MS - 50);
    expect(await direct.exists(keys.lockKey)).toBe(0);

    // The held acquire reaches Redis now and takes the lock for an owner nobody waits for.
    proxy.unstall();
    await waitFor('the late acquire runs', async () => (await direct.get(keys.fenceKey)) === '1');
    await waitFor('the lock is free again', async () => (await direct.exists(keys.lockKey)) === 0);
    await waitFor('the give-back is logged', async () =>
      entries.some((entry) => entry.event === 'lock_acquire_given_back' && entry.walletId === 'gave-up'),
    );

    const other = new FencedLock({ redis: direct, lockTtlMs: TTL_MS });
    expect(await other.acquire('gave-up')).toMatchObject({ kind: 'acquired', lease: { token: 2n } });
  }, 20_000);
});
