// Finding and deleting keys by pattern on one Redis or on every master of a cluster, with SCAN
// (never KEYS or FLUSH): a cluster client sends SCAN to one node only, so each master is scanned
// on its own, and keys are deleted one by one (a multi-key DEL across slots is refused).
import type { Cluster, Redis } from 'ioredis';
import { isCluster, type RedisClient } from './redis-connection.ts';

/** Keys asked for per SCAN call. */
export const KEY_SCAN_COUNT = 1_000;

/** A cluster client that has not connected yet knows no node: waiting this long at most for it. */
export const CLUSTER_READY_TIMEOUT_MS = 10_000;

/**
 * The servers holding data: the one server, or every master of the cluster as the client sees
 * it (after waiting for the client to know the cluster: a fresh one knows no node at all).
 */
export async function dataNodesOf(client: RedisClient): Promise<Redis[]> {
  if (!isCluster(client)) return [client as Redis];
  const cluster = client as Cluster;
  if (cluster.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`Redis Cluster not ready after ${CLUSTER_READY_TIMEOUT_MS} ms`)),
        CLUSTER_READY_TIMEOUT_MS,
      );
      cluster.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
      if (cluster.status === 'wait') void cluster.connect().catch(() => undefined);
    });
  }
  return cluster.nodes('master');
}

/** Every key matching `pattern` on one server, a page at a time. */
export async function* scanNode(node: Redis, pattern: string): AsyncGenerator<string[]> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', KEY_SCAN_COUNT);
    cursor = next;
    if (keys.length > 0) yield keys;
  } while (cursor !== '0');
}

/** Deletes every key matching `pattern` on one server; `oneByOne` on a cluster node (keys of many slots). */
export async function deleteMatchingOnNode(node: Redis, pattern: string, oneByOne: boolean): Promise<number> {
  let deleted = 0;
  for await (const keys of scanNode(node, pattern)) {
    if (!oneByOne) {
      deleted += await node.del(...keys);
      continue;
    }
    // Each key is in a slot this master serves (or did a moment ago): delete it here, one per command.
    const pipeline = node.pipeline();
    for (const key of keys) pipeline.del(key);
    const replies = (await pipeline.exec()) ?? [];
    for (const [err, n] of replies) if (err === null) deleted += Number(n);
  }
  return deleted;
}

/** Deletes every key matching `pattern` on every data node; returns how many. */
export async function deleteMatching(client: RedisClient, pattern: string): Promise<number> {
  let deleted = 0;
  for (const node of await dataNodesOf(client)) deleted += await deleteMatchingOnNode(node, pattern, isCluster(client));
  return deleted;
}
