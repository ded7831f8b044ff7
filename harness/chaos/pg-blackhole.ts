// The pg-blackhole fault: one worker's link to PostgreSQL stops forwarding in both directions
// without closing either side (FaultProxy.stall(): what a host gone silent behind a firewall
// looks like; TCP delivers what was held once the path is back), for longer than the bound the
// worker promises on wallets it holds meanwhile. While it lasts the harness watches the lock keys
// that worker owns (an owner id starts with the worker's instance id, which carries its pid) and
// measures how long each stayed held; the run's check is that none stayed longer than the bound.
import { CONFIG_DEFAULTS } from '../../src/config/config.ts';
import { dbCallDeadlineMs } from '../../src/db/prisma.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import { dataNodesOf, scanNode } from '../../src/queue/redis-scan.ts';
import type { CheckResult, Counterexample } from './check-result.ts';

/** How often the lock keys are read during a blackhole: the resolution of the hold times. */
export const BLACKHOLE_POLL_MS = 100;
/** A blackhole lasts the bound plus this much more (at least, at most), so the bound is what frees the wallets. */
export const BLACKHOLE_PAST_BOUND_MS_MIN = 2_000;
export const BLACKHOLE_PAST_BOUND_MS_MAX = 6_000;

/**
 * How long a worker whose database path is silent may hold a wallet: a lease whose jobs get no
 * answer for the worker's decision deadline (dbCallDeadlineMs; the chaos workers run with the
 * default DB_STATEMENT_TIMEOUT_MS) is given up at its next renewal and released at once; one
 * lock TTL covers the renewal interval and, should the release itself be lost, the expiry.
 */
export function walletHoldBoundMs(lockTtlMs: number): number {
  return dbCallDeadlineMs({ dbStatementTimeoutMs: Number(CONFIG_DEFAULTS.DB_STATEMENT_TIMEOUT_MS) }) + lockTtlMs;
}

/** What one blackhole did to the wallets its worker held. */
export interface BlackholeFigures {
  readonly boundMs: number;
  /** Lock keys the worker held when the path went silent. */
  readonly heldAtStart: number;
  /** When the last of those was gone (ms after the start); null if some were still held at the end. */
  readonly releasedAfterMs: number | null;
  /** The most lock keys the worker held at once during the blackhole. */
  readonly heldMax: number;
  /** The longest any one lease of the worker was seen held during the blackhole. */
  readonly longestHoldMs: number;
  /** The wallet of that lease. */
  readonly longestHoldWallet: string | null;
  readonly ok: boolean;
}

interface Hold {
  readonly walletKey: string;
  readonly firstSeenMs: number;
  lastSeenMs: number;
}

/** Reads, every BLACKHOLE_POLL_MS, the lock keys whose owner id contains `ownerMarker`. */
export class BlackholeWatch {
  private readonly holds = new Map<string, Hold>();
  private readonly atStart = new Set<string>();
  private releasedAfterMs: number | null = null;
  private heldMax = 0;
  private polls = 0;
  private running = true;
  private readonly loop: Promise<void>;

  private constructor(
    private readonly redis: RedisClient,
    private readonly lockPattern: string,
    private readonly ownerMarker: string,
    private readonly boundMs: number,
    private readonly startedAtMs: number,
  ) {
    this.loop = this.run();
  }

  static start(redis: RedisClient, lockKeyPrefix: string, workerPid: number, lockTtlMs: number): BlackholeWatch {
    // Owner ids are `<name>-<pid>-<random>:<uuid>` (src/queue/run-worker.ts).
    return new BlackholeWatch(
      redis,
      `${lockKeyPrefix}{wallet:*}:lock`,
      `-${workerPid}-`,
      walletHoldBoundMs(lockTtlMs),
      performance.now(),
    );
  }

  /** The same watch over every worker's leases (a formation fault stops the database for all of them). */
  static startForEveryWorker(redis: RedisClient, lockKeyPrefix: string, lockTtlMs: number): BlackholeWatch {
    return new BlackholeWatch(
      redis,
      `${lockKeyPrefix}{wallet:*}:lock`,
      '',
      walletHoldBoundMs(lockTtlMs),
      performance.now(),
    );
  }

  async stop(): Promise<BlackholeFigures> {
    this.running = false;
    await this.loop;
    let longest: Hold | null = null;
    for (const h of this.holds.values())
      if (longest === null || h.lastSeenMs - h.firstSeenMs > longest.lastSeenMs - longest.firstSeenMs) longest = h;
    const longestHoldMs = longest === null ? 0 : Math.round(longest.lastSeenMs - longest.firstSeenMs);
    return {
      boundMs: this.boundMs,
      heldAtStart: this.atStart.size,
      releasedAfterMs: this.releasedAfterMs === null ? null : Math.round(this.releasedAfterMs),
      heldMax: this.heldMax,
      longestHoldMs,
      longestHoldWallet: longest === null ? null : (/\{wallet:([^}]*)\}/.exec(longest.walletKey)?.[1] ?? null),
      ok: longestHoldMs <= this.boundMs,
    };
  }

  private async run(): Promise<void> {
    while (this.running) {
      const pollStartMs = performance.now();
      try {
        this.observe(await this.ownedLeases(), pollStartMs);
      } catch {
        // Redis down for another fault: read again on the next tick.
      }
      await new Promise((resolve) => setTimeout(resolve, BLACKHOLE_POLL_MS));
    }
  }

  /** Lease ids (`key owner`) held now by the worker. */
  private async ownedLeases(): Promise<string[]> {
    const out: string[] = [];
    for (const node of await dataNodesOf(this.redis)) {
      for await (const keys of scanNode(node, this.lockPattern)) {
        const pipeline = node.pipeline();
        for (const key of keys) pipeline.get(key);
        const replies = (await pipeline.exec()) ?? [];
        replies.forEach(([err, owner], i) => {
          if (err === null && typeof owner === 'string' && owner.includes(this.ownerMarker))
            out.push(`${keys[i]} ${owner}`);
        });
      }
    }
    return out;
  }

  private observe(leases: readonly string[], atMs: number): void {
    const first = this.polls === 0;
    this.polls += 1;
    // The first reading stands for the moment the path went silent.
    const seenMs = first ? this.startedAtMs : atMs;
    for (const lease of leases) {
      const hold = this.holds.get(lease);
      if (hold === undefined)
        this.holds.set(lease, { walletKey: lease.split(' ')[0] ?? lease, firstSeenMs: seenMs, lastSeenMs: atMs });
      else hold.lastSeenMs = atMs;
      if (first) this.atStart.add(lease);
    }
    this.heldMax = Math.max(this.heldMax, leases.length);
    if (this.releasedAfterMs === null && !leases.some((l) => this.atStart.has(l)))
      this.releasedAfterMs = atMs - this.startedAtMs;
  }
}

/** The run's check on every blackhole: its worker's wallets were released within the bound. */
export function blackholeCheck(
  blackholes: readonly { id: number; worker: number | null; blackhole?: BlackholeFigures }[],
): CheckResult {
  const counterexamples: Counterexample[] = [];
  for (const r of blackholes) {
    const b = r.blackhole;
    if (b === undefined || b.ok) continue;
    counterexamples.push({
      fault: r.id,
      worker: r.worker,
      wallet: b.longestHoldWallet,
      heldMs: b.longestHoldMs,
      boundMs: b.boundMs,
    });
  }
  return {
    name: 'wallets held by a worker whose database path is blackholed are released within the bound',
    group: 'queue',
    ok: counterexamples.length === 0,
    violations: counterexamples.length,
    capped: false,
    counterexamples,
  };
}
