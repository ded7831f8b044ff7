// Every environment variable the service reads, declared once: its kind, default, bounds, unit and
// one-line meaning. config.ts parses the environment by this table (the bounds, the defaults and
// the wording of the errors come from here), the modules that share a bound import it from here
// through config.ts, and `npm run docs` renders docs/reference/configuration.md from it.
// A variable added here without a Config field, or a Config field without a variable, fails to
// type-check (config.ts).
import type { Config } from './config.ts';

/** pino's levels. */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Negative controls. The first four switch a layer of the transfer decision off; the next two
 * switch an operational guarantee off: `no-readiness` takes jobs without waiting for the servers
 * and the migrations, `no-graceful-shutdown` exits on SIGTERM without finishing the jobs in hand.
 * The last two switch a rule of the payment decision off: `double-capture` the hold's state check
 * (a capture or void of a hold that ended moves its money again), `refund-unbounded` the refund's
 * bound (refunds may exceed their original), `no-credit-limit` the credit limit of every debit (a debit
 * may take a balance below minus its limit), `no-wallet-status` the wallets' statuses (a frozen or closed
 * wallet is debited and credited).
 */
export const UNSAFE_MODES = [
  'no-idempotency',
  'no-fencing',
  'no-lock',
  'no-lease-check',
  'no-readiness',
  'no-graceful-shutdown',
  'double-capture',
  'refund-unbounded',
  'no-credit-limit',
  'no-wallet-status',
] as const;

/** The one value of TRANSFERS_ALLOW_UNSAFE that lets TRANSFERS_UNSAFE through. */
export const ALLOW_UNSAFE_CONSENT = 'i-understand-this-breaks-guarantees';

/**
 * What sits between the service and PostgreSQL. `none`: the pool sets its session bounds as
 * start-up parameters. `pgbouncer` (transaction mode): it sends none, which PgBouncer would
 * refuse, and the bounds are the role's defaults in the database (`npm run db:worker-role`,
 * `npm run db:session-bounds`). Either way every new connection checks them (src/db/session-bounds.ts).
 */
export const DATABASE_POOLERS = ['none', 'pgbouncer'] as const;

/** The lock services a worker may take its wallets' locks from (LOCK_BACKEND; src/lock/lock-service.ts). */
export const LOCK_BACKENDS = ['redis', 'etcd', 'postgres'] as const;
/** libpq's sslmode values; pg reads `prefer`, `require` and `verify-ca` as `verify-full`. */
export const SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'] as const;

/** The samplers OTEL_TRACES_SAMPLER may name (the specification's, less the Jaeger remote one). */
export const TRACE_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** The METRICS_PORT value that switches the worker's HTTP server off. */
export const METRICS_PORT_OFF = 'off';

/** The largest TCP port. */
export const PORT_MAX = 65_535;
/** The bounds shared by the database and startup time limits: a typo cannot ask for an hour. */
const TIMEOUT_MS_MAX = 600_000;

interface SettingBase {
  /** The Config field the variable sets; null for one read outside Config (by its own command). */
  readonly field: keyof Config | null;
  /** The value an unset or empty variable takes, as text; null: none, the variable is required. */
  readonly default: string | null;
  /** What it does, one line (Markdown). */
  readonly doc: string;
}

/** A whole number from min to max; refused with one message that names the range. */
export interface IntegerSetting extends SettingBase {
  readonly kind: 'integer';
  readonly min: number;
  readonly max: number;
  /** What one unit counts (`ms`, `connections`), or null for a plain count or a port. */
  readonly unit: string | null;
  /** A bound that depends on another variable, for the document. */
  readonly alsoAtMost?: string;
}

/** One of a closed set of words, or (`list`) a comma-separated subset of them. */
export interface EnumSetting extends SettingBase {
  readonly kind: 'enum';
  readonly values: readonly string[];
  readonly list: boolean;
}

export interface BooleanSetting extends SettingBase {
  readonly kind: 'boolean';
}

/** Free text that must match `pattern`; `allowed` says what in words (in the error and the document). */
export interface PatternSetting extends SettingBase {
  readonly kind: 'pattern';
  readonly pattern: RegExp;
  readonly allowed: string;
}

/** A connection URL with one of `protocols`. */
export interface UrlSetting extends SettingBase {
  readonly kind: 'url';
  readonly protocols: readonly string[];
  /** Anything else the URL may carry, for the document. */
  readonly allowedMore?: string;
}

/** A value config.ts reads with a parser of its own (lists of addresses, files, ports with a word). */
export interface SpecialSetting extends SettingBase {
  readonly kind: 'special';
  readonly allowed: string;
  /** Entries of a list at most. */
  readonly itemsMax?: number;
}

export type Setting = IntegerSetting | EnumSetting | BooleanSetting | PatternSetting | UrlSetting | SpecialSetting;

/** Every variable, in the order the document lists them: servers, queue, lock, decision, jobs, processes. */
export const SETTINGS = {
  DATABASE_URL: {
    field: 'databaseUrl',
    kind: 'url',
    default: 'postgresql://postgres@127.0.0.1:5432/transfers',
    protocols: ['postgresql:', 'postgres:'],
    allowedMore: `\`sslmode\` one of ${SSL_MODES.join(', ')}; \`sslrootcert\`, \`sslcert\`, \`sslkey\`: readable files`,
    doc: 'PostgreSQL; for TLS add `?sslmode=verify-full&sslrootcert=/path/ca.crt`',
  },
  DATABASE_POOLER: {
    field: 'databasePooler',
    kind: 'enum',
    default: 'none',
    values: DATABASE_POOLERS,
    list: false,
    doc: '`pgbouncer` when `DATABASE_URL` points at PgBouncer in transaction mode: no start-up parameters, the `DB_*_TIMEOUT_MS` bounds come from the role (see [deploy](../operating/deploy.md#pgbouncer)); a connection whose bounds differ is refused either way',
  },
  REDIS_URL: {
    field: 'redisUrl',
    kind: 'url',
    default: 'redis://127.0.0.1:6379',
    protocols: ['redis:', 'rediss:'],
    doc: 'Redis (queue and locks); `rediss://` for TLS; in cluster mode only its user, password and `rediss:` (TLS) apply, to every node',
  },
  REDIS_TLS_CA_FILE: {
    field: 'redisTlsCaFile',
    kind: 'special',
    default: '',
    allowed: 'a readable PEM certificate file; only with a `rediss://` `REDIS_URL`',
    doc: "PEM file of the CA that signed the Redis server's certificate; empty: the system's CAs",
  },
  REDIS_CLUSTER_NODES: {
    field: 'redisCluster',
    kind: 'special',
    default: '',
    // A cluster has at most ~1000 nodes and a handful of seeds suffice.
    itemsMax: 64,
    allowed: '`host:port,host:port,…` (port 1–65535, IPv6 in brackets), at most 64, no repeats',
    doc: 'Redis Cluster mode: every client is an ioredis `Cluster` seeded with these nodes; empty: one Redis at `REDIS_URL`',
  },
  REDIS_CLUSTER_NAT_MAP: {
    field: 'redisCluster',
    kind: 'special',
    default: '',
    itemsMax: 64,
    allowed: '`announced-host:port=reachable-host:port,…`, at most 64; only with `REDIS_CLUSTER_NODES`',
    doc: 'for cluster nodes that announce addresses this process cannot reach (NAT, containers)',
  },
  QUEUE_NAME: {
    field: 'queueName',
    kind: 'pattern',
    default: 'transfers',
    pattern: /^[A-Za-z0-9._-]{1,64}$/,
    allowed: '1-64 characters of [A-Za-z0-9._-]',
    doc: 'BullMQ queue, or base name of the shards (shard 0 carries it unchanged)',
  },
  QUEUE_SHARDS: {
    field: 'queueShards',
    kind: 'integer',
    default: '1',
    min: 1,
    // Each shard is one BullMQ queue, consumed by every worker that lists it.
    max: 64,
    unit: 'queues',
    doc: 'queues `<QUEUE_NAME>`, `<QUEUE_NAME>.1`, …; the producer sends each transfer to the shard of its source wallet (FNV-1a-32 of the id, modulo the count)',
  },
  QUEUE_SHARDS_CONSUMED: {
    field: 'queueShardsConsumed',
    kind: 'special',
    default: '',
    allowed: 'comma-separated shard indexes from 0 to `QUEUE_SHARDS` − 1, no repeats',
    doc: 'shard indexes a worker consumes, e.g. `0,2`; empty: every shard',
  },
  LOCK_BACKEND: {
    field: 'lock',
    kind: 'special',
    default: 'redis',
    allowed: LOCK_BACKENDS.map((b) => `\`${b}\``).join(', '),
    doc: "the wallets' lock service: `redis` (the default), `etcd` (a lease per process, the key's create revision as the token) or `postgres` (session advisory locks, tokens from a sequence); it must be the backend of the database's lock epoch (see [lock services](../operating/lock-services.md))",
  },
  ETCD_ENDPOINTS: {
    field: 'lock',
    kind: 'special',
    default: '',
    itemsMax: 16,
    allowed:
      '`http://host:port,…` or `https://…`, at most 16, no repeats; required with `LOCK_BACKEND=etcd` and only then',
    doc: 'the etcd cluster of `LOCK_BACKEND=etcd` (client URLs of its members)',
  },
  ETCD_TLS_CA_FILE: {
    field: 'lock',
    kind: 'special',
    default: '',
    allowed: 'a readable PEM certificate file; only with `https://` endpoints',
    doc: "PEM file of the CA that signed the etcd members' certificates; empty: the system's CAs",
  },
  ETCD_TLS_CERT_FILE: {
    field: 'lock',
    kind: 'special',
    default: '',
    allowed: 'a readable PEM certificate file, with `ETCD_TLS_KEY_FILE`; only with `https://` endpoints',
    doc: 'client certificate for etcd (mutual TLS)',
  },
  ETCD_TLS_KEY_FILE: {
    field: 'lock',
    kind: 'special',
    default: '',
    allowed: 'a readable PEM key file, with `ETCD_TLS_CERT_FILE`',
    doc: 'the key of `ETCD_TLS_CERT_FILE`',
  },
  ETCD_USERNAME: {
    field: 'lock',
    kind: 'pattern',
    default: '',
    pattern: /^[A-Za-z0-9._-]{0,64}$/,
    allowed: 'up to 64 characters of [A-Za-z0-9._-]; with `ETCD_PASSWORD`',
    doc: "etcd's user when its authentication is on; empty: none",
  },
  ETCD_PASSWORD: {
    field: 'lock',
    kind: 'special',
    default: '',
    allowed: '1-256 printable ASCII characters, with `ETCD_USERNAME`; never printed',
    doc: "the etcd user's password",
  },
  LOCK_DATABASE_URL: {
    field: 'lock',
    kind: 'special',
    default: '',
    allowed:
      'a `postgresql://` URL reaching PostgreSQL itself (not PgBouncer in transaction mode); only with `LOCK_BACKEND=postgres`',
    doc: 'the connection of `LOCK_BACKEND=postgres` (one per worker, its session holds the advisory locks); empty: `DATABASE_URL`, refused when `DATABASE_POOLER=pgbouncer`',
  },
  LOCK_KEY_PREFIX: {
    field: 'lockKeyPrefix',
    kind: 'pattern',
    default: 'ft:',
    pattern: /^[A-Za-z0-9._:-]{0,64}$/,
    allowed: 'up to 64 characters of [A-Za-z0-9._:-]',
    doc: 'prefix of the lock and metrics keys (`<prefix>{wallet:<id>}:lock`)',
  },
  LOCK_TTL_MS: {
    field: 'lockTtlMs',
    kind: 'integer',
    default: '10000',
    min: 100,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: 'lock lease; the watchdog renews every third of it',
  },
  LOCK_RIDE_MS_MAX: {
    field: 'lockRideMsMax',
    kind: 'integer',
    default: '250',
    min: 0,
    // Here and in SharedLeases: a typo cannot ask for a ride of minutes.
    max: 60_000,
    unit: 'ms',
    doc: "how long after acquiring a wallet's lock the process lets more of its jobs for that wallet ride on the same lease; `0`: every job takes the lock itself",
  },
  WORKER_CONCURRENCY: {
    field: 'workerConcurrency',
    kind: 'integer',
    // 64: a process's slots go round as one convoy, so more slots overlap more of the round
    // (docs/verification/results/performance-history.md, "Sixty-four slots per worker"); more
    // slots than a batch holds cost more CPU per transfer.
    default: '64',
    min: 1,
    max: 256,
    unit: 'jobs',
    doc: 'jobs in flight per worker process and consumed queue shard',
  },
  TRANSFER_AMOUNT_MAX: {
    field: 'transferAmountMax',
    kind: 'pattern',
    default: '1000000000000000',
    pattern: /^[1-9]\d{0,17}$/,
    allowed: 'a positive integer below 10^18',
    doc: 'largest amount accepted, in minor units',
  },
  CREDIT_LIMIT_MAX: {
    field: 'creditLimitMax',
    kind: 'pattern',
    default: '1000000000000000',
    // Up to 10^17: the wallets' CHECK (wallets_credit_limit_range) and the intake's ceiling.
    pattern: /^(0|[1-9]\d{0,16}|100000000000000000)$/,
    allowed: 'an integer from 0 to 10^17',
    doc: 'largest credit limit a `credit_limit` or an `open_wallet` operation may set, in minor units (0: no wallet may go below zero through the API); larger is refused as an invalid request',
  },
  HOLD_EXPIRY_MAX_MS: {
    field: 'holdExpiryMaxMs',
    kind: 'integer',
    // Seven days.
    default: '604800000',
    min: 1_000,
    // 366 days: a typo cannot keep money held for years.
    max: 31_622_400_000,
    unit: 'ms',
    doc: "longest a hold may last: a hold's `expiresInMs` is at most this, its `expiresAt` at most this far ahead of the database's clock (`expiry_out_of_range`)",
  },
  TRANSFER_BATCH_MAX: {
    field: 'transferBatchMax',
    kind: 'integer',
    default: '64',
    min: 1,
    // apply_transfers() refuses larger calls (APPLY_BATCH_LIMIT in the migrations).
    max: 1_000,
    unit: 'transfers',
    doc: 'transfers decided in one call and one commit; `1`: one transfer per commit',
  },
  TRANSFER_BATCH_WAIT_MS: {
    field: 'transferBatchWaitMs',
    kind: 'integer',
    default: '2',
    min: 0,
    // Here and in DecisionBatcher: a typo cannot ask for a wait of minutes.
    max: 1_000,
    unit: 'ms',
    doc: 'how long a transfer waits for company before its batch is sent anyway; none when nothing else in the process is on its way',
  },
  TRANSFER_BATCHES_IN_FLIGHT_MAX: {
    field: 'transferBatchesInFlightMax',
    kind: 'integer',
    default: '4',
    min: 1,
    max: 100,
    unit: 'batches',
    alsoAtMost: '`DB_POOL_MAX`',
    doc: 'batches one process has at the database at once (each holds a pooled connection); unset, it is at most `DB_POOL_MAX`, and all of `DB_POOL_MAX` with `TRANSFER_BATCH_MAX=1` (one call per job slot: holding calls back only helps batches form)',
  },
  DB_POOL_MAX: {
    field: 'dbPoolMax',
    kind: 'integer',
    default: '8',
    min: 1,
    max: 100,
    unit: 'connections',
    doc: "connections in one process's PostgreSQL pool",
  },
  DB_STATEMENT_TIMEOUT_MS: {
    field: 'dbStatementTimeoutMs',
    kind: 'integer',
    default: '5000',
    min: 100,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: "`statement_timeout` on worker connections; the client gives up on a statement nobody answers 1 s later (pg `query_timeout`, the connection destroyed), on a batch's decision 5 s after that (the wait for a connection), and a wallet's lease whose jobs get no answer for as long is released",
  },
  DB_LOCK_TIMEOUT_MS: {
    field: 'dbLockTimeoutMs',
    kind: 'integer',
    default: '2000',
    min: 100,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: '`lock_timeout` on worker connections',
  },
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: {
    field: 'dbIdleInTransactionTimeoutMs',
    kind: 'integer',
    default: '5000',
    min: 100,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: '`idle_in_transaction_session_timeout` on worker connections',
  },
  JOB_ATTEMPTS_MAX: {
    field: 'jobAttemptsMax',
    kind: 'integer',
    default: '20',
    min: 1,
    max: 1_000,
    unit: 'attempts',
    doc: 'attempts BullMQ makes of one job (set by our producer) before it lands in the failed set',
  },
  JOB_LOCK_DURATION_MS: {
    field: 'jobLockDurationMs',
    kind: 'integer',
    default: '30000',
    min: 1_000,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: "BullMQ's lease on an active job; a dead worker's jobs come back after about this long",
  },
  JOB_STALLED_INTERVAL_MS: {
    field: 'jobStalledIntervalMs',
    kind: 'integer',
    default: '30000',
    min: 1_000,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: 'how often workers look for stalled jobs (whose worker died)',
  },
  LOG_LEVEL: {
    field: 'logLevel',
    kind: 'enum',
    default: 'info',
    values: LOG_LEVELS,
    list: false,
    doc: 'pino level; logs are JSON lines on stderr',
  },
  METRICS_PORT: {
    field: 'metricsPort',
    kind: 'special',
    default: '9464',
    allowed: `0–${PORT_MAX}, or \`${METRICS_PORT_OFF}\``,
    doc: "port of the worker's HTTP server (`/healthz`, `/readyz`, `/metrics`); `off` switches the server off; `0` takes any free port (logged as `metricsPort` in `worker_started`). Workers on one machine each need their own",
  },
  METRICS_HOST: {
    field: 'metricsHost',
    kind: 'pattern',
    default: '0.0.0.0',
    pattern: /^[A-Za-z0-9.:-]{1,255}$/,
    allowed: 'a host name or IP address',
    doc: 'address that server listens on (`127.0.0.1` keeps it local)',
  },
  STARTUP_TIMEOUT_MS: {
    field: 'startupTimeoutMs',
    kind: 'integer',
    default: '30000',
    min: 1_000,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: 'how long a starting worker waits for Redis, PostgreSQL and the migrations before it exits with an error',
  },
  SHUTDOWN_TIMEOUT_MS: {
    field: 'shutdownTimeoutMs',
    kind: 'integer',
    default: '20000',
    min: 1_000,
    max: TIMEOUT_MS_MAX,
    unit: 'ms',
    doc: 'how long a stopping worker gives its jobs in hand before it exits anyway, with code 1',
  },
  INTAKE_RESEND_AFTER_MS: {
    field: 'intakeResendAfterMs',
    kind: 'integer',
    default: '30000',
    min: 500,
    max: 86_400_000,
    unit: 'ms',
    doc: "the relay's patience: an undecided request sent longer ago than this is sent again (its job may have been lost); a job still queued makes the second send a no-op",
  },
  RELAY_BATCH_MAX: {
    field: 'relayBatchMax',
    kind: 'integer',
    default: '500',
    min: 1,
    max: 1_000,
    unit: 'requests',
    doc: 'requests one relay claims and sends per batch, a quarter of it (at least one) kept for re-sends that are due, claimed before first sends (`RELAY_RESEND_SHARE`); also outcome events it publishes per round',
  },
  RELAY_IDLE_MS: {
    field: 'relayIdleMs',
    kind: 'integer',
    default: '200',
    min: 10,
    max: 10_000,
    unit: 'ms',
    doc: 'how long a relay waits after a round that found nothing to send or publish',
  },
  OUTCOME_SEQUENCE_INTERVAL_MS: {
    field: 'outcomeSequenceIntervalMs',
    kind: 'integer',
    default: '200',
    min: 10,
    max: 60_000,
    unit: 'ms',
    doc: 'how often a worker gives the next outcome-feed positions to the events decided since (one short statement; of all the workers and relays one at a time does it): a decision reaches the feed within about this long. Reading the feed never does it',
  },
  HOLD_SWEEP_INTERVAL_MS: {
    field: 'holdSweepIntervalMs',
    kind: 'integer',
    default: '1000',
    min: 50,
    max: 60_000,
    unit: 'ms',
    doc: 'how often a worker releases the holds past their expiry back to their source wallets (one short statement, `holds_expire()`): an expired hold is released within about this long, or by the capture or void that comes too late',
  },
  RELAY_METRICS_PORT: {
    field: 'relayMetricsPort',
    kind: 'special',
    default: '9465',
    allowed: `0–${PORT_MAX}, or \`${METRICS_PORT_OFF}\``,
    doc: "port of the relay's HTTP server (`/healthz`, `/readyz`, `/metrics`) on `METRICS_HOST`; `off` switches it off; `0` takes any free port (logged as `metricsPort` in `relay_started`)",
  },
  OUTCOMES_QUEUE_NAME: {
    field: 'outcomesQueueName',
    kind: 'pattern',
    default: '',
    pattern: /^([A-Za-z0-9._-]{1,64})?$/,
    allowed: '1-64 characters of [A-Za-z0-9._-], or empty',
    doc: 'BullMQ queue the relay publishes the outcome feed to (job id `outcome-<position>-<event digest>`: a position reused after lost commits is another job); empty: `<QUEUE_NAME>-outcomes`. In cluster mode its prefix is its name in braces',
  },
  DASHBOARD_HOST: {
    field: 'dashboardHost',
    kind: 'special',
    default: '127.0.0.1',
    allowed: 'an IP address (`127.0.0.1`, `0.0.0.0`, `::1`) or `localhost`',
    doc: 'address `npm run dashboard` listens on; `0.0.0.0` opens it to the network, and it has no login',
  },
  DASHBOARD_PORT: {
    field: 'dashboardPort',
    kind: 'integer',
    default: '3000',
    min: 0,
    max: PORT_MAX,
    unit: null,
    doc: "the dashboard's port; `0` takes any free port (the command prints the URL)",
  },
  DASHBOARD_READ_ONLY: {
    field: 'dashboardReadOnly',
    kind: 'boolean',
    default: 'true',
    doc: '`false` lets anyone who can open the page retry, clean, promote, pause, empty and remove jobs',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    field: null,
    kind: 'url',
    default: '',
    protocols: ['http:', 'https:'],
    allowedMore: 'a path, to which `/v1/traces` is added',
    doc: 'read by the worker and the relay at start (src/tracing/tracing-env.ts): the OTLP/HTTP collector their spans go to (`http://jaeger:4318`); empty, they trace nothing and load no OpenTelemetry SDK',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    field: null,
    kind: 'url',
    default: '',
    protocols: ['http:', 'https:'],
    allowedMore: 'a path, used as it is',
    doc: 'the same for traces alone, the full URL (`http://jaeger:4318/v1/traces`); wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
  },
  OTEL_SDK_DISABLED: {
    field: null,
    kind: 'boolean',
    default: 'false',
    doc: '`true` switches tracing off whatever the endpoints say',
  },
  OTEL_TRACES_EXPORTER: {
    field: null,
    kind: 'enum',
    default: 'otlp',
    values: ['otlp', 'none'],
    list: false,
    doc: '`none` switches tracing off whatever the endpoints say',
  },
  OTEL_SERVICE_NAME: {
    field: null,
    kind: 'special',
    default: '',
    allowed: 'a name',
    doc: 'the `service.name` of the spans; empty: `fenced-transfers-worker` or `fenced-transfers-relay`',
  },
  OTEL_RESOURCE_ATTRIBUTES: {
    field: null,
    kind: 'special',
    default: '',
    allowed: '`key=value` pairs, comma-separated',
    doc: 'more attributes of the process on every span (`deployment.environment.name=prod`)',
  },
  OTEL_TRACES_SAMPLER: {
    field: null,
    kind: 'enum',
    default: 'parentbased_always_on',
    values: TRACE_SAMPLERS,
    list: false,
    doc: "which traces are kept; the `parentbased_*` ones follow the producer's decision for a transfer it traced",
  },
  OTEL_TRACES_SAMPLER_ARG: {
    field: null,
    kind: 'special',
    default: '1',
    allowed: 'a ratio from 0 to 1',
    doc: 'the share of traces the `*traceidratio` samplers keep',
  },
  WORKER_ENTRY: {
    field: 'workerEntry',
    kind: 'pattern',
    default: 'src/cli/worker.ts',
    pattern: /\.(ts|js)$/,
    allowed: 'a .ts source or a compiled .js file',
    doc: 'the worker file the demo, the harnesses and the tests start as processes: a `.ts` source (run through tsx) or a compiled `.js` (`dist/cli/worker.js` after `npm run build`, run with plain node); relative to the project',
  },
  TRANSFERS_UNSAFE: {
    field: 'unsafe',
    kind: 'enum',
    default: '',
    values: UNSAFE_MODES,
    list: true,
    doc: "**negative controls only**: `no-idempotency`, `no-fencing`, `no-lock` switch a safety layer of the decision off, `no-lease-check` lets an equal token of another lease pass; `no-readiness` takes jobs without waiting for the servers, `no-graceful-shutdown` exits on SIGTERM without finishing the jobs in hand; `double-capture` switches the hold's state check off, `refund-unbounded` the refund's bound, `no-credit-limit` the credit limit of every debit, `no-wallet-status` the wallets' statuses. The modes of a database check call decisions that only the chaos harness's own databases have (a migrated database answers `ledger_contract`)",
  },
  TRANSFERS_ALLOW_UNSAFE: {
    field: 'unsafe',
    kind: 'special',
    default: '',
    allowed: `\`${ALLOW_UNSAFE_CONSENT}\``,
    doc: '`TRANSFERS_UNSAFE` is refused unless this is set to exactly that value',
  },
  WORKER_DB_PASSWORD: {
    field: null,
    kind: 'special',
    default: null,
    allowed: '16-256 printable ASCII characters without spaces',
    doc: "read by `npm run db:worker-role` only: the worker role's password; kept out of the configuration object and never printed",
  },
  PRODUCER_DB_PASSWORD: {
    field: null,
    kind: 'special',
    default: null,
    allowed: '16-256 printable ASCII characters without spaces',
    doc: "read by `npm run db:producer-role` only: the producer role's password (the intake); kept out of the configuration object and never printed",
  },
  READ_DB_PASSWORD: {
    field: null,
    kind: 'special',
    default: null,
    allowed: '16-256 printable ASCII characters without spaces',
    doc: "read by `npm run db:read-role` only: the read role's password (the outcome feed); kept out of the configuration object and never printed",
  },
  RELAY_DB_PASSWORD: {
    field: null,
    kind: 'special',
    default: null,
    allowed: '16-256 printable ASCII characters without spaces',
    doc: "read by `npm run db:relay-role` only: the relay role's password; kept out of the configuration object and never printed",
  },
} as const satisfies Readonly<Record<string, Setting>>;

export type SettingName = keyof typeof SETTINGS;
type SettingOf<N extends SettingName> = (typeof SETTINGS)[N];

/** The variables of one kind, e.g. `SettingNameOf<'integer'>`: what a kind's reader accepts. */
export type SettingNameOf<K extends Setting['kind']> = {
  [N in SettingName]: SettingOf<N>['kind'] extends K ? N : never;
}[SettingName];

export type LogLevel = (typeof LOG_LEVELS)[number];
export type DatabasePooler = (typeof DATABASE_POOLERS)[number];
export type UnsafeMode = (typeof UNSAFE_MODES)[number];
