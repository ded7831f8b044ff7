// The chaos harness's options: what `npm run chaos -- [flags]` accepts, its defaults and limits,
// parsed once into a frozen object. Every other chaos file takes a ChaosOptions.
import { join } from 'node:path';
import { integerFlag, parseFlags } from '../../src/cli/args.ts';
import { ETCD_LOCK_TTL_MS_MIN, QUEUE_SHARDS_MAX, type UnsafeMode } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { UsageError } from '../../src/errors.ts';
import { needsUnsafeDecisions } from './unsafe/unsafe-decisions.ts';

/** Every fault the harness can inject (DESIGN.md, "Faults the harness injects"). */
export const FAULT_KINDS = [
  'kill-worker',
  'pause-worker',
  'delete-locks',
  'delete-fences',
  'restart-redis',
  'terminate-backends',
  'link-delay',
  'link-stall',
  'link-cut',
  'pg-blackhole',
] as const;
/** Faults only a Redis Cluster with replicas has (`--redis cluster`): real failovers. */
export const CLUSTER_FAULT_KINDS = ['failover-lossy', 'kill-master'] as const;
/** Every kind without --intake, in the canonical order schedules are built from. */
export const ALL_FAULT_KINDS = [...FAULT_KINDS, ...CLUSTER_FAULT_KINDS] as const;
/** Faults only an intake run has (`--intake`): its relay processes. */
export const INTAKE_FAULT_KINDS = ['kill-relay'] as const;
/** Faults only the HA PostgreSQL formation has (`--postgres ha`): its primary and standbys. */
export const PG_HA_FAULT_KINDS = ['pg-failover', 'pg-switchover', 'pg-standby-kill'] as const;
/** Faults only the PostgreSQL lock service has (`--lock postgres`): its sessions, which hold the locks. */
export const PG_LOCK_FAULT_KINDS = ['terminate-lock-sessions'] as const;
/**
 * Faults only the etcd lock service has (`--lock etcd`), on the run's private 3-member cluster: a
 * follower killed, the leader killed, a member cut from the workers, a member frozen, two of
 * the three members down at once (no quorum), and the lock keys deleted under their holders (an
 * operator's `etcdctl del`, a restore from an older snapshot: the analogue of delete-locks).
 */
export const ETCD_LOCK_FAULT_KINDS = [
  'etcd-kill-member',
  'etcd-kill-leader',
  'etcd-partition-member',
  'etcd-freeze-member',
  'etcd-quorum-loss',
  'etcd-delete-locks',
] as const;
/** Faults on the Redis lock's keys and counters: with `--lock postgres|etcd` there are none to act on. */
export const REDIS_LOCK_FAULT_KINDS: readonly FaultKind[] = ['delete-locks', 'delete-fences'];
export type FaultKind =
  | (typeof ALL_FAULT_KINDS)[number]
  | (typeof INTAKE_FAULT_KINDS)[number]
  | (typeof PG_HA_FAULT_KINDS)[number]
  | (typeof PG_LOCK_FAULT_KINDS)[number]
  | (typeof ETCD_LOCK_FAULT_KINDS)[number];
export type RedisMode = 'single' | 'cluster';
/** The workers' LOCK_BACKEND (`--lock`). */
export type ChaosLockBackend = 'redis' | 'postgres' | 'etcd';
export const LOCK_CHOICES = ['redis', 'postgres', 'etcd'] as const;
/**
 * The workers' LOCK_TTL_MS on etcd unless `--lock-ttl-ms` says otherwise: four of the run's
 * election timeouts (ETCD_CHAOS_ELECTION_TIMEOUT_MS, chaos-etcd.ts), so an election does not
 * make the workers give up leases etcd keeps; etcd refuses less than 2 s (whole seconds).
 */
export const ETCD_CHAOS_LOCK_TTL_MS = 4_000;
/** The longest `--lock-ttl-ms`. */
export const LOCK_TTL_MS_FLAG_MAX = 60_000;
/** `ha`: a pg_auto_failover formation (a monitor, a primary, two standbys) behind one endpoint. */
export type PostgresMode = 'single' | 'ha';

/** Faults that stop or restart a service: refused when the harness does not own the service. */
export const SERVICE_FAULTS: readonly FaultKind[] = ['restart-redis'];

/**
 * The kinds `all` means: the ten everywhere, plus the failovers on a cluster, plus kill-relay
 * when relays run (an intake run whose producer writes through the intake). With `--lock
 * postgres` the Redis lock's faults give way to the termination of the lock sessions, with
 * `--lock etcd` to the faults of the etcd cluster.
 */
export function faultKindsOf(
  redis: RedisMode,
  relays = false,
  postgres: PostgresMode = 'single',
  lock: ChaosLockBackend = 'redis',
): readonly FaultKind[] {
  const base: readonly FaultKind[] = redis === 'cluster' ? ALL_FAULT_KINDS : FAULT_KINDS;
  const kinds = [...base, ...(relays ? INTAKE_FAULT_KINDS : []), ...(postgres === 'ha' ? PG_HA_FAULT_KINDS : [])];
  if (lock === 'redis') return kinds;
  const own = lock === 'postgres' ? PG_LOCK_FAULT_KINDS : ETCD_LOCK_FAULT_KINDS;
  return [...kinds.filter((k) => !REDIS_LOCK_FAULT_KINDS.includes(k)), ...own];
}

/**
 * The harness's own negative control of the intake: producers add to BullMQ straight, as
 * before the intake, in an intake run (lossy failovers on the queue's masters). Not a worker mode.
 */
export const DIRECT_ENQUEUE = 'direct-enqueue';
/**
 * The harness's negative control of the HA formation: number-sync-standbys 0, synchronous_commit
 * local, and the primary's WAL senders frozen before each pg-failover, so a failover loses the
 * commits the standbys never received. Not a worker mode.
 */
export const ASYNC_STANDBY = 'async-standby';
export type ChaosUnsafeMode = UnsafeMode | typeof DIRECT_ENQUEUE | typeof ASYNC_STANDBY;
export const UNSAFE_CHOICES: readonly ChaosUnsafeMode[] = [
  'no-idempotency',
  'no-fencing',
  'no-lock',
  'double-capture',
  'refund-unbounded',
  'no-credit-limit',
  'no-wallet-status',
  DIRECT_ENQUEUE,
  ASYNC_STANDBY,
];
/** The worker modes that switch a rule of the payment decision off (they need payments in the workload). */
export const PAYMENT_UNSAFE_MODES: readonly ChaosUnsafeMode[] = [
  'double-capture',
  'refund-unbounded',
  'no-credit-limit',
  'no-wallet-status',
];

/** The worker's unsafe mode of a run (direct-enqueue changes the producer, never the worker). */
export function workerUnsafeOf(unsafe: ChaosUnsafeMode | null): UnsafeMode | null {
  return unsafe === DIRECT_ENQUEUE || unsafe === ASYNC_STANDBY ? null : unsafe;
}

/**
 * Whether a run's workers call the negative controls' SQL decisions (apply_transfers_unsafe(),
 * apply_payments_unsafe()): the run then installs them into its scratch database
 * (harness/chaos/unsafe/) and those workers log in as the owner, the only one who may call them.
 */
export function usesUnsafeDecisions(options: Pick<ChaosOptions, 'unsafe' | 'apply'>): boolean {
  const mode = workerUnsafeOf(options.unsafe);
  return options.apply === 'sql' && mode !== null && needsUnsafeDecisions([mode]);
}

/** Relays of an intake run: at most this many. */
export const RELAYS_MAX = 8;
/** Same bound as DB_POOL_MAX. */
export const RELAY_POOL_MAX_LIMIT = 100;
/** Seeds that are a multiple of this run their relays with DB_POOL_MAX=1 unless --relay-pool-max says otherwise. */
export const RELAY_POOL_ONE_EVERY = 3;
export const BOTH_DOORS_MAX = 10_000;

/** The relays' DB_POOL_MAX when --relay-pool-max is not given: 1 on every third seed, else the relay's default. */
export function defaultRelayPoolMax(seed: number): number | null {
  return seed % RELAY_POOL_ONE_EVERY === 0 ? 1 : null;
}
export type ApplyMode = 'sql' | 'naive';

export const WORKERS_MAX = 16;
export const WALLETS_MAX = 100_000;
export const TRANSFERS_MAX = 200_000;
export const DURATION_S_MAX = 3_600;
export const FAULTS_MAX_LIMIT = 10_000;
export const INVALID_MAX = 10_000;
/** Same bound as QUEUE_SHARDS. */
export const CHAOS_QUEUE_SHARDS_MAX = QUEUE_SHARDS_MAX;

export interface ChaosOptions {
  readonly seed: number;
  readonly workers: number;
  /** Jobs one worker process runs at once (WORKER_CONCURRENCY). */
  readonly concurrency: number;
  readonly wallets: number;
  readonly transfers: number;
  /** Extra deliveries of existing operations, as a share of `transfers`. */
  readonly duplicateRate: number;
  /** Messages reusing an operation id with another amount. */
  readonly conflicts: number;
  /** Hostile messages pushed straight onto the queue, bypassing the producer's validation. */
  readonly invalid: number;
  /** Share of transfers leaving wallet 1 (0 = uniform). */
  readonly hotWalletRate: number;
  /** Largest transfer amount in minor units. */
  readonly amountMaxMinor: number;
  readonly faults: readonly FaultKind[];
  /** Length of the fault phase; the workload is enqueued over all of it. */
  readonly durationS: number;
  /** At most this many faults (null: as many as fit, about one per faultIntervalMs). */
  readonly faultsMax: number | null;
  /** Mean gap between two fault starts. */
  readonly faultIntervalMs: number;
  readonly lockTtlMs: number;
  readonly unsafe: ChaosUnsafeMode | null;
  readonly apply: ApplyMode;
  /**
   * An intake run (`--intake`, or `--unsafe direct-enqueue`): producers request transfers through
   * the intake in PostgreSQL transactions, relay processes move them to the queue, lossy
   * failovers may hit the queue shards' own slot groups (at least one does), and the checker
   * adds the intake's and the outcome feed's invariants. With direct-enqueue the producer adds
   * to BullMQ straight instead and no relay runs.
   */
  readonly intake: boolean;
  /** Relay processes of an intake run. */
  readonly relays: number;
  /** INTAKE_RESEND_AFTER_MS of the relays: an undecided transfer sent longer ago is sent again. */
  readonly resendAfterMs: number;
  /**
   * DB_POOL_MAX of the relays; null leaves it unset (the relay's default). Unless given, 1 on every
   * seed that is a multiple of RELAY_POOL_ONE_EVERY (seed 3 of 1–5), null otherwise.
   */
  readonly relayPoolMax: number | null;
  /**
   * Operations of an intake run sent through both doors at once: the same id added to BullMQ
   * straight and requested through the intake, concurrently; every second one with another
   * amount at the straight door. 0 without relays.
   */
  readonly bothDoors: number;
  /** Bound on waiting for the queue to drain after the fault phase; a stuck queue fails the run. */
  readonly drainTimeoutS: number;
  readonly out: string;
  /** `cluster`: a private Redis Cluster of 3 masters with 1 replica each instead of one redis-server. */
  readonly redis: RedisMode;
  /** QUEUE_SHARDS of the run (default 1, and 2 on a cluster: see CHAOS_DEFAULTS). */
  readonly queueShards: number;
  /** Use these servers instead of private ones (service faults are then refused). */
  readonly redisUrl: string | null;
  readonly databaseUrl: string | null;
  /**
   * The workers reach PostgreSQL through a private PgBouncer in transaction mode
   * (DATABASE_POOLER=pgbouncer; harness/services/local-pgbouncer.ts), behind their fault proxies.
   */
  readonly pgbouncer: boolean;
  /**
   * `ha`: the database is a private pg_auto_failover formation (a monitor, a primary and two
   * standbys, number-sync-standbys 1: harness/services/local-pg-formation.ts) that every client
   * reaches through one endpoint following its primary; the pg-failover, pg-switchover and
   * pg-standby-kill faults act on it.
   */
  readonly postgres: PostgresMode;
  /**
   * Mix the payment operations (holds, captures, voids, refunds, splits: chaos-payments.ts) with
   * the transfers (`--payments on`, the default; never with the naive apply).
   */
  readonly payments: boolean;
  /**
   * The workers' LOCK_BACKEND. `postgres`: the run opens a lock epoch for it in its database
   * before the workers start, and each worker's lock session goes through its PostgreSQL proxy.
   * `etcd`: the same epoch, and a private cluster whose members the workers reach through proxies.
   */
  readonly lock: ChaosLockBackend;
  /** Print no progress line. */
  readonly quiet: boolean;
}

export const CHAOS_USAGE = `npm run chaos -- [--seed N] [--workers N] [--concurrency N] [--wallets W] [--transfers T]
    [--duplicates R] [--conflicts K] [--invalid M] [--hot-wallet] [--hot-wallet-rate R] [--amount-max N]
    [--faults kind,kind,...|all|none] [--duration-s S] [--faults-max N] [--fault-interval-ms MS]
    [--lock-ttl-ms MS]
    [--unsafe no-idempotency|no-fencing|no-lock|double-capture|refund-unbounded|no-credit-limit|no-wallet-status|direct-enqueue|async-standby]
    [--apply sql|naive] [--payments on|off]
    [--drain-timeout-s S] [--out DIR] [--redis single|cluster] [--queue-shards N]
    [--intake] [--relays N] [--resend-after-ms MS] [--relay-pool-max N] [--both-doors N]
    [--redis-url URL] [--database-url URL] [--pgbouncer] [--postgres single|ha] [--lock redis|postgres|etcd] [--quiet]
  fault kinds: ${FAULT_KINDS.join(', ')}; with --redis cluster also ${CLUSTER_FAULT_KINDS.join(', ')}; with --intake also ${INTAKE_FAULT_KINDS.join(', ')}; with --postgres ha also ${PG_HA_FAULT_KINDS.join(', ')}; with --lock postgres also ${PG_LOCK_FAULT_KINDS.join(', ')}, with --lock etcd also ${ETCD_LOCK_FAULT_KINDS.join(', ')}; either without ${REDIS_LOCK_FAULT_KINDS.join(', ')}`;

export const CHAOS_DEFAULTS = Object.freeze({
  seed: 1,
  workers: 4,
  concurrency: 8,
  wallets: 50,
  transfers: 5_000,
  duplicateRate: 0.2,
  conflicts: 20,
  invalid: 25,
  hotWalletRate: 0,
  /** With --hot-wallet and no rate. */
  hotWalletRateFlag: 0.5,
  amountMaxMinor: 1_000,
  durationS: 60,
  faultIntervalMs: 2_500,
  lockTtlMs: 1_000,
  drainTimeoutS: 180,
  queueShards: 1,
  relays: 2,
  /** Short, so that re-sends of lost adds happen within the run. */
  resendAfterMs: 3_000,
  /** Operations through both doors in an intake run (half of them with another body at the straight door). */
  bothDoors: 40,
  /**
   * On a cluster: two shards over three slot groups, so at least one group holds lock keys only
   * and the lossy failover can hit it without losing acknowledged queue writes (docs/verification/chaos.md).
   */
  queueShardsCluster: 2,
});

function wholeNumber(raw: string | undefined, flag: string, min: number, max: number, fallback: number): number {
  return raw === undefined ? fallback : integerFlag(raw, flag, min, max);
}

function rate(raw: string | undefined, flag: string, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d*\.?\d+$/.test(raw) || !(value >= 0 && value <= 1)) {
    throw new UsageError(`${flag} must be a number from 0 to 1, got ${JSON.stringify(raw)}`);
  }
  return value;
}

export function parseFaultKinds(
  raw: string | undefined,
  redis: RedisMode = 'single',
  relays = false,
  postgres: PostgresMode = 'single',
  lock: ChaosLockBackend = 'redis',
): FaultKind[] {
  const allowed = faultKindsOf(redis, relays, postgres, lock);
  if (raw === undefined || raw === 'all') return [...allowed];
  if (raw === 'none' || raw === '') return [];
  const kinds = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const kind of kinds) {
    if ((CLUSTER_FAULT_KINDS as readonly string[]).includes(kind) && redis !== 'cluster') {
      throw new UsageError(`fault kind ${kind} needs a cluster with replicas: add --redis cluster`);
    }
    if ((PG_HA_FAULT_KINDS as readonly string[]).includes(kind) && postgres !== 'ha') {
      throw new UsageError(`fault kind ${kind} needs the HA formation: add --postgres ha`);
    }
    if ((INTAKE_FAULT_KINDS as readonly string[]).includes(kind) && !relays) {
      throw new UsageError(`fault kind ${kind} needs relays: add --intake (without --unsafe direct-enqueue)`);
    }
    lockFaultProblem(kind, lock);
    if (!(allowed as readonly string[]).includes(kind)) {
      throw new UsageError(`unknown fault kind ${JSON.stringify(kind)}; expected ${allowed.join(', ')}, all or none`);
    }
  }
  // Canonical order, no repeats: the schedule must not depend on how the list was written.
  return allowed.filter((k) => kinds.includes(k));
}

/** `--payments on|off` (off by default with the naive apply), checked against the apply and the control. */
function parsePayments(raw: string | undefined, apply: ApplyMode, unsafeRaw: string | undefined): boolean {
  const paymentsRaw = raw ?? (apply === 'naive' ? 'off' : 'on');
  if (paymentsRaw !== 'on' && paymentsRaw !== 'off')
    throw new UsageError(`--payments must be on or off, got ${JSON.stringify(paymentsRaw)}`);
  if (paymentsRaw === 'on' && apply === 'naive')
    throw new UsageError('--apply naive decides transfers only: drop --payments on');
  if (paymentsRaw === 'off' && PAYMENT_UNSAFE_MODES.includes(unsafeRaw as ChaosUnsafeMode)) {
    throw new UsageError(`--unsafe ${unsafeRaw} breaks a payment rule: it needs --payments on`);
  }
  if (apply === 'naive' && PAYMENT_UNSAFE_MODES.includes(unsafeRaw as ChaosUnsafeMode)) {
    throw new UsageError(`--unsafe ${unsafeRaw} is a mode of the SQL decision: drop --apply naive`);
  }
  return paymentsRaw === 'on';
}

/** Refuses a fault kind the run's lock service has nothing for. */
function lockFaultProblem(kind: string, lock: ChaosLockBackend): void {
  if ((PG_LOCK_FAULT_KINDS as readonly string[]).includes(kind) && lock !== 'postgres')
    throw new UsageError(`fault kind ${kind} acts on the PostgreSQL lock service: add --lock postgres`);
  if ((ETCD_LOCK_FAULT_KINDS as readonly string[]).includes(kind) && lock !== 'etcd')
    throw new UsageError(`fault kind ${kind} acts on the etcd lock service: add --lock etcd`);
  if ((REDIS_LOCK_FAULT_KINDS as readonly string[]).includes(kind) && lock !== 'redis')
    throw new UsageError(`fault kind ${kind} acts on the Redis lock's keys, which --lock ${lock} has not; drop it`);
}

/** `--lock`: redis (the default), postgres or etcd (a private cluster: chaos-etcd.ts). */
export function parseLockBackend(raw: string | undefined, pgbouncer: boolean): ChaosLockBackend {
  const lock = raw ?? 'redis';
  if (!(LOCK_CHOICES as readonly string[]).includes(lock))
    throw new UsageError(`--lock must be one of ${LOCK_CHOICES.join(', ')}, got ${JSON.stringify(lock)}`);
  if (lock === 'postgres' && pgbouncer)
    throw new UsageError(
      '--lock postgres and --pgbouncer: the lock sessions must reach PostgreSQL itself, which the workers reach through PgBouncer here; drop one',
    );
  return lock as ChaosLockBackend;
}

/** `--lock-ttl-ms`: the default (ETCD_CHAOS_LOCK_TTL_MS on etcd), and never below etcd's minimum there. */
export function parseLockTtlMs(raw: string | undefined, lock: ChaosLockBackend): number {
  const d = CHAOS_DEFAULTS;
  if (lock !== 'etcd') return wholeNumber(raw, '--lock-ttl-ms', 100, LOCK_TTL_MS_FLAG_MAX, d.lockTtlMs);
  return wholeNumber(raw, '--lock-ttl-ms', ETCD_LOCK_TTL_MS_MIN, LOCK_TTL_MS_FLAG_MAX, ETCD_CHAOS_LOCK_TTL_MS);
}

function urlFlag(raw: string | undefined, flag: string, protocols: readonly string[]): string | null {
  if (raw === undefined) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new UsageError(`${flag} is not a valid URL`);
  }
  if (!protocols.includes(parsed.protocol)) throw new UsageError(`${flag} must use ${protocols.join(' or ')}`);
  return raw;
}

/** The default output folder of a run: `.runs/chaos-<seed>-<timestamp>/` under the project. */
export function defaultOutDir(seed: number, now: Date = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  return join(PROJECT_ROOT, '.runs', `chaos-${seed}-${stamp}`);
}

export function parseChaosArgs(argv: string[]): { options: ChaosOptions; notices: string[] } {
  const { values, positionals } = parseFlags(
    argv,
    {
      seed: { type: 'string' },
      workers: { type: 'string' },
      concurrency: { type: 'string' },
      wallets: { type: 'string' },
      transfers: { type: 'string' },
      duplicates: { type: 'string' },
      conflicts: { type: 'string' },
      invalid: { type: 'string' },
      'hot-wallet': { type: 'boolean' },
      'hot-wallet-rate': { type: 'string' },
      'amount-max': { type: 'string' },
      faults: { type: 'string' },
      'duration-s': { type: 'string' },
      'faults-max': { type: 'string' },
      'fault-interval-ms': { type: 'string' },
      'lock-ttl-ms': { type: 'string' },
      unsafe: { type: 'string' },
      apply: { type: 'string' },
      'drain-timeout-s': { type: 'string' },
      out: { type: 'string' },
      'redis-url': { type: 'string' },
      'database-url': { type: 'string' },
      redis: { type: 'string' },
      'queue-shards': { type: 'string' },
      pgbouncer: { type: 'boolean' },
      postgres: { type: 'string' },
      intake: { type: 'boolean' },
      relays: { type: 'string' },
      'resend-after-ms': { type: 'string' },
      'relay-pool-max': { type: 'string' },
      'both-doors': { type: 'string' },
      quiet: { type: 'boolean' },
      payments: { type: 'string' },
      lock: { type: 'string' },
    },
    CHAOS_USAGE,
  );
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[0])}\nusage: ${CHAOS_USAGE}`);

  const notices: string[] = [];
  const d = CHAOS_DEFAULTS;
  const seed = wholeNumber(values.seed, '--seed', 0, 2 ** 32 - 1, d.seed);
  const transfers = wholeNumber(values.transfers, '--transfers', 1, TRANSFERS_MAX, d.transfers);
  const unsafeRaw = values.unsafe;
  if (unsafeRaw !== undefined && !(UNSAFE_CHOICES as readonly string[]).includes(unsafeRaw)) {
    throw new UsageError(`--unsafe must be one of ${UNSAFE_CHOICES.join(', ')}, got ${JSON.stringify(unsafeRaw)}`);
  }
  const apply = values.apply ?? 'sql';
  if (apply !== 'sql' && apply !== 'naive')
    throw new UsageError(`--apply must be sql or naive, got ${JSON.stringify(apply)}`);
  if (apply === 'naive' && unsafeRaw === 'no-lock') {
    throw new UsageError(
      '--apply naive runs under the lock by definition; combine it with --unsafe no-fencing or nothing',
    );
  }

  const payments = parsePayments(values.payments, apply, unsafeRaw);

  const redis = values.redis ?? 'single';
  if (redis !== 'single' && redis !== 'cluster')
    throw new UsageError(`--redis must be single or cluster, got ${JSON.stringify(redis)}`);
  const redisUrl = urlFlag(values['redis-url'], '--redis-url', ['redis:', 'rediss:']);
  if (redis === 'cluster' && redisUrl !== null) {
    throw new UsageError(
      '--redis cluster starts a private cluster (its failovers need servers the harness owns); drop --redis-url',
    );
  }
  const databaseUrl = urlFlag(values['database-url'], '--database-url', ['postgresql:', 'postgres:']);
  const postgres = values.postgres ?? 'single';
  if (postgres !== 'single' && postgres !== 'ha')
    throw new UsageError(`--postgres must be single or ha, got ${JSON.stringify(postgres)}`);
  if (postgres === 'ha' && databaseUrl !== null)
    throw new UsageError(
      '--postgres ha starts a private formation (its failovers need servers the harness owns); drop --database-url',
    );
  if (postgres === 'ha' && values.pgbouncer === true)
    throw new UsageError('--postgres ha and --pgbouncer: the formation is reached through its own endpoint; drop one');
  if (unsafeRaw === ASYNC_STANDBY && postgres !== 'ha')
    throw new UsageError('--unsafe async-standby is a setting of the HA formation: add --postgres ha');
  const harnessUnsafe = unsafeRaw === DIRECT_ENQUEUE || unsafeRaw === ASYNC_STANDBY;
  const direct = unsafeRaw === DIRECT_ENQUEUE;
  const intake = values.intake === true || direct;
  if (direct && redis !== 'cluster') {
    throw new UsageError(
      '--unsafe direct-enqueue loses adds in lossy failovers of the queue masters: add --redis cluster',
    );
  }
  if (intake && (apply === 'naive' || (unsafeRaw !== undefined && !harnessUnsafe))) {
    throw new UsageError(
      '--intake runs the standard worker: drop --apply naive and --unsafe (but direct-enqueue and async-standby)',
    );
  }
  if (intake && redisUrl !== null) throw new UsageError('--intake starts its own services: drop --redis-url');
  const lock = parseLockBackend(values.lock, values.pgbouncer === true);
  let faults = parseFaultKinds(values.faults, redis, intake && !direct, postgres, lock);
  if (redisUrl !== null) {
    const refused = faults.filter((k) => SERVICE_FAULTS.includes(k));
    if (refused.length > 0) {
      if (values.faults !== undefined && values.faults !== 'all') {
        throw new UsageError(
          `--faults ${refused.join(',')} restarts Redis, which the harness does not own with --redis-url; drop it`,
        );
      }
      notices.push(`--redis-url given: ${refused.join(', ')} left out (the harness only restarts servers it started)`);
      faults = faults.filter((k) => !SERVICE_FAULTS.includes(k));
    }
  }

  const relaysRun = intake && !direct;
  for (const flag of ['relay-pool-max', 'both-doors'] as const) {
    if (values[flag] !== undefined && !relaysRun) {
      throw new UsageError(`--${flag} needs relays: add --intake (without --unsafe direct-enqueue)`);
    }
  }

  let hotWalletRate = rate(values['hot-wallet-rate'], '--hot-wallet-rate', d.hotWalletRate);
  if (values['hot-wallet'] === true && values['hot-wallet-rate'] === undefined) hotWalletRate = d.hotWalletRateFlag;

  const options: ChaosOptions = {
    seed,
    workers: wholeNumber(values.workers, '--workers', 1, WORKERS_MAX, d.workers),
    concurrency: wholeNumber(values.concurrency, '--concurrency', 1, 64, d.concurrency),
    wallets: wholeNumber(values.wallets, '--wallets', 2, WALLETS_MAX, d.wallets),
    transfers,
    duplicateRate: rate(values.duplicates, '--duplicates', d.duplicateRate),
    conflicts: wholeNumber(values.conflicts, '--conflicts', 0, transfers, Math.min(d.conflicts, transfers)),
    invalid: wholeNumber(values.invalid, '--invalid', 0, INVALID_MAX, d.invalid),
    hotWalletRate,
    amountMaxMinor: wholeNumber(values['amount-max'], '--amount-max', 1, 1_000_000_000, d.amountMaxMinor),
    faults,
    durationS: wholeNumber(values['duration-s'], '--duration-s', 5, DURATION_S_MAX, d.durationS),
    faultsMax:
      values['faults-max'] === undefined
        ? null
        : wholeNumber(values['faults-max'], '--faults-max', 0, FAULTS_MAX_LIMIT, 0),
    faultIntervalMs: wholeNumber(values['fault-interval-ms'], '--fault-interval-ms', 100, 600_000, d.faultIntervalMs),
    lockTtlMs: parseLockTtlMs(values['lock-ttl-ms'], lock),
    unsafe: (unsafeRaw ?? null) as ChaosUnsafeMode | null,
    apply,
    drainTimeoutS: wholeNumber(values['drain-timeout-s'], '--drain-timeout-s', 5, 3_600, d.drainTimeoutS),
    out: values.out ?? defaultOutDir(seed),
    redis,
    queueShards: wholeNumber(
      values['queue-shards'],
      '--queue-shards',
      1,
      CHAOS_QUEUE_SHARDS_MAX,
      redis === 'cluster' ? d.queueShardsCluster : d.queueShards,
    ),
    redisUrl,
    databaseUrl,
    pgbouncer: values.pgbouncer === true,
    postgres,
    intake,
    relays: relaysRun ? wholeNumber(values.relays, '--relays', 1, RELAYS_MAX, d.relays) : 0,
    resendAfterMs: wholeNumber(values['resend-after-ms'], '--resend-after-ms', 100, 600_000, d.resendAfterMs),
    relayPoolMax: !relaysRun
      ? null
      : values['relay-pool-max'] === undefined
        ? defaultRelayPoolMax(seed)
        : integerFlag(values['relay-pool-max'], '--relay-pool-max', 1, RELAY_POOL_MAX_LIMIT),
    bothDoors: relaysRun ? wholeNumber(values['both-doors'], '--both-doors', 0, BOTH_DOORS_MAX, d.bothDoors) : 0,
    payments,
    lock,
    quiet: values.quiet === true,
  };
  return { options: Object.freeze(options), notices };
}

/** The options a test or a script gets without parsing flags: the defaults, overridden. */
export function chaosOptions(overrides: Partial<ChaosOptions> = {}): ChaosOptions {
  const d = CHAOS_DEFAULTS;
  const seed = overrides.seed ?? d.seed;
  const relays = overrides.intake === true && overrides.unsafe !== DIRECT_ENQUEUE ? d.relays : 0;
  return Object.freeze({
    seed,
    workers: d.workers,
    concurrency: d.concurrency,
    wallets: d.wallets,
    transfers: d.transfers,
    duplicateRate: d.duplicateRate,
    conflicts: d.conflicts,
    invalid: d.invalid,
    hotWalletRate: d.hotWalletRate,
    amountMaxMinor: d.amountMaxMinor,
    faults: [
      ...faultKindsOf(
        overrides.redis ?? 'single',
        (overrides.relays ?? relays) > 0,
        overrides.postgres ?? 'single',
        overrides.lock ?? 'redis',
      ),
    ],
    durationS: d.durationS,
    faultsMax: null,
    faultIntervalMs: d.faultIntervalMs,
    lockTtlMs: overrides.lock === 'etcd' ? ETCD_CHAOS_LOCK_TTL_MS : d.lockTtlMs,
    unsafe: null,
    apply: 'sql' as ApplyMode,
    drainTimeoutS: d.drainTimeoutS,
    out: defaultOutDir(seed),
    redis: 'single' as RedisMode,
    queueShards: overrides.redis === 'cluster' ? d.queueShardsCluster : d.queueShards,
    redisUrl: null,
    databaseUrl: null,
    pgbouncer: false,
    postgres: 'single' as PostgresMode,
    intake: false,
    relays,
    resendAfterMs: d.resendAfterMs,
    relayPoolMax: relays > 0 ? defaultRelayPoolMax(seed) : null,
    bothDoors: relays > 0 ? d.bothDoors : 0,
    payments: overrides.apply !== 'naive',
    lock: 'redis' as ChaosLockBackend,
    quiet: false,
    ...overrides,
  });
}
