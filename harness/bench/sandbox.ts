// The private ground of one measured case: a fresh database (migrated, wallets seeded) and a
// fresh queue and key prefix on the configured PostgreSQL and Redis, under names no one else
// uses; dispose() drops the database, obliterates the queue and deletes the keys, and is called
// whatever happened (a failed check, an error, Ctrl-C).
import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { type Config, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
import { createTransferQueue } from '../../src/queue/producer.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import type { CaseName } from './bench-options.ts';
import type { CpuServers } from './cpu-account.ts';

export const BENCH_WALLET_PREFIX = 'wallet-';
export const BENCH_CURRENCY = 'EUR';
/** Connections of the bench's own measuring pool (queries after a case, not during it). */
const MEASURE_POOL_MAX = 2;
/** Keys deleted per UNLINK when the case's Redis keys are removed. */
const KEY_DELETE_BATCH = 1_000;

/** A case's code in its names; e2e-payments' parts share one database and queue, named by the mode. */
const CASE_CODES: Readonly<Record<CaseName | 'e2e-payments', string>> = {
  'db-ceiling': 'dbc',
  'db-ceiling-first': 'dbcf',
  'db-ceiling-paired': 'dbcp',
  'seed-design': 'seed',
  'queue-ceiling': 'qc',
  e2e: 'e2e',
  'e2e-payments': 'pay',
  'e2e-payments-hold': 'payh',
  'e2e-payments-capture': 'payc',
  'e2e-payments-split': 'pays',
  'e2e-intake-1': 'ei1',
  'e2e-intake-100': 'ei100',
  'e2e-unbatched': 'e2eu',
  'e2e-traced': 'e2et',
  'peer-graphile-worker': 'peer',
  hot: 'hot',
  'low-rate': 'lr',
  'low-rate-unbatched': 'lru',
};

/** One id per bench invocation, in every name it creates: `20261201123456a1b2`. */
export function benchRunId(now: Date = new Date()): string {
  return `${now.toISOString().replace(/[-:T]/g, '').slice(0, 14)}${randomBytes(2).toString('hex')}`;
}

export interface SandboxNames {
  readonly database: string;
  readonly queue: string;
  readonly keyPrefix: string;
}

/** A case on a lock service other than Redis (`--lock`) has it in its names: `bench_<id>_e2e_etcd_r1`. */
export function sandboxNames(
  runId: string,
  caseName: CaseName | 'e2e-payments',
  run: number,
  lock: LockBackendName = 'redis',
): SandboxNames {
  const code = lock === 'redis' ? CASE_CODES[caseName] : `${CASE_CODES[caseName]}_${lock}`;
  return {
    database: `bench_${runId}_${code}_r${run}`,
    queue: `bench-${runId}-${code}-r${run}`,
    keyPrefix: `bench:${runId}:${code}:r${run}:`,
  };
}

export interface SandboxSpec {
  readonly config: Config;
  readonly names: SandboxNames;
  /** Wallets to seed; 0 creates no database at all (the queue-only case). */
  readonly wallets: number;
  readonly balanceMinor: bigint;
  readonly withQueue: boolean;
}

export class Sandbox {
  private disposed = false;

  private constructor(
    readonly names: SandboxNames,
    readonly databaseUrl: string | null,
    /** For the bench's own reads after a case; never the system under test. */
    readonly pool: pg.Pool | null,
    /** For reconcile() (src/ledger/reconciliation.ts), which speaks Prisma. */
    readonly prisma: PrismaClient | null,
    readonly connection: Redis,
    readonly queue: Queue | null,
  ) {}

  static async create(spec: SandboxSpec): Promise<Sandbox> {
    const { config, names } = spec;
    const connection = bullmqConnection(config);
    const queue = spec.withQueue ? createTransferQueue(connection, names.queue, config.jobAttemptsMax) : null;
    const databaseUrl = spec.wallets > 0 ? withDatabase(config.databaseUrl, names.database) : null;
    let pool: pg.Pool | null = null;
    let prisma: PrismaClient | null = null;
    const sandbox = () => new Sandbox(names, databaseUrl, pool, prisma, connection, queue);
    try {
      if (databaseUrl !== null) {
        await migrate(databaseUrl, MIGRATIONS_DIR);
        pool = trackConnections(
          new pg.Pool({ connectionString: databaseUrl, max: MEASURE_POOL_MAX, options: '-c TimeZone=UTC' }),
        );
        // An idle connection the server ends must not crash the bench (see src/db/pool-close.ts).
        pool.on('error', () => undefined);
        prisma = createPrisma({ ...config, databaseUrl, dbPoolMax: MEASURE_POOL_MAX });
        await seedWallets(prisma, {
          wallets: spec.wallets,
          balanceMinor: spec.balanceMinor,
          prefix: BENCH_WALLET_PREFIX,
          currency: BENCH_CURRENCY,
        });
      }
      return sandbox();
    } catch (err) {
      await sandbox()
        .dispose()
        .catch(() => undefined);
      throw err;
    }
  }

  /** The servers this case runs on, for its CPU account (see cpu-account.ts). */
  cpuServers(intervalMs: number): CpuServers {
    return { pool: this.pool, redis: this.connection, intervalMs };
  }

  requirePool(): pg.Pool {
    if (this.pool === null) throw new Error(`case ${this.names.queue} has no database`);
    return this.pool;
  }

  requireQueue(): Queue {
    if (this.queue === null) throw new Error(`case ${this.names.database} has no queue`);
    return this.queue;
  }

  requireDatabaseUrl(): string {
    if (this.databaseUrl === null) throw new Error(`case ${this.names.queue} has no database`);
    return this.databaseUrl;
  }

  /** Removes everything the case created; each step runs even when an earlier one failed. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    const errors: unknown[] = [];
    const step = async (work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (err) {
        errors.push(err);
      }
    };
    // Every socket closed first, so the drop's FORCE has no session of ours left to end.
    if (this.prisma !== null) await step(() => closePrisma(this.prisma as PrismaClient));
    if (this.pool !== null) await step(() => endPool(this.pool as pg.Pool));
    if (this.databaseUrl !== null) await step(() => dropDatabase(this.databaseUrl as string));
    if (this.queue !== null) {
      await step(() => (this.queue as Queue).obliterate({ force: true }));
      await step(() => (this.queue as Queue).close());
    }
    await step(() => deleteKeys(this.connection, this.names.keyPrefix));
    this.connection.disconnect();
    if (errors.length > 0) {
      throw new Error(
        `cleaning up ${this.names.database}: ${errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')}`,
      );
    }
  }
}

/** Deletes every key under the prefix (lock keys, fence counters, counters) with SCAN + UNLINK. */
async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', KEY_DELETE_BATCH);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/**
 * Creates the sandbox, runs `use`, and disposes of it whatever happened. A cleanup error is
 * thrown when `use` succeeded, and reported through `onCleanupError` when `use` already threw
 * (so the first error is the one the caller sees).
 */
export async function withSandbox<T>(
  spec: SandboxSpec,
  use: (sandbox: Sandbox) => Promise<T>,
  onCleanupError: (err: unknown) => void,
): Promise<T> {
  const sandbox = await Sandbox.create(spec);
  let result: T;
  try {
    result = await use(sandbox);
  } catch (err) {
    await sandbox.dispose().catch(onCleanupError);
    throw err;
  }
  await sandbox.dispose();
  return result;
}
