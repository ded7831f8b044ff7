// A private Redis Cluster from the local redis-server binary: N masters with an even split of
// the 16384 slots and R replicas each, on free loopback ports, data and logs under a folder the
// caller gives. Built by hand (ADDSLOTSRANGE, SET-CONFIG-EPOCH, MEET, REPLICATE) rather than by
// `redis-cli --cluster create`, so that each node can announce another port than its own: the
// chaos harness puts a fault proxy in front of every node (cluster-announce-port), through which
// every connection, a replica's replication link included, then passes. Used by the lock and
// queue tests, the chaos harness (`--redis cluster`) and the scaling runs.
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, type ClusterOptions, Redis } from 'ioredis';
import { wholeNumberIn } from '../../config/bounds.ts';
import { CLUSTER_SLOT_COUNT } from '../../lock/key-slot.ts';
import { freePort } from './free-port.ts';
import { LocalRedis } from './local-redis.ts';

/** Redis Cluster listens on port + 10000 for its bus. */
export const CLUSTER_BUS_PORT_OFFSET = 10_000;
export const CLUSTER_MASTERS_MAX = 16;
export const CLUSTER_REPLICAS_PER_MASTER_MAX = 2;
export const CLUSTER_NODE_TIMEOUT_MS_DEFAULT = 5_000;
const PORT_MAX = 65_535 - CLUSTER_BUS_PORT_OFFSET;
const PORT_PICK_ATTEMPTS_MAX = 50;
const NODE_START_ATTEMPTS_MAX = 3;
export const CLUSTER_FORM_TIMEOUT_MS = 30_000;
const POLL_INTERVAL_MS = 100;
/** A probe of one node that has not answered in this long counts as "not answering". */
const PROBE_TIMEOUT_MS = 2_000;

export interface LocalRedisClusterOptions {
  /** Parent folder; node i keeps its data, nodes.conf and redis.log in `<dir>/node-<i>`. */
  readonly dir: string;
  readonly masters: number;
  readonly replicasPerMaster?: number;
  readonly nodeTimeoutMs?: number;
  readonly appendOnly?: boolean;
  /**
   * Puts something (a proxy) in front of node `index`, which listens on `port`; returns the
   * port the node announces to clients and to the other nodes instead of its own.
   */
  readonly front?: (index: number, port: number) => Promise<number>;
  /** Remove `dir` on stop (default true). */
  readonly removeDirOnStop?: boolean;
}

export interface LocalClusterNode {
  readonly index: number;
  /** Where redis-server listens. */
  readonly port: number;
  /** What it announces (the front's port, or its own). */
  readonly announcedPort: number;
  readonly busPort: number;
  readonly dir: string;
  readonly server: LocalRedis;
  /** CLUSTER MYID, fixed for the node's life (kept in nodes.conf across restarts). */
  readonly id: string;
}

/** A slot range as created, with the nodes that serve it: one master and its replicas, whichever is master now. */
export interface SlotGroup {
  readonly index: number;
  readonly fromSlot: number;
  readonly toSlot: number;
  /** Node indexes; the first was the master at creation. */
  readonly members: readonly number[];
}

export interface NodeView {
  readonly id: string;
  readonly index: number | null;
  readonly role: 'master' | 'replica';
  readonly masterId: string | null;
  readonly failed: boolean;
  readonly slots: readonly (readonly [number, number])[];
}

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

/** One field of INFO output (`field:value` lines). */
export function infoField(info: string, field: string): string | null {
  const match = new RegExp(`^${field}:(.*)$`, 'm').exec(info);
  return match === null ? null : (match[1] as string).trim();
}

/** Parses CLUSTER NODES. */
export function parseClusterNodes(text: string, indexOfId: (id: string) => number | null): NodeView[] {
  const out: NodeView[] = [];
  for (const line of text.split('\n')) {
    const fields = line.trim().split(' ');
    if (fields.length < 8) continue;
    const [id, , flagsRaw, master] = fields as [string, string, string, string];
    const flags = flagsRaw.split(',');
    const slots: [number, number][] = [];
    for (const s of fields.slice(8)) {
      if (s.startsWith('[')) continue; // a slot being migrated
      const [a, b] = s.split('-');
      slots.push([Number(a), Number(b ?? a)]);
    }
    out.push({
      id,
      index: indexOfId(id),
      role: flags.includes('master') ? 'master' : 'replica',
      masterId: master === '-' ? null : master,
      failed: flags.includes('fail'),
      slots,
    });
  }
  return out;
}

export class LocalRedisCluster {
  private constructor(
    readonly nodes: LocalClusterNode[],
    readonly groups: readonly SlotGroup[],
    private readonly options: LocalRedisClusterOptions,
  ) {}

  /** Real ports of every node, in index order. */
  get ports(): number[] {
    return this.nodes.map((n) => n.port);
  }

  /** The addresses clients are told about (what REDIS_CLUSTER_NODES should list). */
  get seedNodes(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: '127.0.0.1', port: n.announcedPort }));
  }

  static async start(options: LocalRedisClusterOptions): Promise<LocalRedisCluster> {
    const masters = wholeNumberIn('masters', options.masters, 1, CLUSTER_MASTERS_MAX);
    const replicas = wholeNumberIn(
      'replicasPerMaster',
      options.replicasPerMaster ?? 0,
      0,
      CLUSTER_REPLICAS_PER_MASTER_MAX,
    );
    const count = masters * (1 + replicas);
    const nodes: LocalClusterNode[] = [];
    const groups: SlotGroup[] = Array.from({ length: masters }, (_, g) => ({
      index: g,
      fromSlot: Math.floor((g * CLUSTER_SLOT_COUNT) / masters),
      toSlot: Math.floor(((g + 1) * CLUSTER_SLOT_COUNT) / masters) - 1,
      // Node g is the group's first master; nodes masters + g, 2 * masters + g ... its replicas.
      members: Array.from({ length: 1 + replicas }, (_, r) => r * masters + g),
    }));
    const cluster = new LocalRedisCluster(nodes, groups, options);
    try {
      const taken = new Set<number>();
      for (let index = 0; index < count; index += 1) {
        const node = await LocalRedisCluster.startNode(index, options, taken);
        taken.add(node.port);
        taken.add(node.busPort);
        nodes.push(node);
      }
      await cluster.form();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  private static serverArgs(
    options: LocalRedisClusterOptions,
    dir: string,
    announcedPort: number,
    busPort: number,
  ): string[] {
    return [
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      join(dir, 'nodes.conf'),
      '--cluster-node-timeout',
      String(options.nodeTimeoutMs ?? CLUSTER_NODE_TIMEOUT_MS_DEFAULT),
      '--cluster-announce-ip',
      '127.0.0.1',
      '--cluster-announce-port',
      String(announcedPort),
      '--cluster-announce-bus-port',
      String(busPort),
      // A slot range whose master is down must not stop the others from serving.
      '--cluster-require-full-coverage',
      'no',
      // A replica takes over whatever its link's age: the harness decides when there is a failover.
      '--cluster-replica-validity-factor',
      '0',
      // Groups stay as created: a replica never wanders to another master.
      '--cluster-allow-replica-migration',
      'no',
      // A full resynchronisation (an old master coming back as a replica) starts at once.
      '--repl-diskless-sync-delay',
      '0',
      '--logfile',
      join(dir, 'redis.log'),
    ];
  }

  /** A port can be taken between picking and binding (other tests pick too): retry. */
  private static async startNode(
    index: number,
    options: LocalRedisClusterOptions,
    taken: ReadonlySet<number>,
  ): Promise<LocalClusterNode> {
    // Absolute: redis-server changes into --dir before it opens the log file.
    const dir = resolve(options.dir, `node-${index}`);
    // A new cluster starts from nothing: a nodes.conf or AOF left by an earlier run in the same
    // folder (a chaos run repeated with the same --out) would bring back its slots and identity.
    rmSync(dir, { recursive: true, force: true });
    let lastError: unknown = null;
    for (let attempt = 0; attempt < NODE_START_ATTEMPTS_MAX; attempt += 1) {
      const port = await clusterPort(taken);
      const busPort = port + CLUSTER_BUS_PORT_OFFSET;
      try {
        const announcedPort = options.front === undefined ? port : await options.front(index, port);
        const server = await LocalRedis.start({
          dir,
          port,
          appendOnly: options.appendOnly ?? false,
          extraArgs: LocalRedisCluster.serverArgs(options, dir, announcedPort, busPort),
        });
        const client = server.client();
        try {
          const id = String(await client.call('CLUSTER', 'MYID'));
          return { index, port, announcedPort, busPort, dir, server, id };
        } finally {
          client.disconnect();
        }
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  private async form(): Promise<void> {
    const clients = this.nodes.map((n) => n.server.client());
    try {
      for (const group of this.groups) {
        const master = clients[group.members[0] as number] as Redis;
        await master.call('CLUSTER', 'ADDSLOTSRANGE', String(group.fromSlot), String(group.toSlot));
      }
      // Distinct epochs from the start, as redis-cli --cluster create does: no collision to resolve.
      for (const [i, client] of clients.entries()) await client.call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
      const first = this.nodes[0] as LocalClusterNode;
      for (const client of clients.slice(1))
        await client.call('CLUSTER', 'MEET', '127.0.0.1', String(first.port), String(first.busPort));
      await this.waitFor(
        async () => {
          const views = await Promise.all(clients.map((c) => c.call('CLUSTER', 'NODES')));
          return views.every((v) => {
            const lines = String(v).trim().split('\n');
            return lines.length === this.nodes.length && !/handshake|noaddr/.test(String(v));
          });
        },
        CLUSTER_FORM_TIMEOUT_MS,
        'every node knows every other',
      );
      for (const group of this.groups) {
        const masterId = (this.nodes[group.members[0] as number] as LocalClusterNode).id;
        for (const r of group.members.slice(1)) await (clients[r] as Redis).call('CLUSTER', 'REPLICATE', masterId);
      }
    } finally {
      for (const c of clients) c.disconnect();
    }
    await this.waitUntilHealthy(CLUSTER_FORM_TIMEOUT_MS);
  }

  /** Polls `probe` until it answers true; throws naming `what` after timeoutMs. */
  async waitFor(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    let lastError = '';
    for (;;) {
      try {
        if (await probe()) return;
      } catch (err) {
        lastError = `; last error: ${err instanceof Error ? err.message : String(err)}`;
      }
      if (performance.now() > deadline) throw new Error(`cluster: not ${what} after ${timeoutMs} ms${lastError}`);
      await sleep(POLL_INTERVAL_MS);
    }
  }

  /** One command on one node, bounded; a fresh connection each time (nodes come and go). */
  async onNode<T>(index: number, command: (client: Redis) => Promise<T>): Promise<T> {
    const node = this.node(index);
    const client = new Redis(node.port, '127.0.0.1', {
      lazyConnect: true,
      connectTimeout: PROBE_TIMEOUT_MS,
      commandTimeout: PROBE_TIMEOUT_MS,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
      return await command(client);
    } finally {
      client.disconnect();
    }
  }

  node(index: number): LocalClusterNode {
    const node = this.nodes[index];
    if (node === undefined) throw new RangeError(`no cluster node ${index}`);
    return node;
  }

  indexOfId(id: string): number | null {
    return this.nodes.find((n) => n.id === id)?.index ?? null;
  }

  isRunning(index: number): boolean {
    return this.node(index).server.pid !== undefined;
  }

  /** The cluster as the first running node that answers sees it. */
  async view(): Promise<NodeView[]> {
    let lastError: unknown = new Error('no node is running');
    for (const node of this.nodes) {
      if (!this.isRunning(node.index)) continue;
      try {
        const text = await this.onNode(node.index, (c) => c.call('CLUSTER', 'NODES'));
        return parseClusterNodes(String(text), (id) => this.indexOfId(id));
      } catch (err) {
        lastError = err;
      }
    }
    throw lastError;
  }

  /** Node index of the master serving `group` now, by the group's own members' answers (ROLE). */
  async masterOf(group: SlotGroup): Promise<number | null> {
    for (const member of group.members) {
      if (!this.isRunning(member)) continue;
      const role = await this.onNode(member, (c) => c.call('ROLE')).catch(() => null);
      if (Array.isArray(role) && role[0] === 'master') {
        const info = await this.onNode(member, (c) => c.call('CLUSTER', 'INFO')).catch(() => '');
        if (/cluster_state:ok/.test(String(info))) return member;
      }
    }
    return null;
  }

  /** The group whose slot range holds `slot`. */
  groupOfSlot(slot: number): SlotGroup {
    const group = this.groups.find((g) => slot >= g.fromSlot && slot <= g.toSlot);
    if (group === undefined) throw new RangeError(`slot ${slot} out of range`);
    return group;
  }

  /**
   * Every running node agrees that the cluster is ok, every group has one master and every
   * other running member replicates it with its link up.
   */
  async isHealthy(): Promise<boolean> {
    for (const node of this.nodes) {
      if (!this.isRunning(node.index)) continue;
      const info = String(await this.onNode(node.index, (c) => c.call('CLUSTER', 'INFO')));
      if (!/cluster_state:ok/.test(info)) return false;
    }
    for (const group of this.groups) {
      const master = await this.masterOf(group);
      if (master === null) return false;
      const masterId = this.node(master).id;
      for (const member of group.members) {
        if (member === master || !this.isRunning(member)) continue;
        const info = String(await this.onNode(member, (c) => c.call('INFO', 'replication')));
        if (infoField(info, 'role') !== 'slave' || infoField(info, 'master_link_status') !== 'up') return false;
        const myMaster = (await this.view()).find((v) => v.index === member)?.masterId;
        if (myMaster !== masterId) return false;
      }
    }
    return true;
  }

  async waitUntilHealthy(timeoutMs: number): Promise<void> {
    await this.waitFor(
      () => this.isHealthy(),
      timeoutMs,
      'healthy (cluster_state:ok, every replica linked to its master)',
    );
  }

  /** SIGKILL of one node. */
  async kill(index: number): Promise<void> {
    await this.node(index).server.kill();
  }

  /** Starts a killed node again on its port, with its folder and nodes.conf: it rejoins with its old identity. */
  async restart(index: number): Promise<void> {
    await this.node(index).server.restart();
  }

  /** A cluster client through the announced addresses. */
  client(options: ClusterOptions = {}): Cluster {
    const client = new Cluster(this.seedNodes, { redisOptions: { maxRetriesPerRequest: 1 }, ...options });
    client.on('error', () => undefined);
    return client;
  }

  /** A plain connection to one node's own port (for CLUSTER KEYSLOT, CLUSTER NODES, INFO...). */
  nodeClient(index: number): Redis {
    return this.node(index).server.client();
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.server.stop()));
    if (this.options.removeDirOnStop ?? true) rmSync(this.options.dir, { recursive: true, force: true });
  }
}
