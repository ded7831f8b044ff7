// A TCP proxy per link (one worker's connection to Redis or to PostgreSQL) that the harness
// can degrade: add delay with jitter, stall (hold every byte until released, like a partition
// that heals), or cut (reset every connection and refuse new ones for a while). Holding the
// replies alone, then cutting, loses replies to requests the target has already run.
// In front of a Redis Cluster node it also tells replication links apart (a replica's
// connection to its master sends REPLCONF and PSYNC, which no client does) and can stall those
// alone: the master goes on acknowledging writes that its replica never receives.
import { connect, createServer, type Server, type Socket } from 'node:net';

/** Bytes held per direction of one connection while delayed or stalled, before that connection is reset. */
export const PROXY_HELD_BYTES_MAX = 64 * 1024 * 1024;
/** A connection is looked at for REPLCONF/PSYNC in its first this many bytes from the client; after that it is a client. */
export const REPLICATION_SNIFF_BYTES_MAX = 4_096;
/** A RESP command (array header, then the name as its first bulk string) named REPLCONF or PSYNC. */
const REPLICATION_COMMANDS = /(?:^|\r\n)\*\d+\r\n\$(?:8\r\nREPLCONF|5\r\nPSYNC)\r\n/i;

interface Chunk {
  readonly data: Buffer;
  readonly releaseAtMs: number;
}

/** One direction of one proxied connection, delivering chunks in order at their release time. */
class Lane {
  private readonly queue: Chunk[] = [];
  private heldBytes = 0;
  private lastReleaseAtMs = 0;
  private timer: NodeJS.Timeout | null = null;
  private waitingForDrain = false;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly onOverflow: () => void,
    private readonly stalled: () => boolean,
    private readonly inspect: ((data: Buffer) => void) | null,
  ) {
    from.on('data', (data: Buffer) => this.push(data));
  }

  get held(): number {
    return this.heldBytes;
  }

  private push(data: Buffer): void {
    this.inspect?.(data);
    const delayMs = this.proxy.currentDelayMs();
    if (delayMs === 0 && !this.stalled() && this.queue.length === 0) {
      this.write(data);
      return;
    }
    const releaseAtMs = Math.max(this.lastReleaseAtMs, performance.now() + delayMs);
    this.lastReleaseAtMs = releaseAtMs;
    this.queue.push({ data, releaseAtMs });
    this.heldBytes += data.length;
    if (this.heldBytes > PROXY_HELD_BYTES_MAX) {
      this.onOverflow();
      return;
    }
    this.pump();
  }

  private write(data: Buffer): void {
    if (this.to.destroyed) return;
    if (!this.to.write(data) && !this.waitingForDrain) {
      // Backpressure: stop reading the sender until the receiver has taken what it has.
      this.waitingForDrain = true;
      this.from.pause();
      this.to.once('drain', () => {
        this.waitingForDrain = false;
        this.from.resume();
      });
    }
  }

  pump(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.stalled()) return;
    const now = performance.now();
    while (this.queue.length > 0) {
      const head = this.queue[0] as Chunk;
      if (head.releaseAtMs > now) {
        this.timer = setTimeout(() => this.pump(), Math.ceil(head.releaseAtMs - now));
        return;
      }
      this.queue.shift();
      this.heldBytes -= head.data.length;
      this.write(head.data);
    }
  }

  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
  }
}

interface Connection {
  readonly client: Socket;
  readonly upstream: Socket;
  readonly lanes: readonly Lane[];
  /** A replica's link to its master (it sent REPLCONF or PSYNC). */
  replication: boolean;
  sniffedBytes: number;
}

export interface ProxyStats {
  connections: number;
  resets: number;
  refused: number;
  /** Connections recognised as replication links. */
  replication: number;
}

export class FaultProxy {
  private readonly connections = new Set<Connection>();
  private delayMs = 0;
  private jitterMs = 0;
  private stalled = false;
  private replicationStalled = false;
  private repliesStalled = false;
  private cutting = false;
  readonly stats: ProxyStats = { connections: 0, resets: 0, refused: 0, replication: 0 };

  private constructor(
    readonly name: string,
    private readonly server: Server,
    readonly port: number,
    readonly targetHost: string,
    readonly targetPort: number,
  ) {}

  /** Listens on a free loopback port and forwards every connection to targetHost:targetPort. */
  static async start(name: string, targetHost: string, targetPort: number): Promise<FaultProxy> {
    let proxy: FaultProxy | null = null;
    const server = createServer({ noDelay: true }, (socket) => proxy?.accept(socket));
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        if (address === null || typeof address === 'string') reject(new Error('proxy got no port'));
        else resolve(address.port);
      });
    });
    server.on('error', () => undefined);
    proxy = new FaultProxy(name, server, port, targetHost, targetPort);
    return proxy;
  }

  get isStalled(): boolean {
    return this.stalled;
  }

  currentDelayMs(): number {
    if (this.delayMs === 0 && this.jitterMs === 0) return 0;
    return Math.max(0, Math.round(this.delayMs + (Math.random() * 2 - 1) * this.jitterMs));
  }

  private accept(client: Socket): void {
    if (this.cutting) {
      this.stats.refused += 1;
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    this.stats.connections += 1;
    client.setNoDelay(true);
    const upstream = connect({ host: this.targetHost, port: this.targetPort, noDelay: true });
    const lanes: Lane[] = [];
    const connection: Connection = { client, upstream, lanes, replication: false, sniffedBytes: 0 };
    const close = () => this.drop(connection, false);
    const stalled = () => this.stalled || (this.replicationStalled && connection.replication);
    const repliesStalled = () => stalled() || this.repliesStalled;
    const sniff = (data: Buffer) => {
      if (connection.replication || connection.sniffedBytes >= REPLICATION_SNIFF_BYTES_MAX) return;
      connection.sniffedBytes += data.length;
      if (REPLICATION_COMMANDS.test(data.toString('latin1'))) {
        connection.replication = true;
        this.stats.replication += 1;
      }
    };
    lanes.push(
      new Lane(this, client, upstream, close, stalled, sniff),
      new Lane(this, upstream, client, close, repliesStalled, null),
    );
    this.connections.add(connection);
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  }

  private drop(connection: Connection, reset: boolean): void {
    if (!this.connections.delete(connection)) return;
    for (const lane of connection.lanes) lane.dispose();
    if (reset) {
      this.stats.resets += 1;
      connection.client.resetAndDestroy();
      connection.upstream.resetAndDestroy();
    } else {
      connection.client.destroy();
      connection.upstream.destroy();
    }
  }

  setDelay(delayMs: number, jitterMs: number): void {
    this.delayMs = delayMs;
    this.jitterMs = jitterMs;
  }

  /** Holds every byte, in both directions, until unstall(). */
  stall(): void {
    this.stalled = true;
  }

  unstall(): void {
    this.stalled = false;
    for (const c of this.connections) for (const lane of c.lanes) lane.pump();
  }

  /**
   * Holds every byte from the target to the clients; requests still reach the target and run.
   * A cut() now discards the replies: the clients never learn what their requests did.
   */
  stallReplies(): void {
    this.repliesStalled = true;
  }

  unstallReplies(): void {
    this.repliesStalled = false;
    for (const c of this.connections) for (const lane of c.lanes) lane.pump();
  }

  /** Holds every byte of replication links only (both directions); clients pass as before. */
  stallReplication(): void {
    this.replicationStalled = true;
  }

  unstallReplication(): void {
    this.replicationStalled = false;
    for (const c of this.connections) for (const lane of c.lanes) lane.pump();
  }

  /** Resets the replication links, discarding what they hold (the replica never sees those bytes). */
  resetReplication(): number {
    const links = [...this.connections].filter((c) => c.replication);
    for (const c of links) this.drop(c, true);
    return links.length;
  }

  /** Bytes held now on replication links (master → replica and back). */
  heldReplicationBytes(): number {
    let bytes = 0;
    for (const c of this.connections) if (c.replication) for (const lane of c.lanes) bytes += lane.held;
    return bytes;
  }

  /** Resets every open connection and refuses new ones until uncut(). */
  cut(): void {
    this.cutting = true;
    for (const c of [...this.connections]) this.drop(c, true);
  }

  uncut(): void {
    this.cutting = false;
  }

  /** Back to a plain pipe (held bytes are delivered). */
  heal(): void {
    this.setDelay(0, 0);
    this.uncut();
    this.replicationStalled = false;
    this.repliesStalled = false;
    this.unstall();
  }

  async close(): Promise<void> {
    this.cutting = true;
    for (const c of [...this.connections]) this.drop(c, false);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** What a link fault acts on: one proxy, or a group of them (one worker's links to every cluster node). */
export interface LinkProxy {
  readonly name: string;
  readonly stats: ProxyStats;
  setDelay(delayMs: number, jitterMs: number): void;
  stall(): void;
  unstall(): void;
  cut(): void;
  uncut(): void;
  heal(): void;
  close(): Promise<void>;
}

/** Several proxies degraded as one link (a worker reaches each cluster node through its own proxy). */
export class FaultProxyGroup implements LinkProxy {
  constructor(
    readonly name: string,
    readonly members: readonly FaultProxy[],
  ) {}

  get stats(): ProxyStats {
    const sum: ProxyStats = { connections: 0, resets: 0, refused: 0, replication: 0 };
    for (const m of this.members) {
      sum.connections += m.stats.connections;
      sum.resets += m.stats.resets;
      sum.refused += m.stats.refused;
      sum.replication += m.stats.replication;
    }
    return sum;
  }

  setDelay(delayMs: number, jitterMs: number): void {
    for (const m of this.members) m.setDelay(delayMs, jitterMs);
  }

  stall(): void {
    for (const m of this.members) m.stall();
  }

  unstall(): void {
    for (const m of this.members) m.unstall();
  }

  cut(): void {
    for (const m of this.members) m.cut();
  }

  uncut(): void {
    for (const m of this.members) m.uncut();
  }

  heal(): void {
    for (const m of this.members) m.heal();
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.close()));
  }
}
