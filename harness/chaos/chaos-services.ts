// Isolation: the Redis and PostgreSQL a run uses. By default the harness starts its own
// redis-server (AOF on, so the queue survives a restart) and its own PostgreSQL cluster
// (fsync off) in temporary folders on free ports, and removes them afterwards. With
// --redis-url / --database-url it uses those servers instead, under a private queue name,
// key prefix and a database of its own, and refuses faults that would restart them.
// With --redis cluster it starts a private Redis Cluster instead (3 masters, 1 replica each,
// AOF on, data and logs under the run's folder), with a fault proxy in front of every node
// that the node announces as its address: every connection to a node, its replica's
// replication link included, passes through it (see cluster-faults.ts).
// With --pgbouncer it starts a private PgBouncer in transaction mode in front of the database
// server; the workers reach it through their fault proxies with DATABASE_POOLER=pgbouncer, and
// their bounds are the roles' defaults in the run's database (src/db/session-bounds.ts).
// The relays log in as the relay role (`npm run db:relay-role`'s ensureRelayRole(), as a user
// makes it), the workers as the worker role, each created in the run's database by the owner.
// With --postgres ha it starts a pg_auto_failover formation instead of the one server (a monitor,
// a primary, two standbys: local-pg-formation.ts) and one endpoint in front of it that follows
// its primary (primary-endpoint.ts): every client of the run, the harness's own included, reaches
// the database through that endpoint, as production reaches its primary through one address.
// With --lock etcd it starts the run's etcd cluster too, each member behind a proxy (chaos-etcd.ts).
// ChaosServices.start() brings them up one step each (startRedis, startPostgres, prepareDatabase,
// startPgBouncer, ChaosEtcd.start), each noting in Started what it brought up, so that a failure part-way takes
// down what is up (abandon()).
import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { databaseName, loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { ensureRelayRole } from '../../src/db/relay-role-grants.ts';
import { type SessionBoundsConfig, setRoleSessionBounds } from '../../src/db/session-bounds.ts';
import { dropWorkerRole, ensureWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { bullmqConnection, type RedisClient, type RedisTarget } from '../../src/queue/redis-connection.ts';
import { LocalPgFormation } from '../services/local-pg-formation.ts';
import { LocalPgBouncer } from '../services/local-pgbouncer.ts';
import { LocalPostgres } from '../services/local-postgres.ts';
import { LocalRedis } from '../services/local-redis.ts';
import { LocalRedisCluster } from '../services/local-redis-cluster.ts';
import { PrimaryEndpoint } from '../services/primary-endpoint.ts';
import { ChaosEtcd } from './chaos-etcd.ts';
import type { ChaosLockBackend, PostgresMode, RedisMode } from './chaos-options.ts';
import { FaultProxy } from './fault-proxy.ts';
import { installUnsafeDecisionsAt } from './unsafe/unsafe-decisions.ts';

/** Private database name on the harness's own cluster. */
export const PRIVATE_DATABASE = 'chaos';
/** The workers' least-privilege login role on the harness's own cluster (unique on a borrowed one). */
export const PRIVATE_WORKER_ROLE = 'chaos_worker';
/** The relays' login role on the harness's own cluster (unique on a borrowed one). */
export const PRIVATE_RELAY_ROLE = 'chaos_relay';
const WORKER_PASSWORD_BYTES = 24;
export const CHAOS_CLUSTER_MASTERS = 3;
export const CHAOS_CLUSTER_REPLICAS_PER_MASTER = 1;
/** A dead master is failed over after about this long (cluster-node-timeout). */
export const CHAOS_CLUSTER_NODE_TIMEOUT_MS = 2_000;
/** Bound on the cluster getting back to health after a restart of its masters. */
export const CLUSTER_RECOVERY_TIMEOUT_MS = 60_000;
/** What the cluster's URL stands for: no address (those are the nodes), no credentials. */
const CLUSTER_PLACEHOLDER_URL = 'redis://127.0.0.1';

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** What the harness leaves running, written to `<out>/processes.json` so a test can clean up after a crash. */
export interface ProcessRecord {
  harnessPid: number;
  redisPid: number | null;
  redisDir: string | null;
  /** --redis cluster: the nodes' redis-server processes. */
  redisClusterPids: number[];
  postgresDir: string | null;
  postgresPid: number | null;
  /** --pgbouncer: the private PgBouncer. */
  pgbouncerPid: number | null;
  /** --postgres ha: the formation's folder (its keepers run in process groups of their own). */
  formationDir: string | null;
  /** --lock etcd: the members' etcd processes. */
  etcdPids: number[];
  workerPids: number[];
}

export class ProcessRegistry {
  readonly record: ProcessRecord = {
    harnessPid: process.pid,
    redisPid: null,
    redisDir: null,
    redisClusterPids: [],
    postgresDir: null,
    postgresPid: null,
    pgbouncerPid: null,
    formationDir: null,
    etcdPids: [],
    workerPids: [],
  };

  constructor(private readonly path: string) {}

  update(change: Partial<ProcessRecord>): void {
    Object.assign(this.record, change);
    writeFileSync(this.path, `${JSON.stringify(this.record, null, 2)}\n`);
  }
}

export class ChaosServices {
  private constructor(
    readonly redisUrl: string,
    /** The owner's URL: migrates, seeds, checks; the naive negative control's workers use it too. */
    readonly databaseUrl: string,
    /** The real workers' URL: the least-privilege role (EXECUTE on the decision functions only). */
    readonly workerDatabaseUrl: string,
    private readonly workerRole: string,
    /** The relays' URL: the relay role (EXECUTE on the relay's functions only). */
    readonly relayDatabaseUrl: string,
    private readonly relayRole: string,
    private readonly redis: LocalRedis | null,
    private readonly postgres: LocalPostgres | null,
    private readonly dirs: string[],
    /** A database the harness created on a server it does not own, dropped at the end. */
    private readonly createdDatabaseOn: string | null,
    private readonly registry: ProcessRegistry,
    /** --redis cluster: the private cluster and the proxy in front of each node (by node index). */
    readonly cluster: LocalRedisCluster | null = null,
    readonly fronts: readonly FaultProxy[] = [],
    /** --pgbouncer: the PgBouncer the workers reach PostgreSQL through, and where its log is kept. */
    private readonly pgbouncer: { bouncer: LocalPgBouncer; keepLogAs: string } | null = null,
    /** --postgres ha: the formation, the endpoint every client reaches it through, and where its logs are kept. */
    readonly ha: { formation: LocalPgFormation; endpoint: PrimaryEndpoint; keepLogsIn: string } | null = null,
    /** --lock etcd: the run's etcd cluster and the proxies in front of its members. */
    readonly etcd: ChaosEtcd | null = null,
  ) {}

  /** The environment that tells a worker what stands before PostgreSQL. */
  get poolerEnv(): Record<string, string> {
    return { DATABASE_POOLER: this.pgbouncer === null ? 'none' : 'pgbouncer' };
  }

  get ownsRedis(): boolean {
    return this.redis !== null || this.cluster !== null;
  }

  /** Where the harness's own clients reach Redis: the one server, or the cluster through the nodes' announced addresses. */
  get redisTarget(): RedisTarget {
    if (this.cluster === null) return { redisUrl: this.redisUrl, redisTlsCaFile: null, redisCluster: null };
    return {
      redisUrl: CLUSTER_PLACEHOLDER_URL,
      redisTlsCaFile: null,
      redisCluster: { nodes: this.cluster.seedNodes, natMap: {} },
    };
  }

  /** Writes the nodes' and members' current pids (they change when one is killed and started again). */
  recordPids(): void {
    if (this.etcd !== null) this.registry.update({ etcdPids: this.etcd.pids() });
    if (this.cluster === null) return;
    this.registry.update({
      redisClusterPids: this.cluster.nodes.map((n) => n.server.pid).filter((p): p is number => p !== undefined),
    });
  }

  get ownsPostgres(): boolean {
    return this.postgres !== null || this.ha !== null;
  }

  get redisEndpoint(): Endpoint {
    const u = new URL(this.redisUrl);
    return { host: u.hostname, port: u.port === '' ? 6379 : Number(u.port) };
  }

  get postgresEndpoint(): Endpoint {
    const u = new URL(this.databaseUrl);
    return { host: u.hostname, port: u.port === '' ? 5432 : Number(u.port) };
  }

  /** Where the workers reach PostgreSQL (behind their proxies): the server, or its PgBouncer. */
  get workerPostgresEndpoint(): Endpoint {
    if (this.pgbouncer === null) return this.postgresEndpoint;
    return { host: '127.0.0.1', port: this.pgbouncer.bouncer.port };
  }

  get databaseName(): string {
    return databaseName(this.databaseUrl);
  }

  static async start(options: StartOptions, registry: ProcessRegistry): Promise<ChaosServices> {
    const up: Started = {
      dirs: [],
      redis: null,
      cluster: null,
      fronts: [],
      formation: null,
      endpoint: null,
      postgres: null,
      dropBorrowed: null,
      bouncer: null,
      etcd: null,
    };
    try {
      const redisUrl = await startRedis(options, registry, up);
      const { databaseUrl, createdDatabaseOn } = await startPostgres(options, registry, up);
      const roles = await prepareDatabase(options, databaseUrl, createdDatabaseOn, up);
      if (options.pgbouncer) await startPgBouncer(databaseUrl, roles.session, registry, up);
      if (options.lock === 'etcd') {
        up.etcd = await ChaosEtcd.start(options.runDir);
        registry.update({ etcdPids: up.etcd.pids() });
      }
      return new ChaosServices(
        redisUrl,
        databaseUrl,
        roleUrl(databaseUrl, roles.workerRole, roles.workerPassword),
        roles.workerRole,
        roleUrl(databaseUrl, roles.relayRole, roles.relayPassword),
        roles.relayRole,
        up.redis,
        up.postgres,
        up.dirs,
        createdDatabaseOn,
        registry,
        up.cluster,
        up.fronts,
        up.bouncer === null ? null : { bouncer: up.bouncer, keepLogAs: join(options.runDir, 'pgbouncer.log') },
        up.formation === null || up.endpoint === null
          ? null
          : { formation: up.formation, endpoint: up.endpoint, keepLogsIn: join(options.runDir, 'pg-ha') },
        up.etcd,
      );
    } catch (err) {
      await abandon(up);
      throw err;
    }
  }

  /**
   * Kills redis-server and starts it again on the same port; the AOF brings the data back. On a
   * cluster: every master in turn, each back within moments (before its replica would take over).
   */
  async restartRedis(): Promise<string> {
    if (this.cluster !== null) {
      const restarted: number[] = [];
      for (const group of this.cluster.groups) {
        const master = await this.cluster.masterOf(group);
        if (master === null) continue;
        await this.cluster.restart(master);
        restarted.push(master);
        this.recordPids();
      }
      await this.cluster.waitUntilHealthy(CLUSTER_RECOVERY_TIMEOUT_MS);
      return `masters ${restarted.join(', ')}`;
    }
    if (this.redis === null) throw new Error("restart-redis needs the harness's own Redis");
    await this.redis.restart();
    this.registry.update({ redisPid: this.redis.pid ?? null });
    return 'redis-server';
  }

  /** A client for the harness: straight to the one Redis, or to the cluster through the nodes' own proxies (never degraded for clients). */
  redisClient(): RedisClient {
    const client =
      this.cluster === null
        ? new Redis(this.redisUrl, { maxRetriesPerRequest: null })
        : bullmqConnection(this.redisTarget);
    client.on('error', () => undefined);
    return client;
  }

  /** Terminates the workers' PostgreSQL sessions (application_name 'fenced-transfers') in our database. */
  async terminateWorkerBackends(): Promise<number> {
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'chaos-harness' });
    // A failure of the query in flight reaches the caller; the 'error' event after it must not crash.
    client.on('error', () => undefined);
    await client.connect();
    try {
      const result = await client.query<{ terminated: boolean }>(
        `SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
          WHERE application_name = 'fenced-transfers' AND datname = $1 AND pid <> pg_backend_pid()`,
        [this.databaseName],
      );
      return result.rows.filter((r) => r.terminated).length;
    } finally {
      await client.end();
    }
  }

  async stop(): Promise<void> {
    await this.etcd?.stop().catch(() => undefined);
    await this.pgbouncer?.bouncer.stop(this.pgbouncer.keepLogAs).catch(() => undefined);
    await this.redis?.stop().catch(() => undefined);
    if (this.cluster !== null) {
      await this.cluster.stop().catch(() => undefined);
      await Promise.all(this.fronts.map((f) => f.close().catch(() => undefined)));
      // The run's folder keeps each node's redis.log and nodes.conf; the data goes.
      for (const node of this.cluster.nodes) {
        for (const entry of readdirSync(node.dir)) {
          if (entry !== 'redis.log' && entry !== 'nodes.conf')
            rmSync(join(node.dir, entry), { recursive: true, force: true });
        }
      }
    }
    await this.postgres?.stop('immediate').catch(() => undefined);
    if (this.ha !== null) {
      await this.ha.endpoint.close().catch(() => undefined);
      await this.ha.formation.stop().catch(() => undefined);
      // The run's folder keeps the keepers' logs (what the monitor decided, and when).
      mkdirSync(this.ha.keepLogsIn, { recursive: true });
      for (const name of ['monitor', ...this.ha.formation.nodes.map((n) => n.name)]) {
        const log = join(this.ha.formation.dir, `${name}.log`);
        if (existsSync(log)) copyFileSync(log, join(this.ha.keepLogsIn, `${name}.log`));
      }
    }
    if (this.createdDatabaseOn !== null) {
      // A failure here is reported by the caller's own checks; nothing else to do.
      await dropDatabase(withDatabase(this.createdDatabaseOn, this.databaseName)).catch(() => undefined);
      for (const role of [this.workerRole, this.relayRole]) {
        await dropWorkerRole(withDatabase(this.createdDatabaseOn, this.databaseName), role).catch(() => undefined);
      }
    }
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
    this.registry.update({
      redisPid: null,
      redisClusterPids: [],
      postgresPid: null,
      pgbouncerPid: null,
      formationDir: null,
      etcdPids: [],
    });
  }
}

interface StartOptions {
  redis: RedisMode;
  redisUrl: string | null;
  databaseUrl: string | null;
  seed: number;
  runDir: string;
  pgbouncer: boolean;
  postgres?: PostgresMode;
  /** --unsafe async-standby: the formation's commits wait for no standby. */
  asyncStandby?: boolean;
  /** A control that switches a check of the SQL decision off: install its variants (harness/chaos/unsafe/). */
  unsafeDecisions?: boolean;
  /** With unsafeDecisions: drop the wallets' CHECK (balance >= -credit_limit) too (`no-credit-limit`). */
  withoutLimitCheck?: boolean;
  /** With unsafeDecisions: drop the closed wallets' CHECK too (`no-wallet-status`). */
  withoutClosedCheck?: boolean;
  /** `etcd`: start the run's etcd cluster (chaos-etcd.ts). */
  lock?: ChaosLockBackend;
}

/** What ChaosServices.start() has brought up so far: what abandon() takes down if a later step fails. */
interface Started {
  readonly dirs: string[];
  redis: LocalRedis | null;
  cluster: LocalRedisCluster | null;
  /** The proxy in front of each cluster node (by node index). */
  readonly fronts: FaultProxy[];
  formation: LocalPgFormation | null;
  endpoint: PrimaryEndpoint | null;
  postgres: LocalPostgres | null;
  /** A borrowed server: drops the run's database and roles. */
  dropBorrowed: (() => Promise<void>) | null;
  bouncer: LocalPgBouncer | null;
  etcd: ChaosEtcd | null;
}

/** The run's Redis: a private cluster, a private server, or the one given (--redis-url); returns its URL. */
async function startRedis(options: StartOptions, registry: ProcessRegistry, up: Started): Promise<string> {
  if (options.redis === 'cluster') return startRedisCluster(options.runDir, registry, up);
  if (options.redisUrl !== null) return options.redisUrl;
  const dir = mkdtempSync(join(tmpdir(), 'chaos-redis-'));
  up.dirs.push(dir);
  const redis = await LocalRedis.start({ dir, appendOnly: true });
  up.redis = redis;
  registry.update({ redisPid: redis.pid ?? null, redisDir: dir });
  return redis.url;
}

async function startRedisCluster(runDir: string, registry: ProcessRegistry, up: Started): Promise<string> {
  const dir = join(runDir, 'redis-cluster');
  const cluster = await LocalRedisCluster.start({
    dir,
    masters: CHAOS_CLUSTER_MASTERS,
    replicasPerMaster: CHAOS_CLUSTER_REPLICAS_PER_MASTER,
    nodeTimeoutMs: CHAOS_CLUSTER_NODE_TIMEOUT_MS,
    appendOnly: true,
    removeDirOnStop: false,
    front: async (index, port) => {
      // Called again for a node that had to start on other ports: the earlier proxy goes.
      await up.fronts[index]?.close();
      const front = await FaultProxy.start(`node-${index}`, '127.0.0.1', port);
      up.fronts[index] = front;
      return front.port;
    },
  });
  up.cluster = cluster;
  registry.update({
    redisDir: dir,
    redisClusterPids: cluster.nodes.map((n) => n.server.pid).filter((p): p is number => p !== undefined),
  });
  return CLUSTER_PLACEHOLDER_URL;
}

/**
 * The run's database: on a private HA formation, on a private server, or a fresh one beside the
 * one given (--database-url), on the server the run then borrows (`createdDatabaseOn`).
 */
async function startPostgres(
  options: StartOptions,
  registry: ProcessRegistry,
  up: Started,
): Promise<{ databaseUrl: string; createdDatabaseOn: string | null }> {
  if (options.postgres === 'ha') {
    return { databaseUrl: await startFormation(options.asyncStandby === true, registry, up), createdDatabaseOn: null };
  }
  if (options.databaseUrl === null) {
    // The cluster folder itself is made here and handed to the postgres user by LocalPostgres.
    const dir = mkdtempSync(join(tmpdir(), 'chaos-pg-'));
    up.dirs.push(dir);
    registry.update({ postgresDir: dir });
    const postgres = await LocalPostgres.start({ dir, fsync: false });
    up.postgres = postgres;
    registry.update({ postgresPid: postgres.postmasterPid() });
    return { databaseUrl: withDatabase(postgres.url, PRIVATE_DATABASE), createdDatabaseOn: null };
  }
  // Never write into the given database: a fresh one beside it, dropped afterwards.
  return {
    databaseUrl: withDatabase(options.databaseUrl, `chaos_${options.seed}_${randomBytes(4).toString('hex')}`),
    createdDatabaseOn: options.databaseUrl,
  };
}

/** --postgres ha: the formation and the endpoint in front of its primary; returns the endpoint's URL. */
async function startFormation(asyncStandby: boolean, registry: ProcessRegistry, up: Started): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-pg-ha-'));
  up.dirs.push(dir);
  registry.update({ formationDir: dir });
  const formation = await LocalPgFormation.start({ dir, settings: { fsync: 'off' } });
  up.formation = formation;
  if (asyncStandby) {
    await formation.setNumberSyncStandbys(0);
    await formation.setOnEveryNode('synchronous_commit', 'local');
    await formation.waitHealthy();
  }
  const endpoint = await PrimaryEndpoint.start(formation);
  up.endpoint = endpoint;
  return endpoint.url;
}

/** The run's login roles, and the session bounds they were given. */
interface RunRoles {
  readonly workerRole: string;
  readonly workerPassword: string;
  readonly relayRole: string;
  readonly relayPassword: string;
  readonly session: SessionBoundsConfig;
}

/** Migrates the run's database, installs the unsafe decisions a control needs, and makes its roles. */
async function prepareDatabase(
  options: StartOptions,
  databaseUrl: string,
  createdDatabaseOn: string | null,
  up: Started,
): Promise<RunRoles> {
  // Roles are cluster-wide: on a borrowed server the name is unique and dropped in stop().
  const workerRole =
    createdDatabaseOn === null ? PRIVATE_WORKER_ROLE : `chaos_worker_${options.seed}_${randomBytes(4).toString('hex')}`;
  const relayRole =
    createdDatabaseOn === null ? PRIVATE_RELAY_ROLE : `chaos_relay_${options.seed}_${randomBytes(4).toString('hex')}`;
  if (createdDatabaseOn !== null) {
    up.dropBorrowed = async () => {
      await dropDatabase(databaseUrl).catch(() => undefined);
      await dropWorkerRole(databaseUrl, workerRole).catch(() => undefined);
      await dropWorkerRole(databaseUrl, relayRole).catch(() => undefined);
    };
  }
  await migrate(databaseUrl, MIGRATIONS_DIR);
  // The migrations define no decision that can skip a check; a negative control that needs
  // one gets it here, in this run's own database only.
  if (options.unsafeDecisions === true)
    await installUnsafeDecisionsAt(databaseUrl, {
      withoutLimitCheck: options.withoutLimitCheck === true,
      withoutClosedCheck: options.withoutClosedCheck === true,
    });
  const workerPassword = randomBytes(WORKER_PASSWORD_BYTES).toString('hex');
  // The workers run with the default bounds; behind PgBouncer they reach them as the roles'
  // defaults, the owner's too (the naive negative control's workers log in as the owner).
  const session: SessionBoundsConfig = loadConfig({
    DATABASE_POOLER: options.pgbouncer ? 'pgbouncer' : 'none',
  });
  await ensureWorkerRole(databaseUrl, workerRole, workerPassword, session);
  // The relays reach PostgreSQL straight, never through PgBouncer: their bounds are start-up parameters.
  const relayPassword = randomBytes(WORKER_PASSWORD_BYTES).toString('hex');
  await ensureRelayRole(databaseUrl, relayRole, relayPassword, session);
  return { workerRole, workerPassword, relayRole, relayPassword, session };
}

/** --pgbouncer: the owner's session bounds, then a private PgBouncer in front of the database server. */
async function startPgBouncer(
  databaseUrl: string,
  session: SessionBoundsConfig,
  registry: ProcessRegistry,
  up: Started,
): Promise<void> {
  await setOwnerSessionBounds(databaseUrl, session);
  const server = new URL(databaseUrl);
  const bouncer = await LocalPgBouncer.start({
    serverHost: server.hostname,
    serverPort: server.port === '' ? 5432 : Number(server.port),
    authUser: decodeURIComponent(server.username) || 'postgres',
  });
  up.bouncer = bouncer;
  registry.update({ pgbouncerPid: bouncer.pid ?? null });
}

/** Takes down what a failed start() brought up, each step's failure ignored, and removes its folders. */
async function abandon(up: Started): Promise<void> {
  await up.etcd?.stop().catch(() => undefined);
  await up.bouncer?.stop().catch(() => undefined);
  await up.endpoint?.close().catch(() => undefined);
  await up.formation?.stop().catch(() => undefined);
  await up.dropBorrowed?.();
  await up.redis?.stop().catch(() => undefined);
  await up.cluster?.stop().catch(() => undefined);
  await Promise.all(up.fronts.map((f) => f.close().catch(() => undefined)));
  await up.postgres?.stop('immediate').catch(() => undefined);
  for (const dir of up.dirs) rmSync(dir, { recursive: true, force: true });
}

/** The owner's session bounds in the run's database, as `npm run db:session-bounds` sets them. */
async function setOwnerSessionBounds(databaseUrl: string, session: SessionBoundsConfig): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'chaos-harness' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const me = (await client.query<{ me: string }>('SELECT current_user AS me')).rows[0]?.me;
    if (me === undefined) throw new Error('cannot read the current role');
    await setRoleSessionBounds(client, me, session);
  } finally {
    await client.end().catch(() => undefined);
  }
}
