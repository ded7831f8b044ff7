// Queue shard names, prefixes and the routing hash: pure functions, fixed vectors.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { keySlot } from '../../src/lock/key-slot.ts';
import {
  consumedQueueShardsOf,
  fnv1a32,
  outcomesQueueOf,
  queueNamesOf,
  queueShardsOf,
  shardIndexOf,
} from '../../src/queue/queue-shards.ts';

describe('queue shards', () => {
  it('names the outcomes queue <QUEUE_NAME>-outcomes (no colon), under `bull`, or its name in braces in cluster mode', () => {
    expect(outcomesQueueOf(loadConfig({}))).toEqual({ index: 0, name: 'transfers-outcomes', prefix: 'bull' });
    expect(
      outcomesQueueOf(loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000', OUTCOMES_QUEUE_NAME: 'answers' })),
    ).toEqual({ index: 0, name: 'answers', prefix: '{answers}' });
  });

  it('keeps the unsharded single-node queue exactly as it was: `transfers` under prefix `bull`', () => {
    expect(queueShardsOf(loadConfig({}))).toEqual([{ index: 0, name: 'transfers', prefix: 'bull' }]);
  });

  it('names shard 0 after QUEUE_NAME and the others <name>.<i>; one hash-tagged prefix per shard in cluster mode', () => {
    const single = loadConfig({ QUEUE_SHARDS: '3' });
    expect(queueNamesOf(single)).toEqual(['transfers', 'transfers.1', 'transfers.2']);
    expect(queueShardsOf(single).map((s) => s.prefix)).toEqual(['bull', 'bull', 'bull']);
    const cluster = loadConfig({ QUEUE_SHARDS: '3', REDIS_CLUSTER_NODES: '127.0.0.1:7000' });
    const shards = queueShardsOf(cluster);
    expect(shards.map((s) => s.prefix)).toEqual(['{transfers}', '{transfers.1}', '{transfers.2}']);
    // Every key of a shard (`<prefix>:<name>:<suffix>`) hashes to the slot of its tag, and the tags differ.
    for (const s of shards) {
      expect(keySlot(`${s.prefix}:${s.name}:wait`)).toBe(keySlot(`${s.prefix}:${s.name}:meta`));
    }
    expect(new Set(shards.map((s) => keySlot(`${s.prefix}:${s.name}:wait`))).size).toBe(3);
    expect(
      consumedQueueShardsOf(loadConfig({ QUEUE_SHARDS: '3', QUEUE_SHARDS_CONSUMED: '1' })).map((s) => s.name),
    ).toEqual(['transfers.1']);
  });

  it('routes by FNV-1a-32 of the source wallet (published vectors), the same every time', () => {
    // Test vectors of the FNV reference (isthe.com/chongo/tech/comp/fnv): "", "a", "foobar".
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
    expect(shardIndexOf('foobar', 3)).toBe(0xbf9cf968 % 3);
    expect(shardIndexOf('anything', 1)).toBe(0);
    expect(() => shardIndexOf('w1', 0)).toThrow(RangeError);
  });

  it('spreads wallets over every shard', () => {
    const counts = [0, 0, 0];
    for (let i = 1; i <= 3_000; i += 1) counts[shardIndexOf(`w${i}`, 3)]! += 1;
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });
});
