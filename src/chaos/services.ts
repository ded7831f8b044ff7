// Isolation: the Redis and PostgreSQL a run uses. By default the harness starts its own
// redis-server (AOF on, so the queue survives a restart) and its own PostgreSQL cluster
// (fsync off) in temporary folders on free ports, and removes them afterwards. With
// --redis-url / --database-url it uses those servers instead, under a private queue name,
// key prefix and a database of its own, and refuses faults that would restart them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { databaseName, withDatabase } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { dropDatabase } from '../db/database-admin.ts';
import { migrate } from '../db/migrate.ts';
import { dropWorkerRole, ensureWorkerRole, roleUrl } from '../db/worker-role.ts';
import { LocalPostgres } from '../services/local-postgres.ts';
import { LocalRedis } from '../services/local-redis.ts';

/** Private database name on the harness's own cluster. */
export const PRIVATE_DATABASE = 'chaos';
/** The workers' least-privilege login role on the harness's own cluster (unique on a borrowed one). */
export const PRIVATE_WORKER_ROLE = 'chaos_worker';
const WORKER_PASSWORD_BYTES = 24;

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** What the harness leaves running, written to `<out>/processes.json` so a test can clean up after a crash. */
export interface ProcessRecord {
  harnessPid: number;
  redisPid: number | null;
  redisDir: string | null;
  postgresDir: string | null;
  postgresPid: number | null;
  workerPids: number[];
}

export class ProcessRegistry {
  readonly record: ProcessRecord = { harnessPid: process.pid, redisPid: null, redisDir: null, postgresDir: null, postgresPid: null, workerPids: [] };

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
    private readonly redis: LocalRedis | null,
    private readonly postgres: LocalPostgres | null,
    private readonly dirs: string[],
    /** A database the harness created on a server it does not own, dropped at the end. */
    private readonly createdDatabaseOn: string | null,
    private readonly registry: ProcessRegistry,
  ) {}

  get ownsRedis(): boolean {
    return this.redis !== null;
  }

  get ownsPostgres(): boolean {
    return this.postgres !== null;
  }

  get redisEndpoint(): Endpoint {
    const u = new URL(this.redisUrl);
    return { host: u.hostname, port: u.port === '' ? 6379 : Number(u.port) };
  }

  get postgresEndpoint(): Endpoint {
    const u = new URL(this.databaseUrl);
    return { host: u.hostname, port: u.port === '' ? 5432 : Number(u.port) };
  }

  get databaseName(): string {
    return databaseName(this.databaseUrl);
  }

  static async start(options: { redisUrl: string | null; databaseUrl: string | null; seed: number },
    registry: ProcessRegistry): Promise<ChaosServices> {
    const dirs: string[] = [];
    let redis: LocalRedis | null = null;
    let postgres: LocalPostgres | null = null;
    let dropBorrowed: (() => Promise<void>) | null = null;
    try {
      let redisUrl = options.redisUrl;
      if (redisUrl === null) {
        const dir = mkdtempSync(join(tmpdir(), 'chaos-redis-'));
        dirs.push(dir);
        redis = await LocalRedis.start({ dir, appendOnly: true });
        redisUrl = redis.url;
        registry.update({ redisPid: redis.pid ?? null, redisDir: dir });
      }
      let databaseUrl: string;
      let createdDatabaseOn: string | null = null;
      if (options.databaseUrl === null) {
        // The cluster folder itself is made here and handed to the postgres user by LocalPostgres.
        const dir = mkdtempSync(join(tmpdir(), 'chaos-pg-'));
        dirs.push(dir);
        registry.update({ postgresDir: dir });
        postgres = await LocalPostgres.start({ dir, fsync: false });
        registry.update({ postgresPid: postgres.postmasterPid() });
        databaseUrl = withDatabase(postgres.url, PRIVATE_DATABASE);
      } else {
        // Never write into the given database: a fresh one beside it, dropped afterwards.
        databaseUrl = withDatabase(options.databaseUrl, `chaos_${options.seed}_${randomBytes(4).toString('hex')}`);
        createdDatabaseOn = options.databaseUrl;
      }
      // Roles are cluster-wide: on a borrowed server the name is unique and dropped in stop().
      const workerRole = createdDatabaseOn === null ? PRIVATE_WORKER_ROLE : `chaos_worker_${options.seed}_${randomBytes(4).toString('hex')}`;
      if (createdDatabaseOn !== null) {
        const url = databaseUrl;
        dropBorrowed = async () => {
          await dropDatabase(url).catch(() => undefined);
          await dropWorkerRole(url, workerRole).catch(() => undefined);
        };
      }
      await migrate(databaseUrl, MIGRATIONS_DIR);
      const workerPassword = randomBytes(WORKER_PASSWORD_BYTES).toString('hex');
      await ensureWorkerRole(databaseUrl, workerRole, workerPassword);
      return new ChaosServices(redisUrl, databaseUrl, roleUrl(databaseUrl, workerRole, workerPassword), workerRole,
        redis, postgres, dirs, createdDatabaseOn, registry);
    } catch (err) {
      await dropBorrowed?.();
      await redis?.stop().catch(() => undefined);
      await postgres?.stop('immediate').catch(() => undefined);
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Kills redis-server and starts it again on the same port; the AOF brings the data back. */
  async restartRedis(): Promise<void> {
    if (this.redis === null) throw new Error('restart-redis needs the harness\'s own Redis');
    await this.redis.restart();
    this.registry.update({ redisPid: this.redis.pid ?? null });
  }

  /** A plain client straight to Redis (not through a proxy). */
  redisClient(): Redis {
    const client = new Redis(this.redisUrl, { maxRetriesPerRequest: null });
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
    await this.redis?.stop().catch(() => undefined);
    await this.postgres?.stop('immediate').catch(() => undefined);
    if (this.createdDatabaseOn !== null) {
      // A failure here is reported by the caller's own checks; nothing else to do.
      await dropDatabase(withDatabase(this.createdDatabaseOn, this.databaseName)).catch(() => undefined);
      await dropWorkerRole(withDatabase(this.createdDatabaseOn, this.databaseName), this.workerRole).catch(() => undefined);
    }
    for (const dir of this.dirs) rmSync(dir, { recursive: true, force: true });
    this.registry.update({ redisPid: null, postgresPid: null });
  }
}
