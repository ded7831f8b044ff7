// One stable address in front of an HA formation that always leads to its primary, as
// production reaches one (the `-rw` Service of CloudNativePG, HAProxy on Patroni's /primary, a
// repointed PgBouncer): clients keep one DATABASE_URL across failovers.
//
// It asks the formation's monitor who the writable primary is every FOLLOW_INTERVAL_MS. A new
// connection goes to that node; while there is none (a failover or a switchover under way) a new
// connection is refused at once, as a Service without ready endpoints refuses it. When the
// primary changes, every connection to the old one is cut: a client never keeps writing to a node
// that is no longer the primary, it reconnects and reaches the new one.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './free-port.ts';
import { FORMATION_DATABASE, LocalPgFormation, type NodeState } from './local-pg-formation.ts';

/** How often the endpoint asks the monitor who the primary is. */
export const FOLLOW_INTERVAL_MS = 100;

/** A change of the endpoint's target: a node's port, or null while there is no primary. */
export interface TargetChange {
  /** Date.now() of the change. */
  readonly atMs: number;
  readonly node: string | null;
}

export class PrimaryEndpoint {
  private target: { name: string; port: number } | null = null;
  private readonly sockets = new Set<Socket>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  readonly changes: TargetChange[] = [];
  /** Connections refused because there was no primary. */
  refused = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly formation: LocalPgFormation,
  ) {}

  get url(): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/${FORMATION_DATABASE}`;
  }

  /** The node the endpoint leads to now (null: none). */
  get current(): string | null {
    return this.target?.name ?? null;
  }

  static async start(formation: LocalPgFormation): Promise<PrimaryEndpoint> {
    const port = await freePort();
    let endpoint: PrimaryEndpoint | null = null;
    const server = createServer((client) => endpoint?.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    endpoint = new PrimaryEndpoint(server, port, formation);
    await endpoint.follow();
    endpoint.timer = setInterval(() => void endpoint?.follow(), FOLLOW_INTERVAL_MS);
    return endpoint;
  }

  /** Reads the monitor once and moves the target when the primary changed. */
  async follow(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      let states: NodeState[];
      try {
        states = await this.formation.states();
      } catch {
        // The monitor unreachable: keep leading where we led (the nodes decide, not the monitor).
        return;
      }
      const w = LocalPgFormation.writable(states);
      const next = w === null ? null : { name: w.name, port: w.port };
      if (next?.name === this.target?.name) return;
      this.target = next;
      this.changes.push({ atMs: Date.now(), node: next?.name ?? null });
      for (const s of this.sockets) s.destroy();
    } finally {
      this.polling = false;
    }
  }

  private accept(client: Socket): void {
    const target = this.target;
    if (target === null) {
      this.refused += 1;
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(target.port, '127.0.0.1');
    this.sockets.add(client);
    this.sockets.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
