// The worker's BullMQ and lock connections write the commands of one event-loop turn in one
// socket write (src/queue/coalesced-writes.ts), against the real Redis and a private Redis
// Cluster: the writes are counted at the socket (its _write and _writev, which Node calls once
// per chunk or per batch of chunks handed to the kernel), the replies come back in order, and a
// reconnected client's new socket is coalesced too. Each count is also taken without
// coalescing, so the test fails if coalescing is switched off.
import { randomBytes } from 'node:crypto';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalRedisCluster } from '../../harness/services/local-redis-cluster.ts';
import { loadConfig } from '../../src/config/config.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { coalesceWrites } from '../../src/queue/coalesced-writes.ts';
import { lockConnection } from '../../src/queue/redis-connection.ts';
import { makeTempDir } from '../lock/lock-fixtures.ts';

const COMMANDS = 64;
const CLUSTER_MASTERS = 3;
const RECONNECT_TIMEOUT_MS = 10_000;
/** Enough candidate keys that every master serves one of them. */
const CANDIDATE_KEYS_MAX = 200;
/** How long a new cluster client may take to know every master. */
const SLOT_MAP_TIMEOUT_MS = 10_000;

interface CountedStream {
  _write: (...args: unknown[]) => unknown;
  _writev?: (...args: unknown[]) => unknown;
}

/** Counts the writes Node hands to `redis`'s current socket from now on. */
function countWrites(redis: Redis): { readonly count: number } {
  const stream = (redis as unknown as { stream: CountedStream }).stream;
  const counter = { count: 0 };
  const write = stream._write.bind(stream);
  stream._write = (...args) => {
    counter.count += 1;
    return write(...args);
  };
  const writev = stream._writev?.bind(stream);
  if (writev !== undefined) {
    stream._writev = (...args) => {
      counter.count += 1;
      return writev(...args);
    };
  }
  return counter;
}

/** INCRs one counter COMMANDS times, all issued in one turn; the replies in the order they came. */
function incrementsInOneTurn(redis: Redis, key: string): Promise<number[]> {
  return Promise.all(Array.from({ length: COMMANDS }, () => redis.incr(key)));
}

const inOrder = Array.from({ length: COMMANDS }, (_, i) => i + 1);

describe('coalesced writes on one Redis', () => {
  const redisUrl = loadConfig().redisUrl;
  const prefix = `ft-coalesce-test:${randomBytes(4).toString('hex')}:`;
  const clients: Redis[] = [];

  async function connected(coalesce: boolean): Promise<Redis> {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
    clients.push(redis);
    if (coalesce) coalesceWrites(redis);
    await redis.ping();
    return redis;
  }

  afterAll(async () => {
    const cleaner = new Redis(redisUrl);
    const keys = await cleaner.keys(`${prefix}*`);
    if (keys.length > 0) await cleaner.del(...keys);
    cleaner.disconnect();
    for (const c of clients) c.disconnect();
  });

  it('sends one turn of commands in one write, replies in order; without it, one write each', async () => {
    const plain = await connected(false);
    const plainWrites = countWrites(plain);
    expect(await incrementsInOneTurn(plain, `${prefix}plain`)).toEqual(inOrder);
    expect(plainWrites.count).toBeGreaterThan(COMMANDS / 2);

    const coalesced = await connected(true);
    const coalescedWrites = countWrites(coalesced);
    expect(await incrementsInOneTurn(coalesced, `${prefix}coalesced`)).toEqual(inOrder);
    expect(coalescedWrites.count).toBe(1);
  });

  it("sends a turn's lock calls in one write on the lock connection; without it, one write per call", async () => {
    // On a single server the lock connection does not auto-pipeline (redis-connection.ts): its
    // turn of calls, one release call and one acquire call (lock-scripts.ts), is two writes
    // unless the worker coalesces them, as run-worker.ts does.
    const writesOfTurn = async (coalesce: boolean): Promise<number> => {
      const redis = lockConnection(redisUrl) as Redis;
      clients.push(redis);
      if (coalesce) coalesceWrites(redis);
      const lock = new FencedLock({ redis, lockTtlMs: 30_000, keyPrefix: `${prefix}lock-${coalesce}:` });
      const held = await lock.acquire('w-1');
      if (held.kind !== 'acquired') throw new Error('w-1 not acquired');
      const writes = countWrites(redis);
      const [released, taken] = await Promise.all([lock.release('w-1', held.lease.owner), lock.acquire('w-2')]);
      expect(released).toBe(true);
      expect(taken).toMatchObject({ kind: 'acquired', lease: { token: 1n } });
      return writes.count;
    };
    expect(await writesOfTurn(false)).toBe(2);
    expect(await writesOfTurn(true)).toBe(1);
  });

  it('keeps a command and its follow-up in one order across turns', async () => {
    const redis = await connected(true);
    const key = `${prefix}order`;
    const writes = countWrites(redis);
    const first = redis.rpush(key, 'a', 'b');
    const read = redis.lrange(key, 0, -1);
    await new Promise((resolve) => setImmediate(resolve));
    const second = redis.rpush(key, 'c');
    expect(await first).toBe(2);
    expect(await read).toEqual(['a', 'b']);
    expect(await second).toBe(3);
    expect(await redis.lrange(key, 0, -1)).toEqual(['a', 'b', 'c']);
    // The two turns' writes, then the last read's: three, not four.
    expect(writes.count).toBe(3);
  });

  it('coalesces the new socket after a reconnect', async () => {
    const redis = await connected(true);
    const before = (redis as unknown as { stream: unknown }).stream;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no reconnect')), RECONNECT_TIMEOUT_MS);
      redis.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    redis.disconnect(true);
    await ready;
    expect((redis as unknown as { stream: unknown }).stream).not.toBe(before);
    const writes = countWrites(redis);
    expect(await incrementsInOneTurn(redis, `${prefix}reconnected`)).toEqual(inOrder);
    expect(writes.count).toBe(1);
  });
});

describe('coalesced writes on a Redis Cluster', () => {
  let local: LocalRedisCluster | null = null;

  beforeAll(async () => {
    local = await LocalRedisCluster.start({ dir: makeTempDir('coalesce'), masters: CLUSTER_MASTERS });
  }, 60_000);

  afterAll(async () => {
    await local?.stop();
  });

  type SlotRanges = [number, number, [string, number]][];

  /**
   * The client's masters and the slot ranges, once both name every master: a client just
   * connected, or the node it asked, may not have the whole slot map yet.
   */
  async function slotMap(cluster: Cluster): Promise<{ masters: Redis[]; ranges: SlotRanges }> {
    const deadline = performance.now() + SLOT_MAP_TIMEOUT_MS;
    for (;;) {
      const ranges = (await cluster.cluster('SLOTS')) as unknown as SlotRanges;
      const masters = cluster.nodes('master');
      const ports = new Set(ranges.map((r) => r[2][1]));
      if (masters.length === CLUSTER_MASTERS && masters.every((m) => ports.has(m.options.port as number))) {
        return { masters, ranges };
      }
      if (performance.now() >= deadline) {
        throw new Error(`the client knows ${masters.length} masters, the slot map ${ports.size}`);
      }
      await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
    }
  }

  /** One key per master, in the order of `masters`. */
  async function keyPerMaster(cluster: Cluster, masters: Redis[], ranges: SlotRanges): Promise<string[]> {
    const portOfKey = async (key: string) => {
      const slot = Number(await cluster.cluster('KEYSLOT', key));
      return ranges.find(([from, to]) => slot >= from && slot <= to)?.[2][1];
    };
    const keys: string[] = [];
    for (const master of masters) {
      for (let i = 0; i < CANDIDATE_KEYS_MAX; i++) {
        const key = `coalesce-${i}`;
        if ((await portOfKey(key)) === master.options.port) {
          keys.push(key);
          break;
        }
      }
    }
    return keys;
  }

  async function writesPerMaster(coalesce: boolean): Promise<number[]> {
    if (local === null) throw new Error('no cluster');
    const cluster = local.client();
    try {
      if (coalesce) coalesceWrites(cluster);
      const { masters, ranges } = await slotMap(cluster);
      const keys = await keyPerMaster(cluster, masters, ranges);
      expect(keys).toHaveLength(CLUSTER_MASTERS);
      await Promise.all(keys.map((k) => cluster.del(k)));
      const counters = masters.map((m) => countWrites(m));
      const replies = await Promise.all(keys.flatMap((k) => Array.from({ length: COMMANDS }, () => cluster.incr(k))));
      for (const [i] of keys.entries()) {
        expect(replies.slice(i * COMMANDS, (i + 1) * COMMANDS)).toEqual(inOrder);
      }
      await Promise.all(keys.map((k) => cluster.del(k)));
      return counters.map((c) => c.count);
    } finally {
      cluster.disconnect();
    }
  }

  it('sends each master its turn of commands in one write; without it, one write each', async () => {
    for (const count of await writesPerMaster(false)) expect(count).toBeGreaterThan(COMMANDS / 2);
    // The DELs after the counters start are one more turn: two writes per master.
    const coalesced = await writesPerMaster(true);
    expect(coalesced).toEqual(Array.from({ length: CLUSTER_MASTERS }, () => 2));
  }, 60_000);
});
