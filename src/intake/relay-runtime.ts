// The relay as a running thing, shared by `npm run relay` (src/cli/relay-cli.ts) and anything that
// starts one in-process (tests, chaos, bench): a loop of relayBatch() (relay.ts) while anything is
// due, RELAY_IDLE_MS of rest when nothing is, and in each round one turn of the outcome publisher
// (outcome-publisher.ts). Any number of relays may run at once: the intake's rows are claimed
// with SKIP LOCKED and the publisher's cursor is held by one relay at a time.
//
// A Redis or PostgreSQL fault does not end the relay: the round is logged, counted and retried
// after a doubling back-off (capped), and /readyz says what does not answer. stop() lets the
// round in hand finish, then closes the connections.
//
// Life of a relay process (runRelayProcess, run by src/ops/process-runtime.ts like every process
// of the product): its HTTP server listens (/readyz 503), Redis and PostgreSQL are probed until
// they answer or STARTUP_TIMEOUT_MS is up (then one error line, exit 1), the loop runs; the first
// SIGTERM/SIGINT finishes the round in hand, closes everything and exits 0; a second one, or
// SHUTDOWN_TIMEOUT_MS passing, exits 1 at once (the rows it claimed are sent again after
// INTAKE_RESEND_AFTER_MS). Once ready it asks the catalogs whether the role it logs in as owns
// tables (or is a superuser), and warns if so: a relay needs only the relay role
// (`npm run db:relay-role`), which may execute its functions and touch no table.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { type Config, loadConfig, redactUrl } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { readMigrations } from '../db/migrations.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { RELAY_FUNCTIONS } from '../db/relay-role-grants.ts';
import { createLogger, type Logger } from '../log/logger.ts';
import { HealthMonitor, type HealthState } from '../ops/health-monitor.ts';
import type { OpsServer, Readiness } from '../ops/ops-server.ts';
import { PostgresProbe, probeRedis, withinMs } from '../ops/probes.ts';
import { type ClosingStep, describeFailures, type ProcessLife, ProcessRuntime } from '../ops/process-runtime.ts';
import {
  COMPLETED_JOBS_KEPT_MAX,
  COMPLETED_JOBS_KEPT_S,
  FAILED_JOBS_KEPT_MAX,
  FAILED_JOBS_KEPT_S,
} from '../queue/job-options.ts';
import { TransferQueues } from '../queue/producer.ts';
import { outcomesQueueOf } from '../queue/queue-shards.ts';
import {
  bullmqConnection,
  closeRedis,
  describeRedisTarget,
  lockConnection,
  type RedisClient,
} from '../queue/redis-connection.ts';
import { outcomesCursor, publishOutcomes } from './outcome-publisher.ts';
import { intakeBacklog, type RelayBatchResult, relayBatch } from './relay.ts';
import { RelayMetrics } from './relay-metrics.ts';

/** First back-off after a failed round; it doubles per failure in a row up to the cap. */
export const RELAY_ERROR_BACKOFF_MS = 100;
export const RELAY_ERROR_BACKOFF_CAP_MS = 5_000;
/** Bound on closing each connection at stop. */
export const RELAY_CLOSE_TIMEOUT_MS = 2_000;

export type RelayConfig = Pick<
  Config,
  | 'databaseUrl'
  | 'databasePooler'
  | 'dbPoolMax'
  | 'dbStatementTimeoutMs'
  | 'dbLockTimeoutMs'
  | 'dbIdleInTransactionTimeoutMs'
  | 'redisUrl'
  | 'redisTlsCaFile'
  | 'redisCluster'
  | 'queueName'
  | 'queueShards'
  | 'jobAttemptsMax'
  | 'intakeResendAfterMs'
  | 'relayBatchMax'
  | 'relayIdleMs'
  | 'outcomesQueueName'
>;

export interface RelayOptionsIn {
  readonly config: RelayConfig;
  readonly logger: Logger;
  readonly metrics?: RelayMetrics;
  /** False: relay transfers only, publish no outcomes (default true). */
  readonly publishOutcomes?: boolean;
  /** Called after every round that did something (tests, harnesses). */
  readonly onRound?: (round: { batch: RelayBatchResult; published: number }) => void;
}

/** A relay loop over its own connections. */
export class Relay {
  readonly metrics: RelayMetrics;
  readonly pool: pg.Pool;
  readonly connection: RedisClient;
  readonly queues: TransferQueues;
  readonly outcomesQueue: Queue;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | null = null;
  private failuresInARow = 0;
  /** The last round's error while rounds fail; null once one succeeds. */
  lastError: string | null = null;

  constructor(private readonly options: RelayOptionsIn) {
    const { config, logger } = options;
    this.metrics = options.metrics ?? new RelayMetrics();
    this.pool = createPool(config, (err) => logger.warn({ err }, 'database connection error'));
    this.connection = bullmqConnection(config);
    let connectionError: string | null = null;
    this.connection.on('error', (err: Error) => {
      logger[connectionError === null ? 'warn' : 'debug'](
        { connection: 'queue', err: err.message },
        'redis connection error',
      );
      connectionError = err.message;
    });
    this.connection.on('ready', () => {
      connectionError = null;
    });
    this.queues = TransferQueues.open(this.connection, config, config.jobAttemptsMax);
    const outcomes = outcomesQueueOf(config);
    this.outcomesQueue = new Queue(outcomes.name, {
      connection: this.connection,
      prefix: outcomes.prefix,
      defaultJobOptions: {
        removeOnComplete: { count: COMPLETED_JOBS_KEPT_MAX, age: COMPLETED_JOBS_KEPT_S },
        removeOnFail: { count: FAILED_JOBS_KEPT_MAX, age: FAILED_JOBS_KEPT_S },
      },
    });
    for (const queue of [...this.queues.queues, this.outcomesQueue]) {
      queue.on('error', (err) => logger.debug({ err: err.message, queue: queue.name }, 'queue connection error'));
    }
    this.metrics.setGaugeSource({
      backlog: () => intakeBacklog(this.pool),
      cursorPosition: () => outcomesCursor(this.pool),
    });
  }

  /** Starts the loop (once). */
  start(): void {
    this.loop ??= this.run();
  }

  get running(): boolean {
    return this.loop !== null && !this.stopping.signal.aborted;
  }

  /** One round: a batch of the intake, then one turn of the publisher. */
  async round(): Promise<{ batch: RelayBatchResult; published: number }> {
    const { config } = this.options;
    const batch = await relayBatch(this.pool, this.queues, {
      batchMax: config.relayBatchMax,
      resendAfterMs: config.intakeResendAfterMs,
    });
    this.metrics.sent.inc(batch.sent);
    this.metrics.resent.inc(batch.resent);
    this.metrics.lost.inc(batch.lost);
    this.metrics.givenUpFound.inc(batch.givenUp);
    this.metrics.undone.inc(batch.undone);
    if (batch.undone > 0) {
      this.options.logger.error(
        { event: 'relay_decisions_lost', undone: batch.undone },
        're-sends found jobs completed whose decisions the database no longer holds (it went back in time): sent again',
      );
    }
    if (batch.lost > 0 || batch.givenUp > 0) {
      this.options.logger.warn(
        { event: 'relay_recovered', lost: batch.lost, givenUp: batch.givenUp, resent: batch.resent },
        're-sends found jobs the queue had lost (added again) or failed for good (recorded as given up)',
      );
    }
    let published = 0;
    if (this.options.publishOutcomes !== false) {
      published = (await publishOutcomes(this.pool, this.outcomesQueue, config.relayBatchMax)).published;
      this.metrics.published.inc(published);
    }
    return { batch, published };
  }

  private async run(): Promise<void> {
    const { config, logger } = this.options;
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      let busy = false;
      try {
        const result = await this.round();
        busy = result.batch.sent + result.batch.givenUp > 0 || result.published > 0;
        if (busy) {
          logger.debug({ event: 'relay_round', ...result.batch, published: result.published }, 'relay round');
          this.options.onRound?.(result);
        }
        if (this.failuresInARow > 0) logger.info({ event: 'relay_recovered_from_error' }, 'relay rounds succeed again');
        this.failuresInARow = 0;
        this.lastError = null;
      } catch (err) {
        this.failuresInARow += 1;
        this.metrics.errors.inc();
        this.lastError = err instanceof Error ? err.message : String(err);
        const backoffMs = Math.min(RELAY_ERROR_BACKOFF_CAP_MS, RELAY_ERROR_BACKOFF_MS * 2 ** (this.failuresInARow - 1));
        logger[this.failuresInARow === 1 ? 'error' : 'warn'](
          { event: 'relay_round_failed', err, failuresInARow: this.failuresInARow, backoffMs },
          'relay round failed; retrying after a back-off',
        );
        await sleep(backoffMs, undefined, { signal }).catch(() => undefined);
        continue;
      }
      if (!busy) await sleep(config.relayIdleMs, undefined, { signal }).catch(() => undefined);
    }
  }

  /** Lets the round in hand finish, then closes the queues, Redis and the pool. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    await Promise.all(
      [...this.queues.queues, this.outcomesQueue].map((q) =>
        withinMs(q.close(), RELAY_CLOSE_TIMEOUT_MS, 'Redis').catch(() => undefined),
      ),
    );
    await closeRedis(this.connection, RELAY_CLOSE_TIMEOUT_MS);
    await endPool(this.pool, RELAY_CLOSE_TIMEOUT_MS).catch(() => undefined);
  }
}

/** What the catalogs say of the role a relay logs in as, when it is stronger than a relay needs. */
export interface RelayRoleStrength {
  readonly role: string;
  /** Tables (plain and partitioned) it owns in this database. */
  readonly tablesOwned: number;
  readonly superuser: boolean;
}

/** The logged-in role's ownership of tables and superuser flag; null when it has neither. */
export async function relayRoleStrength(pool: pg.Pool | pg.ClientBase): Promise<RelayRoleStrength | null> {
  const { rows } = await pool.query<{ role: string; tables: number; superuser: boolean }>(`
    SELECT r.rolname AS role, r.rolsuper AS superuser,
           (SELECT count(*)::integer FROM pg_class c
             WHERE c.relowner = r.oid AND c.relkind IN ('r', 'p')
               AND c.relnamespace NOT IN (SELECT oid FROM pg_namespace
                                           WHERE nspname IN ('pg_catalog', 'information_schema') OR nspname LIKE 'pg_toast%')) AS tables
      FROM pg_roles r WHERE r.rolname = current_user`);
  const row = rows[0];
  if (row === undefined || (row.tables === 0 && !row.superuser)) return null;
  return { role: row.role, tablesOwned: row.tables, superuser: row.superuser };
}

/**
 * Logs one warning (event `relay_role_too_strong`) when the relay logs in as a role that owns
 * tables or is a superuser: it could rewrite any row, where the relay role may only execute the
 * relay's functions. A failed check is logged and the relay goes on.
 */
export async function warnWhenRelayRoleTooStrong(pool: pg.Pool | pg.ClientBase, logger: Logger): Promise<void> {
  try {
    const strength = await relayRoleStrength(pool);
    if (strength === null) return;
    logger.warn(
      {
        event: 'relay_role_too_strong',
        ...strength,
        fix: 'create the relay role with RELAY_DB_PASSWORD=... npm run db:relay-role -- --role NAME (as the owner) and log the relay in as it in DATABASE_URL (docs/operating/security.md)',
      },
      'the relay logs in as a role that owns tables or is a superuser; it needs only the relay role',
    );
  } catch (err) {
    logger.warn({ event: 'relay_role_check_failed', err }, "could not read the relay's role from the catalogs");
  }
}

/** Runs one relay process until it is told to stop; resolves with the exit code. */
export async function runRelayProcess(name = 'relay'): Promise<number> {
  const relay = new RelayLife(name);
  return await relay.runtime.run(relay);
}

/**
 * One relay process, as src/ops/process-runtime.ts runs it: the probes' connections and the HTTP
 * server at once, the relay loop once the servers answer, and the order they close in.
 */
class RelayLife implements ProcessLife {
  readonly runtime: ProcessRuntime;
  private readonly config: Config;
  private readonly logger: Logger;
  private readonly instanceId: string;
  private readonly metrics = new RelayMetrics({ defaultMetrics: true });
  private readonly redis: Redis;
  private readonly pgProbe: PostgresProbe;
  private server: OpsServer | null = null;
  /** Set once, when the servers answer. */
  private relay: Relay | null = null;

  /** What the relay owns, in the order it closes (after the health monitor): the round in hand first. */
  readonly closing: readonly ClosingStep[] = [
    { name: 'relay', close: () => this.relay?.stop() },
    { name: 'PostgreSQL probe', close: () => this.pgProbe.close(RELAY_CLOSE_TIMEOUT_MS) },
    { name: 'probe connection', close: () => closeRedis(this.redis, RELAY_CLOSE_TIMEOUT_MS) },
    { name: 'HTTP server', close: () => this.server?.close() },
  ];

  constructor(name: string) {
    this.config = loadConfig();
    const { config } = this;
    this.logger = createLogger(config.logLevel, name);
    this.instanceId = `${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
    this.redis = lockConnection(config);
    let redisError: string | null = null;
    this.redis.on('error', (err: Error) => {
      redisError = err.message;
    });
    this.redis.on('ready', () => {
      redisError = null;
    });
    // The migrations of this build must be in, and the role it logs in as must execute the relay's functions.
    this.pgProbe = new PostgresProbe(
      config.databaseUrl,
      readMigrations(MIGRATIONS_DIR),
      config,
      RELAY_FUNCTIONS,
      'db:relay-role',
    );
    const monitor = new HealthMonitor({
      probes: [
        (timeoutMs) => probeRedis(this.redis, config.redisUrl, timeoutMs, () => redisError),
        (timeoutMs) => this.pgProbe.probe(timeoutMs),
      ],
      logger: this.logger,
    });
    this.runtime = new ProcessRuntime({
      logger: this.logger,
      monitor,
      startupTimeoutMs: config.startupTimeoutMs,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
    });
  }

  async listen(): Promise<void> {
    const { config } = this;
    if (config.relayMetricsPort !== null) {
      this.server = await this.runtime
        .serve({
          host: config.metricsHost,
          port: config.relayMetricsPort,
          portVariable: 'RELAY_METRICS_PORT',
          metrics: this.metrics,
        })
        .catch((err: unknown) => {
          this.redis.disconnect();
          throw err;
        });
    }
    this.logger.info(
      {
        event: 'relay_starting',
        instanceId: this.instanceId,
        metricsPort: this.server?.port ?? null,
        redis: describeRedisTarget(config),
        database: redactUrl(config.databaseUrl),
      },
      'waiting for Redis and PostgreSQL',
    );
  }

  /** Opens the relay's connections, checks the role it logs in as, and starts the loop. */
  async open(): Promise<void> {
    const { config, logger, metrics } = this;
    this.relay = new Relay({ config, logger, metrics });
    await warnWhenRelayRoleTooStrong(this.relay.pool, logger);
    this.relay.start();
  }

  begin(): void {
    const { config, relay } = this;
    this.logger.info(
      {
        event: 'relay_started',
        instanceId: this.instanceId,
        queues: relay?.queues.queues.map((q) => q.name),
        outcomesQueue: relay?.outcomesQueue.name,
        batchMax: config.relayBatchMax,
        idleMs: config.relayIdleMs,
        resendAfterMs: config.intakeResendAfterMs,
        metricsPort: this.server?.port ?? null,
      },
      'relay started',
    );
  }

  /** /readyz while running: the servers answer. */
  readiness(health: HealthState): Readiness {
    return health.healthy ? { ready: true } : { ready: false, reason: describeFailures(health) };
  }

  stopping(signal: string): 'graceful' {
    this.logger.info({ event: 'relay_stopping', signal }, 'relay stopping');
    return 'graceful';
  }

  stopped(): void {
    this.logger.info({ event: 'relay_stopped' }, 'relay stopped');
  }
}
