// The worker's BullMQ connection sends the commands issued in one turn of the event loop in one
// socket write. A batch of decisions settles many jobs at once, and each settled job sends its
// own moveToFinished script call: one write system call each, a visible share of the worker's
// busy CPU in a profile of the bench's e2e case (docs/verification/results/performance-history.md).
// Coalescing saves the calls, not the bytes: on loopback most of a write's cost is the kernel's
// work on the bytes. The bytes, their order on the connection and the commands are
// unchanged; only how many writes carry them. This is not ioredis's enableAutoPipelining, which
// defers some commands to a pipeline sent at setImmediate while others (MULTI, CLIENT, SCRIPT,
// ...) go out at once, so it can reorder them; BullMQ's commands keep their order. The worker's
// lock connection is coalesced too (run-worker.ts): on a single server a turn's lock calls, one
// release call and one acquire call, then leave in one write.
import type { Cluster, Redis } from 'ioredis';
import { isCluster, type RedisClient } from './redis-connection.ts';

/** The part of a socket this needs: net.Socket and tls.TLSSocket both have it. */
export interface CorkableStream {
  write: (...args: never[]) => boolean;
  cork(): void;
  uncork(): void;
}

const coalescing = new WeakSet<object>();

/**
 * From now on, the first write to `stream` corks it and schedules an uncork with
 * process.nextTick, so Node hands everything written until then (the rest of the current
 * callback and, when it runs as a promise continuation, the continuations queued with it) to
 * the kernel in one writev. Idempotent per stream. Cork and uncork nest, so a caller that
 * corks the stream itself (ioredis's pipelines, Node's own end()) keeps its meaning.
 */
export function coalesceWritesPerTick(stream: CorkableStream): void {
  if (coalescing.has(stream)) return;
  coalescing.add(stream);
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  let corked = false;
  const uncork = () => {
    corked = false;
    stream.uncork();
  };
  stream.write = ((...args: unknown[]) => {
    if (!corked) {
      corked = true;
      stream.cork();
      process.nextTick(uncork);
    }
    return write(...args);
  }) as CorkableStream['write'];
}

function coalesceNode(redis: Redis): void {
  // ioredis opens a new socket on every (re)connection and emits 'connect' once it is there.
  const apply = () => {
    const stream = (redis as unknown as { stream?: CorkableStream }).stream;
    if (stream !== undefined) coalesceWritesPerTick(stream);
  };
  redis.on('connect', apply);
  apply();
}

/**
 * Coalesces the writes of every connection of `client`: its socket (each new one after a
 * reconnect), or with a cluster, the socket of every node it connects to, now and later.
 */
export function coalesceWrites(client: RedisClient): void {
  if (!isCluster(client)) {
    coalesceNode(client);
    return;
  }
  const cluster: Cluster = client;
  cluster.on('+node', (node: Redis) => coalesceNode(node));
  for (const node of cluster.nodes()) coalesceNode(node);
}
