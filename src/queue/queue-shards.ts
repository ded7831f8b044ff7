// The queues a deployment runs: QUEUE_SHARDS queues named after QUEUE_NAME, each with its own
// BullMQ prefix, and the stable routing of a transfer to one of them by its source wallet.
// One function names them for the producer, the workers, the drain wait, status and dashboards.
//
// Names: shard 0 is QUEUE_NAME itself, shard i > 0 is `<QUEUE_NAME>.<i>`. With QUEUE_SHARDS=1
// (the default) and one Redis, the one queue is `transfers` under BullMQ's default prefix
// `bull`: exactly the keys of the unsharded service, so nothing moves. Raising QUEUE_SHARDS
// keeps shard 0 where it was, so jobs already queued are still consumed.
//
// In cluster mode every shard's prefix is its name in braces (`{transfers}`, `{transfers.1}`):
// BullMQ's scripts touch many keys of one queue at once, which Redis Cluster only allows in one
// hash slot, and a tag per shard lets the shards land on different masters (BullMQ's docs,
// "Redis Cluster": one prefix per queue so that the queues spread over the nodes).
import type { Config } from '../config/config.ts';

/** BullMQ's own default prefix, used in single-node mode so the keys stay what they always were. */
export const SINGLE_NODE_QUEUE_PREFIX = 'bull';

export interface QueueShard {
  /** 0-based. */
  readonly index: number;
  /** BullMQ queue name. */
  readonly name: string;
  /** BullMQ prefix (keys are `<prefix>:<name>:<suffix>`). */
  readonly prefix: string;
}

export type ShardingConfig = Pick<Config, 'queueName' | 'queueShards' | 'redisCluster'>;

export function shardQueueName(baseName: string, index: number): string {
  return index === 0 ? baseName : `${baseName}.${index}`;
}

export function queueShardOf(config: ShardingConfig, index: number): QueueShard {
  if (!Number.isInteger(index) || index < 0 || index >= config.queueShards) {
    throw new RangeError(`shard index must be from 0 to ${config.queueShards - 1}, got ${index}`);
  }
  const name = shardQueueName(config.queueName, index);
  return Object.freeze({ index, name, prefix: config.redisCluster === null ? SINGLE_NODE_QUEUE_PREFIX : `{${name}}` });
}

/** Every shard of the deployment, in index order: what producers, status and dashboards see. */
export function queueShardsOf(config: ShardingConfig): readonly QueueShard[] {
  return Array.from({ length: config.queueShards }, (_, i) => queueShardOf(config, i));
}

/** The shards a worker process consumes (QUEUE_SHARDS_CONSUMED, default all). */
export function consumedQueueShardsOf(
  config: ShardingConfig & Pick<Config, 'queueShardsConsumed'>,
): readonly QueueShard[] {
  return config.queueShardsConsumed.map((i) => queueShardOf(config, i));
}

/** The queue names alone, for tools that take a list of names (with `queueShardsOf` for prefixes). */
export function queueNamesOf(config: ShardingConfig): string[] {
  return queueShardsOf(config).map((s) => s.name);
}

const FNV_OFFSET_BASIS_32 = 0x811c9dc5;
const FNV_PRIME_32 = 0x01000193;

/** FNV-1a, 32 bits, over the UTF-8 bytes: a few lines in any language, so a producer elsewhere routes alike. */
export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET_BASIS_32;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, FNV_PRIME_32) >>> 0;
  }
  return hash >>> 0;
}

/**
 * The shard of a transfer: FNV-1a-32 of its source wallet id, modulo the shard count. Every
 * transfer of one wallet meets in one shard, which keeps its lock mostly in one place. A
 * transfer routed elsewhere (another producer's rule, a change of QUEUE_SHARDS) is still
 * correct: the lock, the fence and the idempotency record do not depend on the shard.
 */
export function shardIndexOf(sourceWalletId: string, shardCount: number): number {
  if (!Number.isInteger(shardCount) || shardCount < 1)
    throw new RangeError(`shard count must be a whole number ≥ 1, got ${shardCount}`);
  return fnv1a32(sourceWalletId) % shardCount;
}

/**
 * The queue the relay publishes the outcome feed to (OUTCOMES_QUEUE_NAME): BullMQ's default
 * prefix on one Redis, its name in braces in cluster mode, like the shards.
 */
export function outcomesQueueOf(config: Pick<Config, 'outcomesQueueName' | 'redisCluster'>): QueueShard {
  const name = config.outcomesQueueName;
  return Object.freeze({
    index: 0,
    name,
    prefix: config.redisCluster === null ? SINGLE_NODE_QUEUE_PREFIX : `{${name}}`,
  });
}
