// The private cluster the chaos harness and the tests start: a second cluster started in the
// folder of an earlier one (a chaos run repeated with the same --out keeps its nodes.conf)
// starts from nothing instead of refusing with "Slot 0 is already busy". A node whose port or
// bus port (port + 10000) is taken between choosing and binding it (here by a listener of the
// test's that accepts and never answers, put up in the `front` hook, which runs in between, as
// a fault proxy landing on that port would) exits at start; that is seen at once and the node
// comes up on another pair, or after a bounded number of pairs the start fails naming the bus
// port. Every wait of the cluster ends within its bound, saying what it saw last, and at once
// when a node has exited.
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLUSTER_BUS_PORT_OFFSET,
  CLUSTER_NODE_START_ATTEMPTS_MAX,
  LocalRedisCluster,
} from '../../../harness/services/local-redis-cluster.ts';

/** Far above an exit at start or a poll interval, far below any of the cluster's own bounds. */
const NOTICED_WITHIN_MS = 5_000;
const CLUSTER_TEST_TIMEOUT_MS = 60_000;
/** Enough for a wait of a few hundred ms, or one ended at once; a wait that hangs fails here. */
const WAIT_TEST_TIMEOUT_MS = 10_000;
/** A wait on health that a node's exit must end long before. */
const HEALTH_WAIT_MS = 30_000;

const root = mkdtempSync(join(tmpdir(), 'local-cluster-test-'));
const started: LocalRedisCluster[] = [];
const blockers: Server[] = [];

afterAll(async () => {
  for (const c of started) await c.stop().catch(() => undefined);
  for (const b of blockers) b.close();
  rmSync(root, { recursive: true, force: true });
});

async function clusterState(cluster: LocalRedisCluster): Promise<string> {
  const node = cluster.nodeClient(0);
  try {
    const info = String(await node.cluster('INFO'));
    return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
  } finally {
    node.disconnect();
  }
}

/** A loopback listener on `port` that accepts connections and never answers. */
async function occupy(port: number): Promise<void> {
  const blocker = createServer(() => undefined);
  blockers.push(blocker);
  blocker.listen(port, '127.0.0.1');
  await once(blocker, 'listening');
}

describe('LocalRedisCluster', () => {
  it('starts afresh in the folder an earlier cluster left behind', async () => {
    const dir = join(root, 'cluster');
    const first = await LocalRedisCluster.start({ dir, masters: 3, removeDirOnStop: false });
    started.push(first);
    expect(await clusterState(first)).toBe('ok');
    await first.stop();
    started.pop();
    expect(existsSync(join(dir, 'node-0', 'nodes.conf'))).toBe(true);

    const second = await LocalRedisCluster.start({ dir, masters: 3, removeDirOnStop: false });
    started.push(second);
    expect(await clusterState(second)).toBe('ok');
  }, 60_000);
});

describe('a node whose port is taken before it binds it', () => {
  it(
    'starts on another pair when its port, or its bus port, was taken after it was chosen',
    async () => {
      const offered = new Map<number, number[]>();
      const cluster = await LocalRedisCluster.start({
        dir: join(root, 'moved'),
        masters: 3,
        front: async (index, port) => {
          const ports = offered.get(index) ?? [];
          ports.push(port);
          offered.set(index, ports);
          if (ports.length === 1 && index === 0) await occupy(port);
          if (ports.length === 1 && index === 1) await occupy(port + CLUSTER_BUS_PORT_OFFSET);
          return port;
        },
      });
      started.push(cluster);
      const [node0, node1, node2] = cluster.nodes;
      expect(node0?.port, "node 0's port").not.toBe(offered.get(0)?.[0]);
      expect(node1?.port, "node 1's port").not.toBe(offered.get(1)?.[0]);
      expect(offered.get(0)).toEqual([offered.get(0)?.[0], node0?.port]);
      expect(offered.get(1)).toEqual([offered.get(1)?.[0], node1?.port]);
      expect(offered.get(2)).toEqual([node2?.port]);
      expect(await clusterState(cluster)).toBe('ok');
    },
    CLUSTER_TEST_TIMEOUT_MS,
  );
});

describe('a node whose bus port is taken every time', () => {
  it(`gives up after ${CLUSTER_NODE_START_ATTEMPTS_MAX} pairs, naming the bus port`, async () => {
    const offered: number[] = [];
    const t0 = performance.now();
    await expect(
      LocalRedisCluster.start({
        dir: join(root, 'never'),
        masters: 1,
        front: async (_index, port) => {
          offered.push(port);
          await occupy(port + CLUSTER_BUS_PORT_OFFSET);
          return port;
        },
      }),
    ).rejects.toThrow(/cluster bus port \d+ is in use \(Address already in use\)/);
    expect(offered).toHaveLength(CLUSTER_NODE_START_ATTEMPTS_MAX);
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });
});

describe('the waits of a formed cluster', () => {
  let cluster: LocalRedisCluster | null = null;

  beforeAll(async () => {
    cluster = await LocalRedisCluster.start({ dir: join(root, 'waits'), masters: 3 });
    started.push(cluster);
  }, CLUSTER_TEST_TIMEOUT_MS);

  it(
    'a wait whose probe never answers fails within its bound, naming what it waited for',
    async () => {
      if (cluster === null) throw new Error('no cluster');
      const t0 = performance.now();
      await expect(
        cluster.waitFor(() => new Promise<boolean>(() => undefined), 500, 'answering a probe that never answers'),
      ).rejects.toThrow(
        /^cluster: not answering a probe that never answers after 500 ms; last seen: a probe did not answer within \d+ ms/,
      );
      expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
    },
    WAIT_TEST_TIMEOUT_MS,
  );

  it('a wait that never succeeds fails quoting what the probe saw last', async () => {
    if (cluster === null) throw new Error('no cluster');
    await expect(cluster.waitFor(async () => 'slots 0-5460 still moving', 300, 'settled')).rejects.toThrow(
      'cluster: not settled after 300 ms; last seen: slots 0-5460 still moving',
    );
  });

  it('a node that exits during a wait fails it at once, naming the node', async () => {
    if (cluster === null) throw new Error('no cluster');
    const node = cluster.node(1);
    process.kill(node.server.pid as number, 'SIGKILL');
    const t0 = performance.now();
    await expect(cluster.waitUntilHealthy(HEALTH_WAIT_MS)).rejects.toThrow(
      `cluster: not healthy (cluster_state:ok, every replica linked to its master): node 1 (port ${node.port}) ended by SIGKILL`,
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });
});
