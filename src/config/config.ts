// Reads and validates the environment once, at start, into a typed and frozen object.
// Nothing else in the service reads process.env: pass the Config (or a piece of it) down.
// Which variables there are, their defaults, bounds and meaning: settings.ts, the one table.

import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { isAbsolute, resolve } from 'node:path';
import { ConfigError } from '../errors.ts';
import { parseWholeNumber, type WholeNumberError } from './bounds.ts';
import { PROJECT_ROOT } from './paths.ts';
import {
  ALLOW_UNSAFE_CONSENT,
  type DatabasePooler,
  LOCK_BACKENDS,
  type LogLevel,
  METRICS_PORT_OFF,
  PORT_MAX,
  SETTINGS,
  type SettingName,
  type SettingNameOf,
  SSL_MODES,
  type UnsafeMode,
} from './settings.ts';

export { METRICS_PORT_OFF, type UnsafeMode } from './settings.ts';

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

/** LOCK_BACKEND and its settings: etcd's endpoints, TLS and user, or the PostgreSQL lock connection. */
export type LockConfig =
  | { readonly backend: 'redis' }
  | {
      readonly backend: 'etcd';
      readonly endpoints: readonly string[];
      readonly tls: {
        readonly caFile: string | null;
        readonly certFile: string | null;
        readonly keyFile: string | null;
      } | null;
      readonly auth: { readonly username: string; readonly password: string } | null;
    }
  | { readonly backend: 'postgres'; readonly databaseUrl: string };

/** etcd grants leases in whole seconds, and no shorter than its election allows: LOCK_TTL_MS at least this with etcd. */
export const ETCD_LOCK_TTL_MS_MIN = 2_000;

/** Seed nodes and NAT entries accepted at most (REDIS_CLUSTER_NODES, REDIS_CLUSTER_NAT_MAP). */
export const REDIS_CLUSTER_NODES_MAX = SETTINGS.REDIS_CLUSTER_NODES.itemsMax;
/** Queue shards at most (QUEUE_SHARDS). */
export const QUEUE_SHARDS_MAX = SETTINGS.QUEUE_SHARDS.max;

/**
 * The service's configuration. Each field is set by the variable(s) whose `field` names it in
 * SETTINGS (settings.ts), where its meaning, default and bounds are; the comments here only say
 * what a value means beyond the variable's own text.
 */
export interface Config {
  readonly databaseUrl: string;
  readonly databasePooler: DatabasePooler;
  /** In cluster mode only its credentials (user, password) and TLS are used, for every node. */
  readonly redisUrl: string;
  /** Null: the system's CAs. */
  readonly redisTlsCaFile: string | null;
  /** Null: one Redis at redisUrl (the default). Set: an ioredis Cluster over these nodes. */
  readonly redisCluster: RedisClusterConfig | null;
  /** Shard 0 carries it unchanged (see src/queue/queue-shards.ts). */
  readonly queueName: string;
  readonly queueShards: number;
  /** Sorted, no repeats; every shard unless QUEUE_SHARDS_CONSUMED lists some. */
  readonly queueShardsConsumed: readonly number[];
  readonly lockKeyPrefix: string;
  readonly lockTtlMs: number;
  /** The lock service (LOCK_BACKEND) and how to reach it. */
  readonly lock: LockConfig;
  readonly workerConcurrency: number;
  readonly logLevel: LogLevel;
  readonly transferAmountMax: bigint;
  readonly holdExpiryMaxMs: number;
  /** CREDIT_LIMIT_MAX: the largest credit limit a credit_limit operation may set. */
  readonly creditLimitMax: bigint;
  readonly dbPoolMax: number;
  readonly dbStatementTimeoutMs: number;
  readonly dbLockTimeoutMs: number;
  readonly dbIdleInTransactionTimeoutMs: number;
  readonly jobAttemptsMax: number;
  readonly jobLockDurationMs: number;
  readonly jobStalledIntervalMs: number;
  readonly transferBatchMax: number;
  readonly transferBatchWaitMs: number;
  readonly outcomeSequenceIntervalMs: number;
  readonly holdSweepIntervalMs: number;
  /** At most dbPoolMax: each batch in flight holds a pooled connection. */
  readonly transferBatchesInFlightMax: number;
  readonly lockRideMsMax: number;
  /** Empty in production. */
  readonly unsafe: readonly UnsafeMode[];
  readonly dashboardHost: string;
  readonly dashboardPort: number;
  readonly dashboardReadOnly: boolean;
  /**
   * Absolute: the TypeScript source (run through tsx) or the compiled `dist/cli/worker.js`
   * (plain node) that the demo, the harnesses and the tests start as child processes.
   */
  readonly workerEntry: string;
  /**
   * Null when METRICS_PORT=off; 0 for any free port (the port bound is in the worker's log, and
   * reported to a parent process that started it with an IPC channel:
   * harness/fleet/worker-processes.ts).
   */
  readonly metricsPort: number | null;
  readonly metricsHost: string;
  readonly startupTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
  readonly intakeResendAfterMs: number;
  readonly relayBatchMax: number;
  readonly relayIdleMs: number;
  /** Null when RELAY_METRICS_PORT=off; 0 for any free port. */
  readonly relayMetricsPort: number | null;
  /** Resolved: `<QUEUE_NAME>-outcomes` when OUTCOMES_QUEUE_NAME is empty. */
  readonly outcomesQueueName: string;
}

// The table and Config agree, checked by the compiler: every field is set by some variable, every
// variable names a field (or null), and a variable's kind gives its field's type.
type SettingFields = (typeof SETTINGS)[SettingName]['field'];
type FieldsWithoutSetting = Exclude<keyof Config, SettingFields>;
const everyFieldHasASetting: [FieldsWithoutSetting] extends [never] ? true : FieldsWithoutSetting = true;
type KindValue<N extends SettingName> = (typeof SETTINGS)[N] extends { kind: 'integer' }
  ? number
  : (typeof SETTINGS)[N] extends { kind: 'boolean' }
    ? boolean
    : (typeof SETTINGS)[N] extends { kind: 'enum'; list: false; values: readonly (infer V)[] }
      ? V
      : (typeof SETTINGS)[N] extends { kind: 'enum'; list: true; values: readonly (infer V)[] }
        ? readonly V[]
        : unknown;
type MistypedSettings = {
  [N in SettingNameOf<'integer' | 'boolean' | 'enum'>]: (typeof SETTINGS)[N]['field'] extends keyof Config
    ? KindValue<N> extends Config[(typeof SETTINGS)[N]['field']]
      ? never
      : N
    : never;
}[SettingNameOf<'integer' | 'boolean' | 'enum'>];
const everyKindFitsItsField: [MistypedSettings] extends [never] ? true : MistypedSettings = true;
void everyFieldHasASetting;
void everyKindFitsItsField;

type DefaultedName = { [N in SettingName]: (typeof SETTINGS)[N]['default'] extends string ? N : never }[SettingName];

/** Every variable that has a default, with it, as the text an unset or empty variable reads as. */
export const CONFIG_DEFAULTS: Readonly<Record<DefaultedName, string>> = Object.freeze(
  Object.fromEntries(
    Object.entries(SETTINGS).flatMap(([name, setting]) => (setting.default === null ? [] : [[name, setting.default]])),
  ) as Record<DefaultedName, string>,
);

/** Upper bound of TRANSFER_BATCH_MAX; apply_transfers() refuses larger calls (APPLY_BATCH_LIMIT). */
export const TRANSFER_BATCH_MAX_LIMIT = SETTINGS.TRANSFER_BATCH_MAX.max;
/**
 * Upper bounds of the other batching and riding settings, here and in the classes that take
 * them (DecisionBatcher, SharedLeases): a typo cannot ask for a wait of minutes.
 */
export const TRANSFER_BATCH_WAIT_MS_LIMIT = SETTINGS.TRANSFER_BATCH_WAIT_MS.max;
export const TRANSFER_BATCHES_IN_FLIGHT_LIMIT = SETTINGS.TRANSFER_BATCHES_IN_FLIGHT_MAX.max;
export const LOCK_RIDE_MS_MAX_LIMIT = SETTINGS.LOCK_RIDE_MS_MAX.max;

type Env = Readonly<Record<string, string | undefined>>;

function read(env: Env, name: DefaultedName): string {
  const value = env[name];
  return value === undefined || value === '' ? CONFIG_DEFAULTS[name] : value;
}

// One message shape per kind, naming the variable and what it accepts.

/** An integer setting's fault: the range from the table; the text quoted when it is not a number. */
const integerFault: WholeNumberError = ({ name, min, max, given, problem }) =>
  new ConfigError(
    name,
    `expected a whole number between ${min} and ${max}, got ${problem === 'not-whole' ? JSON.stringify(given) : given}`,
  );

function integer(env: Env, name: SettingNameOf<'integer'>): number {
  const { min, max } = SETTINGS[name];
  return parseWholeNumber(read(env, name), name, min, max, integerFault);
}

function oneOf<V extends string>(env: Env, name: SettingNameOf<'enum'>, values: readonly V[]): V {
  const raw = read(env, name);
  if (!(values as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `expected one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
  }
  return raw as V;
}

function matching(env: Env, name: SettingNameOf<'pattern'>): string {
  const { pattern, allowed } = SETTINGS[name];
  const raw = read(env, name);
  if (!pattern.test(raw)) throw new ConfigError(name, `expected ${allowed}, got ${JSON.stringify(raw)}`);
  return raw;
}

function booleanFlag(env: Env, name: SettingNameOf<'boolean'>): boolean {
  const raw = read(env, name);
  if (raw !== 'true' && raw !== 'false')
    throw new ConfigError(name, `expected true or false, got ${JSON.stringify(raw)}`);
  return raw === 'true';
}

function url(env: Env, name: SettingNameOf<'url'>): string {
  return urlOf(name, read(env, name), SETTINGS[name].protocols);
}

/** `raw` as a URL with one of `protocols`, a host and a port in range, or the variable's error. */
function urlOf(name: SettingName, raw: string, protocols: readonly string[]): string {
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
  if (parsed.port !== '' && !(Number(parsed.port) >= 1 && Number(parsed.port) <= PORT_MAX)) {
    throw new ConfigError(name, `port out of range: ${parsed.port}`);
  }
  return raw;
}

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

function listenHost(env: Env, variable: 'DASHBOARD_HOST'): string {
  const raw = read(env, variable);
  if (raw !== 'localhost' && isIP(raw) === 0) {
    throw new ConfigError(
      variable,
      `expected an IP address (127.0.0.1, 0.0.0.0, ::1) or localhost, got ${JSON.stringify(raw)}`,
    );
  }
  return raw;
}

function metricsPort(env: Env, variable: 'METRICS_PORT' | 'RELAY_METRICS_PORT' = 'METRICS_PORT'): number | null {
  const raw = read(env, variable);
  if (raw === METRICS_PORT_OFF) return null;
  return parseWholeNumber(
    raw,
    variable,
    0,
    PORT_MAX,
    ({ name, min, max }) =>
      new ConfigError(
        name,
        `expected a port between ${min} (any free port) and ${max}, or "${METRICS_PORT_OFF}", got ${JSON.stringify(raw)}`,
      ),
  );
}

/** OUTCOMES_QUEUE_NAME, or `<QUEUE_NAME>-outcomes` (a name BullMQ accepts: no ':'). */
function outcomesQueueName(env: Env): string {
  const raw = matching(env, 'OUTCOMES_QUEUE_NAME');
  return raw === '' ? `${matching(env, 'QUEUE_NAME')}-outcomes` : raw;
}

/** `host:port` with a DNS name, an IPv4 address or a bracketed IPv6 address. */
const NODE_ADDRESS_PATTERN = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253}):(\d{1,5})$/;

function nodeAddress(variable: string, raw: string): RedisNodeAddress {
  const refuse = () => new ConfigError(variable, `expected host:port (port 1-${PORT_MAX}), got ${JSON.stringify(raw)}`);
  const match = NODE_ADDRESS_PATTERN.exec(raw);
  if (match === null) throw refuse();
  const port = parseWholeNumber(match[2] as string, variable, 1, PORT_MAX, refuse);
  return { host: (match[1] as string).replace(/^\[(.*)\]$/, '$1'), port };
}

function list(env: Env, variable: DefaultedName): string[] {
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
  const refuse: WholeNumberError = ({ name, min, max, given }) =>
    new ConfigError(
      name,
      `expected shard indexes from ${min} to ${max} (QUEUE_SHARDS=${shards}), got ${JSON.stringify(given)}`,
    );
  for (const item of raw) {
    const shard = parseWholeNumber(item, 'QUEUE_SHARDS_CONSUMED', 0, shards - 1, refuse);
    if (out.has(shard)) throw new ConfigError('QUEUE_SHARDS_CONSUMED', `shard ${item} is listed twice`);
    out.add(shard);
  }
  return Object.freeze([...out].sort((a, b) => a - b));
}

/** TRANSFERS_UNSAFE's modes, refused unless TRANSFERS_ALLOW_UNSAFE gives its consent word for word. */
function unsafeModes(env: Env): UnsafeMode[] {
  const modes = SETTINGS.TRANSFERS_UNSAFE.values;
  const raw = read(env, 'TRANSFERS_UNSAFE');
  const unsafe = raw === '' ? [] : raw.split(',').map((s) => s.trim());
  for (const mode of unsafe) {
    if (!(modes as readonly string[]).includes(mode)) {
      throw new ConfigError('TRANSFERS_UNSAFE', `unknown mode ${JSON.stringify(mode)}; expected ${modes.join(', ')}`);
    }
  }
  if (unsafe.length > 0 && env.TRANSFERS_ALLOW_UNSAFE !== ALLOW_UNSAFE_CONSENT) {
    throw new ConfigError(
      'TRANSFERS_UNSAFE',
      `switches off a safety layer and is only for negative controls; it also needs TRANSFERS_ALLOW_UNSAFE=${ALLOW_UNSAFE_CONSENT}`,
    );
  }
  return unsafe as UnsafeMode[];
}

/**
 * TRANSFER_BATCHES_IN_FLIGHT_MAX. Left unset, it follows a smaller pool down, and without batching
 * (one transfer per call) it is the whole pool, as one call per job slot was before batching:
 * holding calls back only helps batches form. Set, it must fit in the pool.
 */
function batchesInFlightMax(env: Env, transferBatchMax: number, dbPoolMax: number): number {
  const inFlightSet = (env.TRANSFER_BATCHES_IN_FLIGHT_MAX ?? '') !== '';
  const inFlightMax = inFlightSet
    ? integer(env, 'TRANSFER_BATCHES_IN_FLIGHT_MAX')
    : transferBatchMax === 1
      ? dbPoolMax
      : Math.min(Number(CONFIG_DEFAULTS.TRANSFER_BATCHES_IN_FLIGHT_MAX), dbPoolMax);
  if (inFlightMax > dbPoolMax) {
    throw new ConfigError(
      'TRANSFER_BATCHES_IN_FLIGHT_MAX',
      `must not exceed DB_POOL_MAX (${dbPoolMax}): each batch in flight holds a pooled connection, got ${inFlightMax}`,
    );
  }
  return inFlightMax;
}

/** REDIS_TLS_CA_FILE, only with a rediss:// REDIS_URL: with a plain one it would be ignored. */
function redisTlsCaFile(env: Env, redisUrl: string): string | null {
  const raw = read(env, 'REDIS_TLS_CA_FILE');
  if (raw === '') return null;
  if (new URL(redisUrl).protocol !== 'rediss:') {
    throw new ConfigError('REDIS_TLS_CA_FILE', 'is set but REDIS_URL is not a rediss:// URL; TLS would not be used');
  }
  return certificateFile('REDIS_TLS_CA_FILE', raw);
}

function isLockBackend(raw: string): raw is (typeof LOCK_BACKENDS)[number] {
  return (LOCK_BACKENDS as readonly string[]).includes(raw);
}

const ETCD_ONLY = [
  'ETCD_ENDPOINTS',
  'ETCD_TLS_CA_FILE',
  'ETCD_TLS_CERT_FILE',
  'ETCD_TLS_KEY_FILE',
  'ETCD_USERNAME',
  'ETCD_PASSWORD',
] as const;
const PASSWORD_PATTERN = /^[\x20-\x7e]{1,256}$/;

/** LOCK_BACKEND and the variables of its lock service; a variable of another service is refused, not ignored. */
function lockConfig(
  env: Env,
  db: { readonly databaseUrl: string; readonly databasePooler: DatabasePooler; readonly lockTtlMs: number },
): LockConfig {
  const backend = read(env, 'LOCK_BACKEND');
  if (!isLockBackend(backend))
    throw new ConfigError(
      'LOCK_BACKEND',
      `expected one of ${LOCK_BACKENDS.join(', ')}, got ${JSON.stringify(backend)}`,
    );
  const given = (name: SettingName): string => env[name] ?? '';
  for (const name of ETCD_ONLY) {
    if (backend !== 'etcd' && given(name) !== '') throw new ConfigError(name, 'only applies with LOCK_BACKEND=etcd');
  }
  if (backend !== 'postgres' && given('LOCK_DATABASE_URL') !== '')
    throw new ConfigError('LOCK_DATABASE_URL', 'only applies with LOCK_BACKEND=postgres');
  if (backend === 'redis') return { backend };
  if (backend === 'postgres') {
    const raw = given('LOCK_DATABASE_URL');
    if (raw === '' && db.databasePooler === 'pgbouncer')
      throw new ConfigError(
        'LOCK_DATABASE_URL',
        'is required with LOCK_BACKEND=postgres when DATABASE_POOLER=pgbouncer: advisory locks live in a session, which PgBouncer in transaction mode does not keep; point it at PostgreSQL itself',
      );
    return {
      backend,
      databaseUrl: raw === '' ? db.databaseUrl : urlOf('LOCK_DATABASE_URL', raw, ['postgresql:', 'postgres:']),
    };
  }
  if (db.lockTtlMs < ETCD_LOCK_TTL_MS_MIN)
    throw new ConfigError(
      'LOCK_TTL_MS',
      `must be at least ${ETCD_LOCK_TTL_MS_MIN} with LOCK_BACKEND=etcd (leases are whole seconds)`,
    );
  return { backend, endpoints: etcdEndpoints(given('ETCD_ENDPOINTS')), tls: etcdTls(env), auth: etcdAuth(env) };
}

function etcdEndpoints(raw: string): readonly string[] {
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) throw new ConfigError('ETCD_ENDPOINTS', 'is required with LOCK_BACKEND=etcd');
  const max = SETTINGS.ETCD_ENDPOINTS.itemsMax;
  if (items.length > max) throw new ConfigError('ETCD_ENDPOINTS', `at most ${max} endpoints, got ${items.length}`);
  const seen = new Set<string>();
  const endpoints = items.map((item) => {
    const endpoint = urlOf('ETCD_ENDPOINTS', item, ['http:', 'https:']);
    if (seen.has(endpoint)) throw new ConfigError('ETCD_ENDPOINTS', `${endpoint} is listed twice`);
    seen.add(endpoint);
    return endpoint;
  });
  const schemes = new Set(endpoints.map((e) => new URL(e).protocol));
  if (schemes.size > 1) throw new ConfigError('ETCD_ENDPOINTS', 'mixes http:// and https:// endpoints');
  return Object.freeze(endpoints);
}

function etcdTls(env: Env): Extract<LockConfig, { backend: 'etcd' }>['tls'] {
  const file = (name: 'ETCD_TLS_CA_FILE' | 'ETCD_TLS_CERT_FILE' | 'ETCD_TLS_KEY_FILE'): string | null => {
    const raw = env[name] ?? '';
    if (raw === '') return null;
    if (name !== 'ETCD_TLS_KEY_FILE') return certificateFile(name, raw);
    try {
      readFileSync(raw);
    } catch (err) {
      throw new ConfigError(
        name,
        `cannot read ${JSON.stringify(raw)}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
      );
    }
    return raw;
  };
  const caFile = file('ETCD_TLS_CA_FILE');
  const certFile = file('ETCD_TLS_CERT_FILE');
  const keyFile = file('ETCD_TLS_KEY_FILE');
  if ((certFile === null) !== (keyFile === null))
    throw new ConfigError(
      certFile === null ? 'ETCD_TLS_CERT_FILE' : 'ETCD_TLS_KEY_FILE',
      'the certificate and its key go together',
    );
  const https = (env.ETCD_ENDPOINTS ?? '').includes('https://');
  if (!https && (caFile ?? certFile) !== null)
    throw new ConfigError(
      caFile !== null ? 'ETCD_TLS_CA_FILE' : 'ETCD_TLS_CERT_FILE',
      'is set but ETCD_ENDPOINTS are not https://; TLS would not be used',
    );
  return https ? { caFile, certFile, keyFile } : null;
}

function etcdAuth(env: Env): Extract<LockConfig, { backend: 'etcd' }>['auth'] {
  const username = matching(env, 'ETCD_USERNAME');
  const password = env.ETCD_PASSWORD ?? '';
  if ((username === '') !== (password === ''))
    throw new ConfigError(username === '' ? 'ETCD_USERNAME' : 'ETCD_PASSWORD', 'the user and its password go together');
  if (password !== '' && !PASSWORD_PATTERN.test(password))
    throw new ConfigError('ETCD_PASSWORD', `expected ${SETTINGS.ETCD_PASSWORD.allowed}`);
  return username === '' ? null : { username, password };
}

/**
 * Reads and validates the environment once into a frozen Config: every variable of
 * docs/reference/configuration.md, each with its default when unset. `env` is process.env unless given.
 *
 * @throws {@link ConfigError} (`CONFIG`) naming the first variable whose value is refused.
 */
export function loadConfig(env: Env = process.env): Config {
  const logLevel = oneOf(env, 'LOG_LEVEL', SETTINGS.LOG_LEVEL.values);
  const amountMaxRaw = matching(env, 'TRANSFER_AMOUNT_MAX');
  const unsafe = unsafeModes(env);

  const lockTtlMs = integer(env, 'LOCK_TTL_MS');
  const dbPoolMax = integer(env, 'DB_POOL_MAX');
  const transferBatchMax = integer(env, 'TRANSFER_BATCH_MAX');
  const transferBatchesInFlightMax = batchesInFlightMax(env, transferBatchMax, dbPoolMax);
  const databaseUrl = url(env, 'DATABASE_URL');
  databaseTls(databaseUrl);
  const redisUrl = url(env, 'REDIS_URL');
  const workerEntryRaw = matching(env, 'WORKER_ENTRY');
  const queueShards = integer(env, 'QUEUE_SHARDS');
  const databasePooler = oneOf(env, 'DATABASE_POOLER', SETTINGS.DATABASE_POOLER.values);
  const config: Config = {
    databaseUrl,
    databasePooler,
    redisUrl,
    redisCluster: redisCluster(env),
    redisTlsCaFile: redisTlsCaFile(env, redisUrl),
    queueName: matching(env, 'QUEUE_NAME'),
    queueShards,
    queueShardsConsumed: shardsConsumed(env, queueShards),
    lockKeyPrefix: matching(env, 'LOCK_KEY_PREFIX'),
    lockTtlMs,
    lock: lockConfig(env, { databaseUrl, databasePooler, lockTtlMs }),
    workerConcurrency: integer(env, 'WORKER_CONCURRENCY'),
    logLevel,
    transferAmountMax: BigInt(amountMaxRaw),
    holdExpiryMaxMs: integer(env, 'HOLD_EXPIRY_MAX_MS'),
    creditLimitMax: BigInt(matching(env, 'CREDIT_LIMIT_MAX')),
    dbPoolMax,
    dbStatementTimeoutMs: integer(env, 'DB_STATEMENT_TIMEOUT_MS'),
    dbLockTimeoutMs: integer(env, 'DB_LOCK_TIMEOUT_MS'),
    dbIdleInTransactionTimeoutMs: integer(env, 'DB_IDLE_IN_TRANSACTION_TIMEOUT_MS'),
    jobAttemptsMax: integer(env, 'JOB_ATTEMPTS_MAX'),
    jobLockDurationMs: integer(env, 'JOB_LOCK_DURATION_MS'),
    jobStalledIntervalMs: integer(env, 'JOB_STALLED_INTERVAL_MS'),
    transferBatchMax,
    transferBatchWaitMs: integer(env, 'TRANSFER_BATCH_WAIT_MS'),
    outcomeSequenceIntervalMs: integer(env, 'OUTCOME_SEQUENCE_INTERVAL_MS'),
    holdSweepIntervalMs: integer(env, 'HOLD_SWEEP_INTERVAL_MS'),
    transferBatchesInFlightMax,
    lockRideMsMax: integer(env, 'LOCK_RIDE_MS_MAX'),
    unsafe: Object.freeze(unsafe),
    dashboardHost: listenHost(env, 'DASHBOARD_HOST'),
    dashboardPort: integer(env, 'DASHBOARD_PORT'),
    dashboardReadOnly: booleanFlag(env, 'DASHBOARD_READ_ONLY'),
    workerEntry: isAbsolute(workerEntryRaw) ? workerEntryRaw : resolve(PROJECT_ROOT, workerEntryRaw),
    metricsPort: metricsPort(env),
    metricsHost: matching(env, 'METRICS_HOST'),
    startupTimeoutMs: integer(env, 'STARTUP_TIMEOUT_MS'),
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS'),
    intakeResendAfterMs: integer(env, 'INTAKE_RESEND_AFTER_MS'),
    relayBatchMax: integer(env, 'RELAY_BATCH_MAX'),
    relayIdleMs: integer(env, 'RELAY_IDLE_MS'),
    relayMetricsPort: metricsPort(env, 'RELAY_METRICS_PORT'),
    outcomesQueueName: outcomesQueueName(env),
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
export const WORKER_DB_PASSWORD_PATTERN = /^[\x21-\x7e]{16,256}$/;

/**
 * The worker role's password for `npm run db:worker-role`, from WORKER_DB_PASSWORD. Kept out of
 * Config on purpose: the Config object travels through the service and may be logged in part.
 */
export function loadWorkerDbPassword(env: Env = process.env): string {
  const raw = env.WORKER_DB_PASSWORD;
  if (raw === undefined || raw === '')
    throw new ConfigError('WORKER_DB_PASSWORD', "is required (the worker role's password)");
  if (!WORKER_DB_PASSWORD_PATTERN.test(raw)) {
    // The value itself is never quoted back: it is a secret.
    throw new ConfigError('WORKER_DB_PASSWORD', `expected ${SETTINGS.WORKER_DB_PASSWORD.allowed}`);
  }
  return raw;
}
