// A private Redis Cluster from the local redis-server binary: N masters with an even split of
// the 16384 slots and R replicas each, on free loopback ports, data and logs under a folder the
// caller gives. Built by hand (ADDSLOTSRANGE, SET-CONFIG-EPOCH, MEET, REPLICATE) rather than by
// `redis-cli --cluster create`, so that each node can announce another port than its own: the
// chaos harness puts a fault proxy in front of every node (cluster-announce-port), through which
// every connection, a replica's replication link included, then passes. Used by the lock and
// queue tests, the chaos harness (`--redis cluster`) and the scaling runs.
// A node whose port or bus port (port + 10000) is taken between choosing and binding exits at
// start; that is seen at once and the node starts again on another pair, a bounded number of
// times. Every wait (a node's identity, the nodes knowing each other, health) is bounded, each
// command in it too, and fails at once when a node has exited.
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Cluster, type ClusterOptions, Redis } from 'ioredis';
import { wholeNumberIn } from '../../src/config/bounds.ts';
import { CLUSTER_SLOT_COUNT } from '../../src/lock/key-slot.ts';
import { notYet, done as pollDone, pollUntil } from './bounded-wait.ts';
import { freePort, PortInUseError } from './free-port.ts';
import { LocalRedis } from './local-redis.ts';

/** Redis Cluster listens on port + 10000 for its bus. */
export const CLUSTER_BUS_PORT_OFFSET = 10_000;
export const CLUSTER_MASTERS_MAX = 16;
export const CLUSTER_REPLICAS_PER_MASTER_MAX = 2;
export const CLUSTER_NODE_TIMEOUT_MS_DEFAULT = 5_000;
const PORT_MAX = 65_535 - CLUSTER_BUS_PORT_OFFSET;
const PORT_PICK_ATTEMPTS_MAX = 50;
/** Port pairs a node is started on, in all, when its port or bus port is taken before it binds them. */
export const CLUSTER_NODE_START_ATTEMPTS_MAX = 5;
/** Bound on each wait of the forming: the nodes knowing each other, then health. */
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
   * port the node announces to clients and to the other nodes instead of its own. Called again
   * for the same index, with another port, when the node had to start on another pair: what
   * the earlier call put up is then the caller's to replace.
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

/** A free port whose bus port (port + 10000) is free too, neither in `taken`. */
async function clusterPort(taken: ReadonlySet<number>): Promise<number> {
  for (let attempt = 0; attempt < PORT_PICK_ATTEMPTS_MAX; attempt += 1) {
    const port = await freePort();
    const busPort = port + CLUSTER_BUS_PORT_OFFSET;
    if (port > PORT_MAX || taken.has(port) || taken.has(busPort)) continue;
    if ((await portIsFree(port)) && (await portIsFree(busPort))) return port;
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

  /**
   * A port can be taken between picking and binding (other tests pick too, a front may land on
   * it, an outgoing connection may use it): redis-server then exits at start, and the node
   * starts again on another pair, CLUSTER_NODE_START_ATTEMPTS_MAX pairs in all.
   */
  private static async startNode(
    index: number,
    options: LocalRedisClusterOptions,
    taken: ReadonlySet<number>,
  ): Promise<LocalClusterNode> {
    // Absolute: redis-server changes into --dir before it opens the log file.
    const dir = resolve(options.dir, `node-${index}`);
    const tried: string[] = [];
    let lastError: PortInUseError | null = null;
    for (let attempt = 0; attempt < CLUSTER_NODE_START_ATTEMPTS_MAX; attempt += 1) {
      // A new cluster starts from nothing: a nodes.conf or AOF left by an earlier run in the same
      // folder (a chaos run repeated with the same --out), or by a failed attempt, would bring
      // back its slots and identity.
      rmSync(dir, { recursive: true, force: true });
      const port = await clusterPort(taken);
      const busPort = port + CLUSTER_BUS_PORT_OFFSET;
      tried.push(`${port}/${busPort}`);
      const announcedPort = options.front === undefined ? port : await options.front(index, port);
      let server: LocalRedis;
      try {
        server = await LocalRedis.start({
          dir,
          port,
          appendOnly: options.appendOnly ?? false,
          extraArgs: LocalRedisCluster.serverArgs(options, dir, announcedPort, busPort),
        });
      } catch (error) {
        if (!(error instanceof PortInUseError)) throw error;
        lastError = error;
        continue;
      }
      try {
        const id = String(await LocalRedisCluster.onPort(port, (c) => c.call('CLUSTER', 'MYID')));
        return { index, port, announcedPort, busPort, dir, server, id };
      } catch (error) {
        await server.stop();
        throw new Error(
          `cluster node ${index} on port ${port}: no answer to CLUSTER MYID: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    throw new Error(
      `cluster node ${index}: no port pair (port/bus port) stayed free until redis-server bound it, ` +
        `after ${CLUSTER_NODE_START_ATTEMPTS_MAX} tries (${tried.join(', ')}); the last: ${lastError?.message}`,
    );
  }

  private async form(): Promise<void> {
    const clients = this.nodes.map((n) => LocalRedisCluster.boundedClient(n.port));
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
          const behind = views.flatMap((v, i) => {
            const text = String(v);
            const known = text.trim().split('\n').length;
            const pending = /handshake|noaddr/.test(text);
            return known === this.nodes.length && !pending
              ? []
              : [`node ${i} knows ${known} of ${this.nodes.length}${pending ? ', some in handshake' : ''}`];
          });
          return behind.length === 0 ? true : behind.join('; ');
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

  /**
   * Polls `probe` until it answers true; false, a string (what it saw instead) or an error mean
   * "not yet". Each call is bounded by the time left. Throws naming `what` and what the probe
   * saw last after timeoutMs, and at once when a node has exited without being killed.
   */
  async waitFor(probe: () => Promise<boolean | string>, timeoutMs: number, what: string): Promise<void> {
    await pollUntil(
      async () => {
        const gone = this.exitedNode();
        if (gone !== null) throw new Error(`cluster: not ${what}: ${gone}`);
        try {
          const answer = await probe();
          if (answer === true) return pollDone(undefined);
          return notYet(answer === false ? 'not yet' : answer);
        } catch (err) {
          const after = this.exitedNode();
          if (after !== null) throw new Error(`cluster: not ${what}: ${after}`);
          return notYet(`error: ${err instanceof Error ? err.message : String(err)}`);
        }
      },
      {
        what: `cluster: not ${what}`,
        timeoutMs,
        intervalMs: POLL_INTERVAL_MS,
        timedOut: (seen) => `cluster: not ${what} after ${timeoutMs} ms; last seen: ${seen}`,
      },
    );
  }

  /** "node 2 (port 41234) exited with code 1", for the first node that ended without kill(); null when none did. */
  exitedNode(): string | null {
    for (const node of this.nodes) {
      const how = node.server.exitedUnexpectedly;
      if (how !== null) return `node ${node.index} (port ${node.port}) ${how}; see ${node.server.logFile}`;
    }
    return null;
  }

  /** A connection whose every command is bounded (no command waits on a node that does not answer). */
  private static boundedClient(port: number): Redis {
    const client = new Redis(port, '127.0.0.1', {
      connectTimeout: PROBE_TIMEOUT_MS,
      commandTimeout: PROBE_TIMEOUT_MS,
      maxRetriesPerRequest: 1,
    });
    client.on('error', () => undefined);
    return client;
  }

  /** One command on one port, bounded; a fresh connection each time (nodes come and go). */
  private static async onPort<T>(port: number, command: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis(port, '127.0.0.1', {
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

  /** One command on one node, bounded; a fresh connection each time (nodes come and go). */
  async onNode<T>(index: number, command: (client: Redis) => Promise<T>): Promise<T> {
    return LocalRedisCluster.onPort(this.node(index).port, command);
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
    return (await this.healthProblem()) === null;
  }

  /** The first thing that keeps the cluster from being healthy (see isHealthy), or null. */
  async healthProblem(): Promise<string | null> {
    for (const node of this.nodes) {
      if (!this.isRunning(node.index)) continue;
      const info = String(await this.onNode(node.index, (c) => c.call('CLUSTER', 'INFO')));
      if (!/cluster_state:ok/.test(info))
        return `node ${node.index}: cluster_state:${infoField(info, 'cluster_state') ?? '?'}`;
    }
    for (const group of this.groups) {
      const slots = `slots ${group.fromSlot}-${group.toSlot}`;
      const master = await this.masterOf(group);
      if (master === null) return `${slots}: no master answering with cluster_state:ok`;
      const masterId = this.node(master).id;
      for (const member of group.members) {
        if (member === master || !this.isRunning(member)) continue;
        const info = String(await this.onNode(member, (c) => c.call('INFO', 'replication')));
        const role = infoField(info, 'role');
        const link = infoField(info, 'master_link_status');
        if (role !== 'slave' || link !== 'up')
          return `${slots}: node ${member} is ${role ?? '?'}${role === 'slave' ? ` with its link ${link ?? '?'}` : ''}`;
        const myMaster = (await this.view()).find((v) => v.index === member)?.masterId;
        if (myMaster !== masterId)
          return `${slots}: node ${member} replicates ${myMaster ?? 'nothing'}, not node ${master}`;
      }
    }
    return null;
  }

  async waitUntilHealthy(timeoutMs: number): Promise<void> {
    await this.waitFor(
      async () => (await this.healthProblem()) ?? true,
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
