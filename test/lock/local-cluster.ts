// Starts a private 3-master Redis Cluster (redis-server --cluster-enabled + redis-cli --cluster
// create) on free ports under a temp folder, for running the lock scripts against real slots.
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { freePort } from '../../src/services/free-port.ts';
import { LocalRedis } from '../../src/services/local-redis.ts';
import { makeTempDir } from './lock-fixtures.ts';

const execFileAsync = promisify(execFile);

/** Redis Cluster listens on port + 10000 for its bus. */
const CLUSTER_BUS_PORT_OFFSET = 10_000;
const PORT_MAX = 65_535 - CLUSTER_BUS_PORT_OFFSET;
const PORT_PICK_ATTEMPTS_MAX = 50;
const NODE_START_ATTEMPTS_MAX = 3;
const CLUSTER_CREATE_TIMEOUT_MS = 30_000;
const CLUSTER_READY_TIMEOUT_MS = 15_000;
const CLUSTER_READY_POLL_MS = 100;
const CLUSTER_NODE_TIMEOUT_MS = 5_000;

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A free port whose bus port (port + 10000) is free too, and not in `taken`. */
async function clusterPort(taken: ReadonlySet<number>): Promise<number> {
  for (let attempt = 0; attempt < PORT_PICK_ATTEMPTS_MAX; attempt += 1) {
    const port = await freePort();
    if (port > PORT_MAX || taken.has(port) || taken.has(port + CLUSTER_BUS_PORT_OFFSET)) continue;
    if (await portIsFree(port + CLUSTER_BUS_PORT_OFFSET)) return port;
  }
  throw new Error(`no free port pair (port, port + ${CLUSTER_BUS_PORT_OFFSET}) after ${PORT_PICK_ATTEMPTS_MAX} tries`);
}

export class LocalCluster {
  private constructor(
    readonly nodes: readonly LocalRedis[],
    private readonly dir: string,
  ) {}

  get ports(): number[] {
    return this.nodes.map((node) => node.port);
  }

  static async start(nodeCount: number): Promise<LocalCluster> {
    const dir = makeTempDir('cluster');
    const nodes: LocalRedis[] = [];
    const cluster = new LocalCluster(nodes, dir);
    try {
      const taken = new Set<number>();
      for (let index = 0; index < nodeCount; index += 1) {
        const node = await LocalCluster.startNode(join(dir, `node-${index}`), taken);
        taken.add(node.port);
        taken.add(node.port + CLUSTER_BUS_PORT_OFFSET);
        nodes.push(node);
      }
      await execFileAsync(
        'redis-cli',
        ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes'],
        { timeout: CLUSTER_CREATE_TIMEOUT_MS },
      );
      await cluster.waitUntilReady();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  /** A port can be taken between picking and binding (other test files pick too): retry. */
  private static async startNode(dir: string, taken: ReadonlySet<number>): Promise<LocalRedis> {
    let lastError: unknown = null;
    for (let attempt = 0; attempt < NODE_START_ATTEMPTS_MAX; attempt += 1) {
      const port = await clusterPort(taken);
      try {
        return await LocalRedis.start({
          dir,
          port,
          extraArgs: [
            '--cluster-enabled', 'yes',
            '--cluster-config-file', join(dir, 'nodes.conf'),
            '--cluster-node-timeout', String(CLUSTER_NODE_TIMEOUT_MS),
          ],
        });
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  private async waitUntilReady(): Promise<void> {
    const deadlineMs = performance.now() + CLUSTER_READY_TIMEOUT_MS;
    const clients = this.nodes.map((node) => node.client());
    try {
      for (;;) {
        const infos = await Promise.all(clients.map((client) => client.cluster('INFO')));
        if (infos.every((info) => /cluster_state:ok/.test(info) && /cluster_slots_ok:16384/.test(info))) return;
        if (performance.now() > deadlineMs) throw new Error(`cluster not ready after ${CLUSTER_READY_TIMEOUT_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, CLUSTER_READY_POLL_MS));
      }
    } finally {
      for (const client of clients) client.disconnect();
    }
  }

  client(): Cluster {
    return new Cluster(
      this.nodes.map((node) => ({ host: '127.0.0.1', port: node.port })),
      { redisOptions: { maxRetriesPerRequest: 1 } },
    );
  }

  /** A plain connection to one node (for CLUSTER KEYSLOT, CLUSTER NODES...). */
  nodeClient(index: number): Redis {
    const node = this.nodes[index];
    if (node === undefined) throw new RangeError(`no node ${index}`);
    return node.client();
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.stop()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
