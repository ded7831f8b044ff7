// Reads and validates the environment once, at start, into a typed and frozen object.
// Nothing else in the service reads process.env: pass the Config (or a piece of it) down.

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { isAbsolute, resolve } from 'node:path';
import { PROJECT_ROOT } from './paths.ts';

/**
 * Negative controls. The first three switch a layer of the transfer decision off; the last two
 * switch an operational guarantee off: `no-readiness` takes jobs without waiting for the servers
 * and the migrations, `no-graceful-shutdown` exits on SIGTERM without finishing the jobs in hand.
 */
export type UnsafeMode = 'no-idempotency' | 'no-fencing' | 'no-lock' | 'no-readiness' | 'no-graceful-shutdown';
const UNSAFE_MODES: readonly UnsafeMode[] = [
  'no-idempotency',
  'no-fencing',
  'no-lock',
  'no-readiness',
  'no-graceful-shutdown',
];

/** One Redis Cluster node as given in REDIS_CLUSTER_NODES or REDIS_CLUSTER_NAT_MAP. */
export interface RedisNodeAddress {
  readonly host: string;
  readonly port: number;
}

/** Cluster mode: the seed nodes and, when nodes announce addresses the client cannot reach, where to reach them. */
export interface RedisClusterConfig {
  readonly nodes: readonly RedisNodeAddress[];
  /** `announcedHost:port` → the address to connect to instead (ioredis natMap). */
  readonly natMap: Readonly<Record<string, RedisNodeAddress>>;
}

/** Seed nodes and NAT entries accepted at most; a cluster has at most ~1000 nodes and a handful of seeds suffice. */
export const REDIS_CLUSTER_NODES_MAX = 64;
/** Queue shards at most (QUEUE_SHARDS); each is one BullMQ queue, consumed by every worker that lists it. */
export const QUEUE_SHARDS_MAX = 64;

export interface Config {
  readonly databaseUrl: string;
  /**
   * Single-node Redis. In cluster mode only its credentials (user, password) are used, for
   * every node; the addresses come from redisCluster.
   */
  readonly redisUrl: string;
  /** PEM file of the CA that signed the Redis server's certificate (rediss:// only); null: the system's CAs. */
  readonly redisTlsCaFile: string | null;
  /** Null: one Redis at redisUrl (the default). Set: an ioredis Cluster over these nodes. */
  readonly redisCluster: RedisClusterConfig | null;
  /** Base name of the queue; shard 0 carries it unchanged (see src/queue/queue-shards.ts). */
  readonly queueName: string;
  /** Queues the producer spreads transfers over, by a stable hash of the source wallet. */
  readonly queueShards: number;
  /** Shard indexes this process consumes (workers); every shard unless QUEUE_SHARDS_CONSUMED lists some. */
  readonly queueShardsConsumed: readonly number[];
  /** Prefix of every Redis key the lock writes (`<prefix>{wallet:<id>}:lock`). */
  readonly lockKeyPrefix: string;
  readonly lockTtlMs: number;
  readonly workerConcurrency: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly transferAmountMax: bigint;
  /** Connections in one process's PostgreSQL pool. */
  readonly dbPoolMax: number;
  readonly dbStatementTimeoutMs: number;
  readonly dbLockTimeoutMs: number;
  readonly dbIdleInTransactionTimeoutMs: number;
  /** Attempts BullMQ makes of one job before it lands in the failed set. */
  readonly jobAttemptsMax: number;
  /** BullMQ's own lease on an active job; a dead worker's jobs are re-queued after about this long. */
  readonly jobLockDurationMs: number;
  /** How often workers look for stalled jobs (whose worker died). */
  readonly jobStalledIntervalMs: number;
  /** Transfers decided together in one round trip and one commit; 1 = one transfer per commit. */
  readonly transferBatchMax: number;
  /** How long a transfer may wait for company before its batch is sent anyway. */
  readonly transferBatchWaitMs: number;
  /** Batches one process may have at the database at once (each holds one pooled connection). */
  readonly transferBatchesInFlightMax: number;
  /**
   * How long after acquiring a wallet's lock a process still lets more of its jobs for that
   * wallet ride on the same lease; 0 = every job takes the lock itself.
   */
  readonly lockRideMsMax: number;
  /** Layers switched off for the chaos harness's negative controls; empty in production. */
  readonly unsafe: readonly UnsafeMode[];
  /** Address `npm run dashboard` listens on: an IP address or `localhost`. */
  readonly dashboardHost: string;
  /** Its TCP port; 0 takes any free port (the command logs the one it got). */
  readonly dashboardPort: number;
  /** When true the dashboard only shows: retry, clean, pause, add, remove and the like are refused. */
  readonly dashboardReadOnly: boolean;
  /**
   * The worker entry that the demo, the chaos harness and the tests start as child processes:
   * the TypeScript source (run through tsx) or the compiled `dist/cli/worker.js` (plain node).
   */
  readonly workerEntry: string;
  /**
   * Port of the worker's HTTP server (/healthz, /readyz, /metrics); null when METRICS_PORT=off;
   * 0 for any free port (the port bound is in the worker's log, and reported to a parent process
   * that started it with an IPC channel: src/harness/fleet/worker-processes.ts).
   */
  readonly metricsPort: number | null;
  /** Address that server listens on. */
  readonly metricsHost: string;
  /** How long a starting worker waits for Redis, PostgreSQL and the migrations before it gives up. */
  readonly startupTimeoutMs: number;
  /** How long a stopping worker gives the jobs in hand before it exits anyway (non-zero). */
  readonly shutdownTimeoutMs: number;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}

export const CONFIG_DEFAULTS = Object.freeze({
  DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/transfers',
  REDIS_URL: 'redis://127.0.0.1:6379',
  REDIS_TLS_CA_FILE: '',
  REDIS_CLUSTER_NODES: '',
  REDIS_CLUSTER_NAT_MAP: '',
  QUEUE_NAME: 'transfers',
  QUEUE_SHARDS: '1',
  QUEUE_SHARDS_CONSUMED: '',
  LOCK_KEY_PREFIX: 'ft:',
  LOCK_TTL_MS: '10000',
  WORKER_CONCURRENCY: '32',
  LOG_LEVEL: 'info',
  TRANSFER_AMOUNT_MAX: '1000000000000000',
  DB_POOL_MAX: '8',
  DB_STATEMENT_TIMEOUT_MS: '5000',
  DB_LOCK_TIMEOUT_MS: '2000',
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: '5000',
  JOB_ATTEMPTS_MAX: '20',
  JOB_LOCK_DURATION_MS: '30000',
  JOB_STALLED_INTERVAL_MS: '30000',
  TRANSFER_BATCH_MAX: '64',
  TRANSFER_BATCH_WAIT_MS: '2',
  TRANSFER_BATCHES_IN_FLIGHT_MAX: '4',
  LOCK_RIDE_MS_MAX: '250',
  TRANSFERS_UNSAFE: '',
  DASHBOARD_HOST: '127.0.0.1',
  DASHBOARD_PORT: '3000',
  DASHBOARD_READ_ONLY: 'true',
  WORKER_ENTRY: 'src/cli/worker.ts',
  METRICS_PORT: '9464',
  METRICS_HOST: '0.0.0.0',
  STARTUP_TIMEOUT_MS: '30000',
  SHUTDOWN_TIMEOUT_MS: '20000',
});

/** Upper bound of TRANSFER_BATCH_MAX; apply_transfers() refuses larger calls (APPLY_BATCH_LIMIT). */
export const TRANSFER_BATCH_MAX_LIMIT = 1_000;
/**
 * Upper bounds of the other batching and riding settings, here and in the classes that take
 * them (DecisionBatcher, SharedLeases): a typo cannot ask for a wait of minutes.
 */
export const TRANSFER_BATCH_WAIT_MS_LIMIT = 1_000;
export const TRANSFER_BATCHES_IN_FLIGHT_LIMIT = 100;
export const LOCK_RIDE_MS_MAX_LIMIT = 60_000;

/** The METRICS_PORT value that switches the worker's HTTP server off. */
export const METRICS_PORT_OFF = 'off';

type Env = Readonly<Record<string, string | undefined>>;

function read(env: Env, name: keyof typeof CONFIG_DEFAULTS): string {
  const value = env[name];
  return value === undefined || value === '' ? CONFIG_DEFAULTS[name] : value;
}

function integer(env: Env, name: keyof typeof CONFIG_DEFAULTS, min: number, max: number): number {
  const raw = read(env, name);
  if (!/^\d+$/.test(raw)) {
    throw new ConfigError(name, `expected a whole number between ${min} and ${max}, got ${JSON.stringify(raw)}`);
  }
  const value = Number(raw);
  if (value < min || value > max) {
    throw new ConfigError(name, `expected a whole number between ${min} and ${max}, got ${raw}`);
  }
  return value;
}

function url(env: Env, name: keyof typeof CONFIG_DEFAULTS, protocols: readonly string[]): string {
  const raw = read(env, name);
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `not a valid URL (expected ${protocols.map((p) => `${p}//host:port`).join(' or ')})`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(
      name,
      `unsupported scheme ${JSON.stringify(parsed.protocol)}; expected ${protocols.join(' or ')}`,
    );
  }
  if (parsed.hostname === '') {
    throw new ConfigError(name, 'the URL names no host');
  }
  if (parsed.port !== '' && !(Number(parsed.port) >= 1 && Number(parsed.port) <= 65535)) {
    throw new ConfigError(name, `port out of range: ${parsed.port}`);
  }
  return raw;
}

/** libpq's sslmode values; pg reads `prefer`, `require` and `verify-ca` as `verify-full`. */
const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'] as const;
const PEM_CERTIFICATE = '-----BEGIN CERTIFICATE-----';

/** A PEM certificate file that exists and can be read; `variable` names where it came from. */
function certificateFile(variable: string, path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      variable,
      `cannot read ${JSON.stringify(path)}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  if (!text.includes(PEM_CERTIFICATE))
    throw new ConfigError(variable, `${JSON.stringify(path)} holds no PEM certificate`);
  return path;
}

/** DATABASE_URL's TLS parameters, checked here so a typo is one clear line, not a pg stack trace. */
function databaseTls(databaseUrl: string): void {
  const params = new URL(databaseUrl).searchParams;
  const mode = params.get('sslmode');
  if (mode !== null && !(SSL_MODES as readonly string[]).includes(mode)) {
    throw new ConfigError('DATABASE_URL', `unknown sslmode ${JSON.stringify(mode)}; expected ${SSL_MODES.join(', ')}`);
  }
  for (const file of ['sslrootcert', 'sslcert', 'sslkey']) {
    const path = params.get(file);
    if (path === null) continue;
    if (file === 'sslkey') {
      try {
        readFileSync(path);
      } catch (err) {
        throw new ConfigError(
          'DATABASE_URL',
          `${file}: cannot read ${JSON.stringify(path)}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        );
      }
    } else {
      certificateFile(`DATABASE_URL (${file})`, path);
    }
  }
}

function name(env: Env, variable: keyof typeof CONFIG_DEFAULTS, pattern: RegExp, what: string): string {
  const raw = read(env, variable);
  if (!pattern.test(raw)) throw new ConfigError(variable, `expected ${what}, got ${JSON.stringify(raw)}`);
  return raw;
}

function booleanFlag(env: Env, variable: keyof typeof CONFIG_DEFAULTS): boolean {
  const raw = read(env, variable);
  if (raw !== 'true' && raw !== 'false')
    throw new ConfigError(variable, `expected true or false, got ${JSON.stringify(raw)}`);
  return raw === 'true';
}

function listenHost(env: Env, variable: keyof typeof CONFIG_DEFAULTS): string {
  const raw = read(env, variable);
  if (raw !== 'localhost' && isIP(raw) === 0) {
    throw new ConfigError(
      variable,
      `expected an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost, got ${JSON.stringify(raw)}`,
    );
  }
  return raw;
}

function metricsPort(env: Env): number | null {
  const raw = read(env, 'METRICS_PORT');
  if (raw === METRICS_PORT_OFF) return null;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) > 65_535) {
    throw new ConfigError(
      'METRICS_PORT',
      `expected a port between 0 (any free port) and 65535, or "${METRICS_PORT_OFF}", got ${JSON.stringify(raw)}`,
    );
  }
  return Number(raw);
}

/** `host:port` with a DNS name, an IPv4 address or a bracketed IPv6 address. */
const NODE_ADDRESS_PATTERN = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})$/;

function nodeAddress(variable: string, raw: string): RedisNodeAddress {
  const match = NODE_ADDRESS_PATTERN.exec(raw);
  const port = Number(match?.[2]);
  if (match === null || !(port >= 1 && port <= 65535)) {
    throw new ConfigError(variable, `expected host:port (port 1-65535), got ${JSON.stringify(raw)}`);
  }
  return { host: (match[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
}

function list(env: Env, variable: keyof typeof CONFIG_DEFAULTS): string[] {
  const raw = read(env, variable).trim();
  return raw === '' ? [] : raw.split(',').map((s) => s.trim());
}

function redisCluster(env: Env): RedisClusterConfig | null {
  const nodesRaw = list(env, 'REDIS_CLUSTER_NODES');
  const natRaw = list(env, 'REDIS_CLUSTER_NAT_MAP');
  if (nodesRaw.length === 0) {
    if (natRaw.length > 0) throw new ConfigError('REDIS_CLUSTER_NAT_MAP', 'only applies with REDIS_CLUSTER_NODES');
    return null;
  }
  if (nodesRaw.length > REDIS_CLUSTER_NODES_MAX) {
    throw new ConfigError('REDIS_CLUSTER_NODES', `at most ${REDIS_CLUSTER_NODES_MAX} nodes, got ${nodesRaw.length}`);
  }
  const nodes = nodesRaw.map((raw) => nodeAddress('REDIS_CLUSTER_NODES', raw));
  const seen = new Set<string>();
  for (const n of nodes) {
    const key = `${n.host}:${n.port}`;
    if (seen.has(key)) throw new ConfigError('REDIS_CLUSTER_NODES', `${key} is listed twice`);
    seen.add(key);
  }
  if (natRaw.length > REDIS_CLUSTER_NODES_MAX) {
    throw new ConfigError('REDIS_CLUSTER_NAT_MAP', `at most ${REDIS_CLUSTER_NODES_MAX} entries, got ${natRaw.length}`);
  }
  const natMap: Record<string, RedisNodeAddress> = {};
  for (const entry of natRaw) {
    const parts = entry.split('=');
    if (parts.length !== 2)
      throw new ConfigError(
        'REDIS_CLUSTER_NAT_MAP',
        `expected announced-host:port=reachable-host:port, got ${JSON.stringify(entry)}`,
      );
    const from = nodeAddress('REDIS_CLUSTER_NAT_MAP', parts[0] as string);
    const key = `${from.host}:${from.port}`;
    if (key in natMap) throw new ConfigError('REDIS_CLUSTER_NAT_MAP', `${key} is mapped twice`);
    natMap[key] = Object.freeze(nodeAddress('REDIS_CLUSTER_NAT_MAP', parts[1] as string));
  }
  return Object.freeze({ nodes: Object.freeze(nodes.map((n) => Object.freeze(n))), natMap: Object.freeze(natMap) });
}

function shardsConsumed(env: Env, shards: number): readonly number[] {
  const raw = list(env, 'QUEUE_SHARDS_CONSUMED');
  if (raw.length === 0) return Object.freeze(Array.from({ length: shards }, (_, i) => i));
  const out = new Set<number>();
  for (const item of raw) {
    if (!/^\d{1,3}$/.test(item) || Number(item) >= shards) {
      throw new ConfigError(
        'QUEUE_SHARDS_CONSUMED',
        `expected shard indexes from 0 to ${shards - 1} (QUEUE_SHARDS=${shards}), got ${JSON.stringify(item)}`,
      );
    }
    if (out.has(Number(item))) throw new ConfigError('QUEUE_SHARDS_CONSUMED', `shard ${item} is listed twice`);
    out.add(Number(item));
  }
  return Object.freeze([...out].sort((a, b) => a - b));
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export function loadConfig(env: Env = process.env): Config {
  const logLevel = read(env, 'LOG_LEVEL');
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }

  const amountMaxRaw = read(env, 'TRANSFER_AMOUNT_MAX');
  if (!/^[1-9]\d{0,17}$/.test(amountMaxRaw)) {
    throw new ConfigError(
      'TRANSFER_AMOUNT_MAX',
      `expected a positive integer below 10^18, got ${JSON.stringify(amountMaxRaw)}`,
    );
  }

  const unsafeRaw = read(env, 'TRANSFERS_UNSAFE');
  const unsafe = unsafeRaw === '' ? [] : unsafeRaw.split(',').map((s) => s.trim());
  for (const mode of unsafe) {
    if (!(UNSAFE_MODES as readonly string[]).includes(mode)) {
      throw new ConfigError(
        'TRANSFERS_UNSAFE',
        `unknown mode ${JSON.stringify(mode)}; expected ${UNSAFE_MODES.join(', ')}`,
      );
    }
  }
  if (unsafe.length > 0 && env.TRANSFERS_ALLOW_UNSAFE !== 'i-understand-this-breaks-guarantees') {
    throw new ConfigError(
      'TRANSFERS_UNSAFE',
      'switches off a safety layer and is only for negative controls; it also needs ' +
        'TRANSFERS_ALLOW_UNSAFE=i-understand-this-breaks-guarantees',
    );
  }

  const lockTtlMs = integer(env, 'LOCK_TTL_MS', 100, 600_000);
  const dbPoolMax = integer(env, 'DB_POOL_MAX', 1, 100);
  const transferBatchMax = integer(env, 'TRANSFER_BATCH_MAX', 1, TRANSFER_BATCH_MAX_LIMIT);
  // Left unset, it follows a smaller pool down, and without batching (one transfer per call) it
  // is the whole pool, as one call per job slot was before batching: holding calls back only
  // helps batches form. Set, it must fit in the pool.
  const inFlightSet = (env.TRANSFER_BATCHES_IN_FLIGHT_MAX ?? '') !== '';
  const transferBatchesInFlightMax = inFlightSet
    ? integer(env, 'TRANSFER_BATCHES_IN_FLIGHT_MAX', 1, TRANSFER_BATCHES_IN_FLIGHT_LIMIT)
    : transferBatchMax === 1
      ? dbPoolMax
      : Math.min(Number(CONFIG_DEFAULTS.TRANSFER_BATCHES_IN_FLIGHT_MAX), dbPoolMax);
  if (transferBatchesInFlightMax > dbPoolMax) {
    throw new ConfigError(
      'TRANSFER_BATCHES_IN_FLIGHT_MAX',
      `must not exceed DB_POOL_MAX (${dbPoolMax}): each batch in flight holds a pooled connection, got ${transferBatchesInFlightMax}`,
    );
  }
  const databaseUrl = url(env, 'DATABASE_URL', ['postgresql:', 'postgres:']);
  databaseTls(databaseUrl);
  const redisUrl = url(env, 'REDIS_URL', ['redis:', 'rediss:']);
  const redisTlsCaRaw = read(env, 'REDIS_TLS_CA_FILE');
  if (redisTlsCaRaw !== '' && new URL(redisUrl).protocol !== 'rediss:') {
    throw new ConfigError('REDIS_TLS_CA_FILE', 'is set but REDIS_URL is not a rediss:// URL; TLS would not be used');
  }
  const workerEntryRaw = read(env, 'WORKER_ENTRY');
  if (!/\.(ts|js)$/.test(workerEntryRaw)) {
    throw new ConfigError(
      'WORKER_ENTRY',
      `expected a .ts source or a compiled .js file, got ${JSON.stringify(workerEntryRaw)}`,
    );
  }
  const queueShards = integer(env, 'QUEUE_SHARDS', 1, QUEUE_SHARDS_MAX);
  const config: Config = {
    databaseUrl,
    redisUrl,
    redisCluster: redisCluster(env),
    redisTlsCaFile: redisTlsCaRaw === '' ? null : certificateFile('REDIS_TLS_CA_FILE', redisTlsCaRaw),
    queueName: name(env, 'QUEUE_NAME', /^[A-Za-z0-9._-]{1,64}$/, '1-64 characters of [A-Za-z0-9._-]'),
    queueShards,
    queueShardsConsumed: shardsConsumed(env, queueShards),
    lockKeyPrefix: name(env, 'LOCK_KEY_PREFIX', /^[A-Za-z0-9._:-]{0,64}$/, 'up to 64 characters of [A-Za-z0-9._:-]'),
    lockTtlMs,
    workerConcurrency: integer(env, 'WORKER_CONCURRENCY', 1, 256),
    logLevel: logLevel as Config['logLevel'],
    transferAmountMax: BigInt(amountMaxRaw),
    dbPoolMax,
    dbStatementTimeoutMs: integer(env, 'DB_STATEMENT_TIMEOUT_MS', 100, 600_000),
    dbLockTimeoutMs: integer(env, 'DB_LOCK_TIMEOUT_MS', 100, 600_000),
    dbIdleInTransactionTimeoutMs: integer(env, 'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS', 100, 600_000),
    jobAttemptsMax: integer(env, 'JOB_ATTEMPTS_MAX', 1, 1000),
    jobLockDurationMs: integer(env, 'JOB_LOCK_DURATION_MS', 1000, 600_000),
    jobStalledIntervalMs: integer(env, 'JOB_STALLED_INTERVAL_MS', 1000, 600_000),
    transferBatchMax,
    transferBatchWaitMs: integer(env, 'TRANSFER_BATCH_WAIT_MS', 0, TRANSFER_BATCH_WAIT_MS_LIMIT),
    transferBatchesInFlightMax,
    lockRideMsMax: integer(env, 'LOCK_RIDE_MS_MAX', 0, LOCK_RIDE_MS_MAX_LIMIT),
    unsafe: Object.freeze(unsafe as UnsafeMode[]),
    dashboardHost: listenHost(env, 'DASHBOARD_HOST'),
    dashboardPort: integer(env, 'DASHBOARD_PORT', 0, 65_535),
    dashboardReadOnly: booleanFlag(env, 'DASHBOARD_READ_ONLY'),
    workerEntry: isAbsolute(workerEntryRaw) ? workerEntryRaw : resolve(PROJECT_ROOT, workerEntryRaw),
    metricsPort: metricsPort(env),
    metricsHost: name(env, 'METRICS_HOST', /^[A-Za-z0-9.:-]{1,255}$/, 'a host name or IP address'),
    startupTimeoutMs: integer(env, 'STARTUP_TIMEOUT_MS', 1_000, 600_000),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 1_000, 600_000),
  };
  return Object.freeze(config);
}

/** The Redis variables that reproduce `config`'s Redis target in a child process's environment. */
export function redisTargetEnv(config: Pick<Config, 'redisUrl' | 'redisCluster'>): Record<string, string> {
  const cluster = config.redisCluster;
  return {
    REDIS_URL: config.redisUrl,
    REDIS_CLUSTER_NODES:
      cluster === null
        ? ''
        : cluster.nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(','),
    REDIS_CLUSTER_NAT_MAP:
      cluster === null
        ? ''
        : Object.entries(cluster.natMap)
            .map(([from, to]) => `${from}=${to.host.includes(':') ? `[${to.host}]` : to.host}:${to.port}`)
            .join(','),
  };
}

/** The database name in a PostgreSQL URL (`/transfers` → `transfers`). */
export function databaseName(databaseUrl: string): string {
  const dbName = decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(dbName)) {
    throw new ConfigError(
      'DATABASE_URL',
      `database name must be 1-63 characters of [A-Za-z0-9_-], got ${JSON.stringify(dbName)}`,
    );
  }
  return dbName;
}

/** The same URL pointing at another database of that server. */
export function withDatabase(databaseUrl: string, dbName: string): string {
  const u = new URL(databaseUrl);
  u.pathname = `/${dbName}`;
  return u.toString();
}

/** Query parameters of a connection URL that carry a secret (pg-connection-string reads them). */
const SECRET_URL_PARAMS = ['password', 'sslpassword'] as const;

/** A URL safe to log: the password (in the user part or a query parameter) is masked. */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password !== '') u.password = '***';
    for (const param of SECRET_URL_PARAMS) if (u.searchParams.has(param)) u.searchParams.set(param, '***');
    return u.toString();
  } catch {
    return '<unparseable url>';
  }
}

/** Characters allowed in WORKER_DB_PASSWORD: printable ASCII without space (SASLprep leaves them alone). */
const WORKER_DB_PASSWORD_PATTERN = /^[\x21-\x7e]{16,256}$/;

/**
 * The worker role's password for `npm run db:worker-role`, from WORKER_DB_PASSWORD. Kept out of
 * Config on purpose: the Config object travels through the service and may be logged in part.
 */
export function loadWorkerDbPassword(env: Env = process.env): string {
  const raw = env.WORKER_DB_PASSWORD;
  if (raw === undefined || raw === '')
    throw new ConfigError('WORKER_DB_PASSWORD', "is required (the worker role's password)");
  if (!WORKER_DB_PASSWORD_PATTERN.test(raw)) {
    throw new ConfigError('WORKER_DB_PASSWORD', 'expected 16-256 printable ASCII characters without spaces');
  }
  return raw;
}
