// The run's lock service (`--lock redis|postgres|etcd`): what the workers are told (LOCK_BACKEND,
// LOCK_DATABASE_URL, ETCD_ENDPOINTS), the lock epoch a postgres or etcd run opens before they
// start, the terminate-lock-sessions fault, the watch on how long a wallet stays held, and the
// backend's row of the report (lock losses, stale holders refused, fence increments lost, longest
// hold, throughput). The etcd cluster itself, its hold watch and its faults: chaos-etcd.ts, etcd-faults.ts.
import pg from 'pg';
import { openLockEpoch } from '../../src/lock/lock-epochs.ts';
import { LOCK_EPOCH_MAX } from '../../src/lock/lock-service.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import { type ChaosEtcd, EtcdHoldWatch } from './chaos-etcd.ts';
import type { ChaosLockBackend } from './chaos-options.ts';
import type { EtcdFaultFigures } from './etcd-faults.ts';
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
 * `--pgbouncer` (chaos-options.ts). Etcd: the proxies in front of the run's members (chaos-etcd.ts).
 */
export function lockEnv(
  lock: ChaosLockBackend,
  workerDatabaseUrl: string,
  etcdEndpoints: readonly string[] = [],
): Record<string, string> {
  if (lock === 'redis') return {};
  if (lock === 'etcd') {
    if (etcdEndpoints.length === 0) throw new Error('--lock etcd: the run has no etcd cluster');
    return { LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: etcdEndpoints.join(',') };
  }
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

/** A postgres or etcd run's epoch, opened as the owner before any worker starts (a worker refuses another epoch's backend). */
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

/** Where a run's lock service is read from: its database, its Redis, its etcd cluster (an etcd run). */
export interface LockServiceTargets {
  readonly databaseUrl: string;
  readonly redis: RedisClient;
  readonly lockKeyPrefix: string;
  readonly etcd: ChaosEtcd | null;
}

function requireEtcd(t: LockServiceTargets): ChaosEtcd {
  if (t.etcd === null) throw new Error('--lock etcd: the run has no etcd cluster');
  return t.etcd;
}

/**
 * Redis: the lock keys (BlackholeWatch over every worker); postgres: the lock sessions' advisory
 * locks in pg_locks; etcd: the lock keys' create revisions (EtcdHoldWatch).
 */
export async function startHoldWatch(
  lock: ChaosLockBackend,
  t: LockServiceTargets,
  lockTtlMs: number,
): Promise<HoldWatch> {
  if (lock === 'redis') {
    const watch = BlackholeWatch.startForEveryWorker(t.redis, t.lockKeyPrefix, lockTtlMs);
    return { stop: async () => (await watch.stop()).longestHoldMs };
  }
  if (lock === 'etcd') return new EtcdHoldWatch(requireEtcd(t), t.lockKeyPrefix);
  return PgHoldWatch.start(t.databaseUrl);
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
 * highest token the database took (wallets.last_fence) is above the last number the service
 * issued. Postgres: the lock_tokens sequence against the raw numbers of the epoch in force (a
 * fence above the sequence is a number the sequence lost: never, unless set back by hand). Etcd:
 * the cluster's current revision, read after the fences, against the same raw numbers (a token is
 * a create revision, so a fence above the revision means etcd set its revision back: never,
 * unless rebuilt from nothing). Redis: each wallet's fence counter against the fence (a counter
 * lost and not raised again).
 */
export async function fenceIncrementsBehind(
  lock: ChaosLockBackend,
  t: LockServiceTargets,
): Promise<{ increments: number; wallets: number }> {
  const fences = await withOwner(t.databaseUrl, async (client) => {
    const { rows } = await client.query<{ id: string; fence: string; epoch: number; last: string }>(
      `SELECT w.id, w.last_fence::text AS fence, e.epoch, (SELECT s.last_value FROM lock_tokens s)::text AS last
         FROM wallets w, lock_epoch_current() e`,
    );
    return rows;
  });
  const revision = lock === 'etcd' ? await requireEtcd(t).revision() : null;
  let increments = 0n;
  let wallets = 0;
  for (const row of fences) {
    const fence = BigInt(row.fence);
    let behind: bigint;
    if (lock === 'redis') {
      const key = `${t.lockKeyPrefix}{wallet:${row.id}}:fence`;
      behind = fence - BigInt((await t.redis.get(key).catch(() => null)) ?? '0');
    } else {
      if (row.epoch > LOCK_EPOCH_MAX) throw new RangeError(`lock epoch ${row.epoch} out of range`);
      const base = BigInt(row.epoch) * EPOCH_BASE;
      if (fence < base) continue; // a fence of an older epoch: below every token of this one
      behind = fence - base - (revision ?? BigInt(row.last));
    }
    if (behind > 0n) {
      increments += behind;
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
  readonly faults: { readonly list: readonly LockFaultSource[] };
}

/** What the backend's lines read of a fault record (faults.ts's FaultRecord). */
export interface LockFaultSource {
  readonly kind?: string;
  readonly failover?: FailoverFigures;
  readonly etcd?: EtcdFaultFigures;
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
      "issued (Redis: the wallet's counter; PostgreSQL: the lock_tokens sequence; etcd: the cluster's revision; " +
      'the last two in the epoch in force), after the drain. ' +
      `Longest hold: read every ${HOLD_POLL_MS} ms over the fault phase and the drain; Redis: one lease (its owner id), ` +
      'etcd: one lock key of one create revision (one lease), first seen to last seen; ' +
      'PostgreSQL: one lock session holding one key without a gap seen (pg_locks carries no token, so back-to-back ' +
      "leases of a worker on a busy wallet count as one: an upper bound on a lease's hold).",
    '',
    '| backend | leases lost / before commit | stale holders refused | fence increments lost | longest hold (ms) | applied/s |',
    '| --- | ---: | ---: | --- | ---: | ---: |',
    `| ${r.backend} | ${r.leasesLost} / ${r.lostBeforeCommit} | ${r.staleRefused} | ${fenceCell(r)} | ${orDash(r.longestHoldMs)} | ${r.appliedPerSecond.toFixed(1)} |`,
    '',
  ];
}

/** The summary's line for the backend (chaos-cli.ts), and on etcd one for its cluster's faults. */
export function lockBackendSummary(f: LockRowSource): string {
  const r = lockRow(f);
  return (
    `  lock ${r.backend}: ${r.leasesLost} leases lost (${r.lostBeforeCommit} before commit), ${r.staleRefused} stale holders refused, ` +
    `fence increments lost ${fenceCell(r)}, longest hold ${orDash(r.longestHoldMs, ' ms')}, ${r.appliedPerSecond.toFixed(1)} applied/s\n` +
    (r.backend === 'etcd' ? etcdFaultsSummary(f.faults.list) : '')
  );
}

/** The etcd faults by kind, the elections' lengths, and each quorum loss's readiness. */
export function etcdFaultsSummary(list: readonly LockFaultSource[]): string {
  const etcd = list.filter((x) => x.kind?.startsWith('etcd-') === true);
  const byKind = new Map<string, number>();
  for (const x of etcd) byKind.set(x.kind as string, (byKind.get(x.kind as string) ?? 0) + 1);
  const kinds = [...byKind].map(([k, n]) => `${k.slice('etcd-'.length)} ${n}`).join(', ');
  const elections = etcd.flatMap((x) =>
    x.kind === 'etcd-kill-leader' && x.etcd?.noLeaderMs !== undefined ? [`${x.etcd.noLeaderMs}`] : [],
  );
  const quorum = etcd.flatMap((x) => {
    const q = x.etcd?.fleet;
    if (x.kind !== 'etcd-quorum-loss') return [];
    if (q === undefined) return ['not back'];
    const again = q.readyAgainAfterMs === null ? 'not all ready again' : `ready again +${q.readyAgainAfterMs} ms`;
    return [`${x.etcd?.noQuorumMs} ms, ${q.workersNotReady}/${q.workersAnswering} not ready, ${again}`];
  });
  return (
    `  etcd faults: ${kinds === '' ? 'none' : kinds}` +
    (elections.length === 0 ? '' : `; leader killed → new leader after ${elections.join(', ')} ms`) +
    (quorum.length === 0 ? '' : `; quorum lost: ${quorum.join('; ')}`) +
    '\n'
  );
}
