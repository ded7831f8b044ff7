// The pool's client-side bound, through a fault proxy in front of the shared PostgreSQL: when the
// path goes silent (nothing forwarded, neither side closed), a statement fails after the query
// timeout instead of waiting for ever, its connection is destroyed rather than handed out again,
// and once the path answers again the next statement runs on a fresh connection.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../harness/chaos/fault-proxy.ts';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { closePrisma, createPool, createPrisma, dbQueryTimeoutMs } from '../../src/db/prisma.ts';

const STATEMENT_TIMEOUT_MS = 300;
const base = loadConfig();
let proxy: FaultProxy;
let url: string;

beforeAll(async () => {
  const target = new URL(base.databaseUrl);
  proxy = await FaultProxy.start('pool-deadline:postgres', target.hostname, Number(target.port || 5432));
  // The maintenance database: these statements touch no table.
  const viaProxy = new URL(withDatabase(base.databaseUrl, 'postgres'));
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  url = viaProxy.toString();
});

afterAll(async () => {
  await proxy?.close();
});

const config = () => ({ ...base, databaseUrl: url, dbPoolMax: 2, dbStatementTimeoutMs: STATEMENT_TIMEOUT_MS });

describe('a database path that stops answering', () => {
  it('fails the statement after the query timeout and discards its connection', async () => {
    const pool = createPool(config());
    pool.on('error', () => undefined);
    try {
      const before = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const firstPid = before.rows[0]?.pid;
      expect(pool.totalCount).toBe(1);

      proxy.stall();
      const started = performance.now();
      const err = await pool.query('SELECT 1').then(
        () => null,
        (e: unknown) => e,
      );
      const tookMs = performance.now() - started;
      expect(String(err)).toMatch(/Query read timeout/);
      expect(tookMs).toBeGreaterThanOrEqual(dbQueryTimeoutMs(config()) - 50);
      expect(tookMs).toBeLessThan(dbQueryTimeoutMs(config()) + 2_000);
      // Destroyed, not back in the pool: a reused connection would answer the next query with
      // the hung one's reply, or hang behind it.
      expect(pool.totalCount).toBe(0);

      proxy.unstall();
      const after = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      expect(after.rows[0]?.pid).not.toBe(firstPid);
    } finally {
      proxy.heal();
      await pool.end();
    }
  });

  it('bounds a Prisma call the same way', async () => {
    const prisma = createPrisma(config(), () => undefined);
    try {
      await prisma.$queryRaw`SELECT 1`;
      proxy.stall();
      const started = performance.now();
      const err = await prisma.$queryRaw`SELECT 2`.then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).not.toBeNull();
      expect(performance.now() - started).toBeLessThan(dbQueryTimeoutMs(config()) + 2_000);
      proxy.unstall();
      expect(await prisma.$queryRaw<{ n: number }[]>`SELECT 3::int AS n`).toEqual([{ n: 3 }]);
    } finally {
      proxy.heal();
      await closePrisma(prisma);
    }
  });

  it('sets TCP keepalive on the pooled sockets', async () => {
    const pool = createPool(config());
    try {
      const client = await pool.connect();
      // pg keeps the option on its Connection; the socket itself does not expose it.
      const connection = (client as unknown as { connection: { _keepAlive: boolean } }).connection;
      expect(connection._keepAlive).toBe(true);
      client.release();
    } finally {
      await pool.end();
    }
  });
});
