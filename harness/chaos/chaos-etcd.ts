// The etcd lock service of a `--lock etcd` run: a private 3-member cluster (harness/services/
// local-etcd-cluster.ts) under the run's folder, with a fault proxy in front of each member's
// client port; the workers' ETCD_ENDPOINTS are those proxies, so a member can be cut from every
// worker while its peers still reach it. The harness's own reads go to the members themselves:
// the hold watch (every lock key's create revision, every HOLD_POLL_MS) and the cluster's
// revision, which the fences in the database are measured against after the drain.
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { LocalEtcdCluster } from '../services/local-etcd-cluster.ts';
import { FaultProxy } from './fault-proxy.ts';

export const ETCD_CHAOS_MEMBERS = 3;
/** Short election settings: a lost leader is replaced within about two seconds. */
export const ETCD_CHAOS_HEARTBEAT_INTERVAL_MS = 100;
export const ETCD_CHAOS_ELECTION_TIMEOUT_MS = 1_000;
/** How often the hold watch reads the lock keys: the resolution of the longest hold. */
export const ETCD_HOLD_POLL_MS = 100;
/** Bound on one call of the harness's own etcd client. */
const ETCD_HARNESS_CALL_MS = 1_000;

/** The end of the range of every key under `prefix` (etcd's prefix convention: the last byte plus one). */
export function prefixRangeEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

export class ChaosEtcd {
  /** What a fault still measures after its heal (a quorum loss: the fleet's readiness), settled before the checks. */
  private readonly measuring = new Set<Promise<void>>();

  private constructor(
    readonly cluster: LocalEtcdCluster,
    /** The proxy in front of each member's client port, by member index. */
    readonly fronts: readonly FaultProxy[],
    private readonly dir: string,
  ) {}

  /** Starts the cluster under `<runDir>/etcd` and a proxy in front of each member; takes down what started on failure. */
  static async start(runDir: string): Promise<ChaosEtcd> {
    const dir = join(runDir, 'etcd');
    const cluster = await LocalEtcdCluster.start({
      dir,
      members: ETCD_CHAOS_MEMBERS,
      heartbeatIntervalMs: ETCD_CHAOS_HEARTBEAT_INTERVAL_MS,
      electionTimeoutMs: ETCD_CHAOS_ELECTION_TIMEOUT_MS,
      removeDirOnStop: false,
    });
    const fronts: FaultProxy[] = [];
    try {
      await cluster.waitForLeader();
      for (const [i, endpoint] of cluster.endpoints.entries()) {
        const port = Number(new URL(endpoint).port);
        fronts.push(await FaultProxy.start(`etcd-member-${i}`, '127.0.0.1', port));
      }
    } catch (err) {
      await Promise.all(fronts.map((f) => f.close().catch(() => undefined)));
      await cluster.stop().catch(() => undefined);
      throw err;
    }
    return new ChaosEtcd(cluster, fronts, dir);
  }

  /** The workers' ETCD_ENDPOINTS: the proxies. */
  get workerEndpoints(): string[] {
    return this.fronts.map((f) => `http://127.0.0.1:${f.port}`);
  }

  /** The members' processes now (they change when one is restarted). */
  pids(): number[] {
    return Array.from({ length: this.cluster.size }, (_, i) => this.cluster.pid(i)).filter(
      (p): p is number => p !== undefined,
    );
  }

  /** Keeps a fault's measurement going past its heal, so the next fault need not wait for it. */
  track(measurement: Promise<void>): void {
    const settled = measurement.catch(() => undefined);
    this.measuring.add(settled);
    void settled.then(() => this.measuring.delete(settled));
  }

  /** Every measurement tracked so far, settled (each is bounded by its own wait). */
  async settled(): Promise<void> {
    await Promise.all([...this.measuring]);
  }

  /** A client of the harness's own, to the members themselves, every call bounded. */
  client(): Etcd3 {
    return new Etcd3({
      hosts: this.cluster.endpoints,
      defaultCallOptions: () => ({ deadline: Date.now() + ETCD_HARNESS_CALL_MS }),
    });
  }

  /** The cluster's current revision (a linearizable read: it needs a quorum). */
  async revision(): Promise<bigint> {
    const client = this.client();
    try {
      const reply = await client.kv.range({ key: Buffer.from('chaos-revision'), count_only: true });
      return BigInt(reply.header.revision);
    } finally {
      client.close();
    }
  }

  /** Stops every member and proxy; the run's folder keeps each member's log, the data goes. */
  async stop(): Promise<void> {
    await Promise.all(this.fronts.map((f) => f.close().catch(() => undefined)));
    await this.cluster.stop().catch(() => undefined);
    for (const entry of readdirSync(this.dir)) {
      if (!entry.endsWith('.log')) rmSync(join(this.dir, entry), { recursive: true, force: true });
    }
  }
}

/**
 * Reads every lock key under `<prefix>wallet/` every ETCD_HOLD_POLL_MS: a hold is one create
 * revision (one lease of one holder), from first seen to last seen. A read that fails (no quorum)
 * is skipped: a key seen before and after it with the same create revision was held throughout.
 */
export class EtcdHoldWatch {
  private readonly holds = new Map<string, { firstMs: number; lastMs: number }>();
  private running = true;
  private readonly loop: Promise<void>;
  private readonly client: Etcd3;

  constructor(etcd: ChaosEtcd, lockKeyPrefix: string) {
    this.client = etcd.client();
    this.loop = this.run(`${lockKeyPrefix}wallet/`);
  }

  /** The longest one lease was seen held (ms, at ETCD_HOLD_POLL_MS resolution). */
  async stop(): Promise<number> {
    this.running = false;
    await this.loop;
    this.client.close();
    let longest = 0;
    for (const h of this.holds.values()) longest = Math.max(longest, h.lastMs - h.firstMs);
    return Math.round(longest);
  }

  private async run(prefix: string): Promise<void> {
    const key = Buffer.from(prefix);
    const rangeEnd = prefixRangeEnd(prefix);
    while (this.running) {
      const atMs = performance.now();
      try {
        const reply = await this.client.kv.range({ key, range_end: rangeEnd, keys_only: true });
        for (const kv of reply.kvs) {
          const lease = `${kv.key.toString()}@${kv.create_revision}`;
          const hold = this.holds.get(lease);
          if (hold === undefined) this.holds.set(lease, { firstMs: atMs, lastMs: atMs });
          else hold.lastMs = atMs;
        }
      } catch {
        // No quorum, or the member asked is down: read again on the next tick.
      }
      await new Promise((resolve) => setTimeout(resolve, ETCD_HOLD_POLL_MS));
    }
  }
}
