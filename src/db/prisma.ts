// The Prisma client factory: @prisma/adapter-pg over a pg pool of explicit size, with the
// server-side bounds that keep a frozen worker from blocking the next lock holder. Fit for
// PgBouncer in transaction mode (DATABASE_POOLER=pgbouncer): no start-up parameters then, and no
// named prepared statements ever (the adapter names none unless given statementNameGenerator,
// which PgBouncer before 1.21 could not keep apart across server connections).
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import type { Config } from '../config/config.ts';
import { PrismaClient } from '../generated/prisma/client.ts';
import { connectionsClosed, trackConnections } from './pool-close.ts';
import { assertSessionBounds, sessionStartupParameters } from './session-bounds.ts';

export type { PrismaClient };

/** How long a caller waits for a free pooled connection before the attempt fails (retryable). */
export const DB_CONNECTION_TIMEOUT_MS = 5_000;
/**
 * The client's own deadline on a statement is the server's statement_timeout plus this: a server
 * that can answer cancels first (a real SQLSTATE, the connection kept); the client's fires only
 * when nothing comes back at all (a host gone after accepting the query), and pg then destroys
 * that connection, so the pool never hands it out again.
 */
export const DB_QUERY_TIMEOUT_MARGIN_MS = 1_000;
/** Idle time before TCP keepalive probes start on a pooled connection (a vanished host is found). */
export const DB_KEEPALIVE_IDLE_MS = 10_000;

/** The pool's query_timeout: statement_timeout plus the margin. */
export function dbQueryTimeoutMs(config: Pick<Config, 'dbStatementTimeoutMs'>): number {
  return config.dbStatementTimeoutMs + DB_QUERY_TIMEOUT_MARGIN_MS;
}

/**
 * The longest one database call can take while PostgreSQL answers: a connection within
 * DB_CONNECTION_TIMEOUT_MS, then the statement within the query timeout. The batcher's deadline
 * on a decision and the lease's bound without progress (src/queue/transfer-worker.ts) are this.
 */
export function dbCallDeadlineMs(config: Pick<Config, 'dbStatementTimeoutMs'>): number {
  return DB_CONNECTION_TIMEOUT_MS + dbQueryTimeoutMs(config);
}

export type DbConfig = Pick<
  Config,
  | 'databaseUrl'
  | 'databasePooler'
  | 'dbPoolMax'
  | 'dbStatementTimeoutMs'
  | 'dbLockTimeoutMs'
  | 'dbIdleInTransactionTimeoutMs'
>;

export function createPool(config: DbConfig, onError?: (err: Error) => void): pg.Pool {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.dbPoolMax,
    // Client-side bounds: a statement nobody answers fails (and its connection is destroyed),
    // and an idle connection to a vanished host is found by keepalive probes.
    query_timeout: dbQueryTimeoutMs(config),
    keepAlive: true,
    keepAliveInitialDelayMillis: DB_KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: DB_CONNECTION_TIMEOUT_MS,
    // The server-side bounds, for every statement without a round trip: a session frozen inside
    // a transaction is ended by the server, a statement waiting on a row lock or running away is
    // cancelled, and timestamps are read and written in UTC. Start-up parameters straight to
    // PostgreSQL, the role's defaults behind PgBouncer; each new connection checks they are in
    // force before its first use (session-bounds.ts).
    ...sessionStartupParameters(config),
    onConnect: (client) => assertSessionBounds(client, config),
    application_name: 'fenced-transfers',
  });
  // A backend terminated while idle (failover, pg_terminate_backend) emits here, and so does one
  // the server ends while its client is closing (a database dropped WITH (FORCE)); without a
  // listener the process would crash. The pool drops the client and opens a new one later.
  pool.on('error', (err) => onError?.(err));
  return trackConnections(pool);
}

const poolOf = new WeakMap<PrismaClient, pg.Pool>();

export function createPrisma(config: DbConfig, onError?: (err: Error) => void): PrismaClient {
  const pool = createPool(config, onError);
  const adapter = new PrismaPg(pool, { disposeExternalPool: true, onPoolError: onError, onConnectionError: onError });
  const prisma = new PrismaClient({ adapter });
  poolOf.set(prisma, pool);
  return prisma;
}

/** The connections of a client's pool and the queries waiting for one (pg.Pool's counts); null for a client not made here. */
export function poolUseOf(prisma: PrismaClient): { total: number; idle: number; waiting: number } | null {
  const pool = poolOf.get(prisma);
  return pool === undefined ? null : { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}

/**
 * $disconnect(), then wait until the server has closed every connection: use it before the
 * database is dropped (see pool-close.ts). Returns the connections still open after the wait.
 */
export async function closePrisma(prisma: PrismaClient): Promise<number> {
  await prisma.$disconnect();
  const pool = poolOf.get(prisma);
  return pool === undefined ? 0 : connectionsClosed(pool);
}

/** Prisma's raw query as a pg-like `query(text, values)` (for code written against pg, such as lock-epochs.ts). */
export function rawQueryable(prisma: PrismaClient): {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
} {
  return {
    query: async <R extends object>(text: string, values: unknown[] = []) => ({
      rows: await prisma.$queryRawUnsafe<R[]>(text, ...values),
    }),
  };
}
