// The run's lock service (`--lock redis|postgres`): what the workers are told (LOCK_BACKEND,
// LOCK_DATABASE_URL), the lock epoch a postgres run opens before they start, the
// terminate-lock-sessions fault, the watch on how long a wallet stays held, and the backend's row
// of the report (lock losses, stale holders refused, fence increments lost, longest hold, throughput).
import pg from 'pg';
import { openLockEpoch } from '../../src/lock/lock-epochs.ts';
import { LOCK_EPOCH_MAX } from '../../src/lock/lock-service.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import type { ChaosLockBackend } from './chaos-options.ts';
import type { FailoverFigures } from './faults.ts';
import { BlackholeWatch } from './pg-blackhole.ts';
import { lockSessionsAll } from './schedule.ts';

/** The application_name of a worker's lock session (src/lock/postgres-lock.ts). */
export const LOCK_APPLICATION_NAME = 'fenced-transfers-lock';
/** How often the PostgreSQL hold watch reads pg_locks: the resolution of the longest hold. */
export const HOLD_POLL_MS = 100;
/** A token is epoch × 2^53 + the service's own number (src/lock/lock-service.ts). */
const EPOCH_BASE = 2n ** 53n;

/**
 * The workers' environment for the lock service. Redis: nothing (the default, as before `--lock`).
 * Postgres: the lock session goes where DATABASE_URL goes, through the worker's PostgreSQL proxy
 * (so a link fault cuts it too), which reaches PostgreSQL itself: `--lock postgres` refuses
 * `--pgbouncer` (chaos-options.ts).
 */
export function lockEnv(lock: ChaosLockBackend, workerDatabaseUrl: string): Record<string, string> {
  if (lock === 'redis') return {};
  return { LOCK_BACKEND: 'postgres', LOCK_DATABASE_URL: workerDatabaseUrl };
}

async function withOwner<T>(databaseUrl: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'chaos-harness' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A postgres run's epoch, opened as the owner before any worker starts (a worker refuses another epoch's backend). */
export async function openRunLockEpoch(databaseUrl: string, lock: ChaosLockBackend): Promise<number | null> {
  if (lock === 'redis') return null;
  return withOwner(databaseUrl, async (client) => (await openLockEpoch(client, lock, 'chaos run')).epoch);
}

/**
 * terminate-lock-sessions: pg_terminate_backend of the workers' lock sessions, as the owner;
 * every one, or the one the target picks among them in pid order (lockSessionsAll).
 */
export async function terminateLockSessions(
  databaseUrl: string,
  databaseName: string,
  target: number | undefined,
): Promise<{ sessions: number; terminated: number }> {
  return withOwner(databaseUrl, async (client) => {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = $2 ORDER BY pid`,
      [LOCK_APPLICATION_NAME, databaseName],
    );
    const one = rows[(target ?? 0) % Math.max(1, rows.length)];
    const chosen = lockSessionsAll(target) ? rows.map((r) => r.pid) : one === undefined ? [] : [one.pid];
    let terminated = 0;
    for (const pid of chosen) {
      const r = await client.query<{ ok: boolean }>('SELECT pg_terminate_backend($1) AS ok', [pid]);
      if (r.rows[0]?.ok === true) terminated += 1;
    }
    return { sessions: rows.length, terminated };
  });
}

/** What the run measured of its lock service itself, after the drain (the rest of its row comes from the figures). */
export interface LockMeasures {
  readonly backend: ChaosLockBackend;
  /** The longest one lease was seen held over the fault phase and the drain; null when not measured. */
  readonly longestHoldMs: number | null;
  /** fenceIncrementsBehind(), after the drain; null when it could not be read. */
  readonly fenceIncrementsBehind: number | null;
  readonly fenceWalletsBehind: number | null;
}

/** Watches how long any wallet stays held, over the fault phase and the drain. */
export interface HoldWatch {
  /** The longest one lease was seen held (ms, at HOLD_POLL_MS resolution). */
  stop(): Promise<number>;
}

/** Redis: the lock keys (BlackholeWatch over every worker); postgres: the lock sessions' advisory locks in pg_locks. */
export async function startHoldWatch(
  lock: ChaosLockBackend,
  databaseUrl: string,
  redis: RedisClient,
  lockKeyPrefix: string,
  lockTtlMs: number,
): Promise<HoldWatch> {
  if (lock === 'redis') {
    const watch = BlackholeWatch.startForEveryWorker(redis, lockKeyPrefix, lockTtlMs);
    return { stop: async () => (await watch.stop()).longestHoldMs };
  }
  return PgHoldWatch.start(databaseUrl);
}

/**
 * Reads the lock sessions' advisory locks every HOLD_POLL_MS. A hold is a (session, key) seen held
 * at every poll: pg_locks has no token, so leases of one session on one key with less than a
 * poll between them merge into one (an upper bound on a lease).
 */
class PgHoldWatch implements HoldWatch {
  private readonly holds = new Map<string, { firstMs: number; lastMs: number }>();
  private running = true;
  private readonly loop: Promise<void>;

  private constructor(private readonly client: pg.Client) {
    this.loop = this.run();
  }

  static async start(databaseUrl: string): Promise<PgHoldWatch> {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: 'chaos-harness' });
    client.on('error', () => undefined);
    await client.connect();
    return new PgHoldWatch(client);
  }

  async stop(): Promise<number> {
    this.running = false;
    await this.loop;
    await this.client.end().catch(() => undefined);
    let longest = 0;
    for (const h of this.holds.values()) longest = Math.max(longest, h.lastMs - h.firstMs);
    return Math.round(longest);
  }

  private async run(): Promise<void> {
    while (this.running) {
      const atMs = performance.now();
      try {
        const { rows } = await this.client.query<{ lease: string }>(
          `SELECT l.pid || ':' || l.classid || ':' || l.objid AS lease
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`,
          [LOCK_APPLICATION_NAME],
        );
        for (const { lease } of rows) {
          const hold = this.holds.get(lease);
          if (hold === undefined) this.holds.set(lease, { firstMs: atMs, lastMs: atMs });
          else hold.lastMs = atMs;
        }
      } catch {
        // The server busy or the session ended: read again on the next tick.
      }
      await new Promise((resolve) => setTimeout(resolve, HOLD_POLL_MS));
    }
  }
}

/**
 * Fence increments the lock service lost, measured after the drain: per wallet, how far the
 * highest token the database took (wallets.last_fence) is above what the service would issue
 * next is below. Postgres: the lock_tokens sequence against the raw numbers of the epoch in force
 * (a fence above the sequence is a number the sequence lost: never, unless set back by hand).
 * Redis: each wallet's fence counter against the fence (a counter lost and not raised again).
 */
export async function fenceIncrementsBehind(
  lock: ChaosLockBackend,
  databaseUrl: string,
  redis: RedisClient,
  lockKeyPrefix: string,
): Promise<{ increments: number; wallets: number }> {
  const fences = await withOwner(databaseUrl, async (client) => {
    const { rows } = await client.query<{ id: string; fence: string; epoch: number; last: string }>(
      `SELECT w.id, w.last_fence::text AS fence, e.epoch, (SELECT s.last_value FROM lock_tokens s)::text AS last
         FROM wallets w, lock_epoch_current() e`,
    );
    return rows;
  });
  let increments = 0n;
  let wallets = 0;
  for (const row of fences) {
    const fence = BigInt(row.fence);
    let issued: bigint;
    if (lock === 'postgres') {
      if (row.epoch > LOCK_EPOCH_MAX) throw new RangeError(`lock epoch ${row.epoch} out of range`);
      const base = BigInt(row.epoch) * EPOCH_BASE;
      if (fence < base) continue; // a fence of an older epoch: below every token of this one
      issued = BigInt(row.last);
      const behind = fence - base - issued;
      if (behind > 0n) {
        increments += behind;
        wallets += 1;
      }
      continue;
    }
    issued = BigInt((await redis.get(`${lockKeyPrefix}{wallet:${row.id}}:fence`).catch(() => null)) ?? '0');
    if (fence > issued) {
      increments += fence - issued;
      wallets += 1;
    }
  }
  return { increments: Number(increments), wallets };
}

/** What the backend's row is derived from: the run's figures (report.ts's RunFigures has them all). */
export interface LockRowSource {
  readonly lockBackend?: LockMeasures;
  readonly metrics: Readonly<Record<string, number>>;
  readonly workerLogEvents: Readonly<Record<string, number>>;
  readonly appliedPerSecond: { readonly mean: number };
  readonly faults: { readonly list: readonly { readonly failover?: FailoverFigures }[] };
}

/** The backend's row: one per run, as every run has one lock service. */
export interface LockRow {
  readonly backend: ChaosLockBackend;
  /** Leases the workers' watchdogs gave up (log events lock_lost), and losses found before a commit (metric). */
  readonly leasesLost: number;
  readonly lostBeforeCommit: number;
  /** Decisions the database refused for a stale token (metric stale_fence). */
  readonly staleRefused: number;
  /** Redis: fence increments a lossy failover lost, as measured at the takeover; null without failovers. */
  readonly fenceLostAtFailovers: number | null;
  readonly fenceIncrementsBehind: number | null;
  readonly fenceWalletsBehind: number | null;
  readonly longestHoldMs: number | null;
  readonly appliedPerSecond: number;
}

export function lockRow(f: LockRowSource): LockRow {
  const failovers = f.faults.list.flatMap((r) => (r.failover?.kind === 'lossy' ? [r.failover] : []));
  const m = f.lockBackend;
  return {
    backend: m?.backend ?? 'redis',
    leasesLost: Object.entries(f.workerLogEvents)
      .filter(([k]) => k.startsWith('lock_lost:'))
      .reduce((a, [, n]) => a + n, 0),
    lostBeforeCommit: f.metrics.lock_lost ?? 0,
    staleRefused: f.metrics.stale_fence ?? 0,
    fenceLostAtFailovers: failovers.length === 0 ? null : failovers.reduce((a, fo) => a + fo.fenceIncrementsLost, 0),
    fenceIncrementsBehind: m?.fenceIncrementsBehind ?? null,
    fenceWalletsBehind: m?.fenceWalletsBehind ?? null,
    longestHoldMs: m?.longestHoldMs ?? null,
    appliedPerSecond: f.appliedPerSecond.mean,
  };
}

const orDash = (n: number | null, unit = '') => (n === null ? '—' : `${n}${unit}`);

function fenceCell(r: LockRow): string {
  const behind =
    r.fenceIncrementsBehind === null
      ? 'not measured'
      : `${r.fenceIncrementsBehind} behind at the end (${orDash(r.fenceWalletsBehind)} wallets)`;
  return r.fenceLostAtFailovers === null ? behind : `${r.fenceLostAtFailovers} at failovers; ${behind}`;
}

/** The report's backend table (Markdown). */
export function lockBackendLines(f: LockRowSource): string[] {
  const r = lockRow(f);
  return [
    '## Lock service',
    '',
    "Leases lost: the workers' watchdogs (log event `lock_lost`) / losses found before a commit (metric). " +
      "Fence increments lost: per wallet, how far the database's highest fence is above the last token the service " +
      `issued (Redis: the wallet's counter; PostgreSQL: the lock_tokens sequence, in the epoch in force), after the drain. ` +
      `Longest hold: read every ${HOLD_POLL_MS} ms over the fault phase and the drain; Redis: one lease (its owner id), ` +
      'PostgreSQL: one lock session holding one key without a gap seen (pg_locks carries no token, so back-to-back ' +
      "leases of a worker on a busy wallet count as one: an upper bound on a lease's hold).",
    '',
    '| backend | leases lost / before commit | stale holders refused | fence increments lost | longest hold (ms) | applied/s |',
    '| --- | ---: | ---: | --- | ---: | ---: |',
    `| ${r.backend} | ${r.leasesLost} / ${r.lostBeforeCommit} | ${r.staleRefused} | ${fenceCell(r)} | ${orDash(r.longestHoldMs)} | ${r.appliedPerSecond.toFixed(1)} |`,
    '',
  ];
}

/** The summary's line for the backend (chaos-cli.ts). */
export function lockBackendSummary(f: LockRowSource): string {
  const r = lockRow(f);
  return (
    `  lock ${r.backend}: ${r.leasesLost} leases lost (${r.lostBeforeCommit} before commit), ${r.staleRefused} stale holders refused, ` +
    `fence increments lost ${fenceCell(r)}, longest hold ${orDash(r.longestHoldMs, ' ms')}, ${r.appliedPerSecond.toFixed(1)} applied/s\n`
  );
}
