// Dropping a database under its own pools, the way every test file and the demo do: once the
// pools are closed with endPool()/closePrisma() no session of theirs is left on the server for
// the drop's FORCE to end, and a session the server does end (an idle pool under a drop) reaches
// the pool's 'error' listener instead of crashing the process.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { dropDatabase, ensureDatabase } from '../../src/db/database-admin.ts';
import { endPool, openConnectionCount, trackConnections } from '../../src/db/pool-close.ts';
import { closePrisma, createPool, createPrisma } from '../../src/db/prisma.ts';
import { uniqueName } from '../support/test-db.ts';

/** Rounds of open-use-close; a closed pool must leave no session behind in any of them. */
const ROUNDS = 10;
const POOL_SIZE = 4;
const TERMINATION_WAIT_MS = 30_000;

const config = loadConfig();
const dbName = uniqueName('ft_poolclose');
const url = withDatabase(config.databaseUrl, dbName);
let admin: pg.Client;

async function sessionsOnDatabase(): Promise<number> {
  const r = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [
    dbName,
  ]);
  return r.rows[0]?.n ?? -1;
}

/** Makes the pool open POOL_SIZE connections at once. */
async function useEveryConnection(query: () => Promise<unknown>): Promise<void> {
  await Promise.all(Array.from({ length: POOL_SIZE }, query));
}

beforeAll(async () => {
  await ensureDatabase(url);
  admin = new pg.Client({ connectionString: withDatabase(config.databaseUrl, 'postgres') });
  admin.on('error', () => undefined);
  await admin.connect();
});

afterAll(async () => {
  await admin?.end();
  await dropDatabase(url);
});

describe('closing a pool before its database is dropped', () => {
  it('endPool() returns once the server has closed every session of the pool', async () => {
    const left: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const pool = trackConnections(new pg.Pool({ connectionString: url, max: POOL_SIZE }));
      pool.on('error', () => undefined);
      await useEveryConnection(() => pool.query('SELECT pg_sleep(0.01)'));
      expect(openConnectionCount(pool)).toBe(POOL_SIZE);
      expect(await sessionsOnDatabase()).toBe(POOL_SIZE);
      expect(await endPool(pool)).toBe(0);
      left.push(await sessionsOnDatabase());
    }
    expect(left).toEqual(Array.from({ length: ROUNDS }, () => 0));
  });

  it("closePrisma() does the same for the Prisma client's pool", async () => {
    const left: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const prisma = createPrisma({ ...config, databaseUrl: url, dbPoolMax: POOL_SIZE });
      await useEveryConnection(() => prisma.$queryRaw`SELECT 1 AS one FROM pg_sleep(0.01)`);
      expect(await sessionsOnDatabase()).toBeGreaterThan(0);
      expect(await closePrisma(prisma)).toBe(0);
      left.push(await sessionsOnDatabase());
    }
    expect(left).toEqual(Array.from({ length: ROUNDS }, () => 0));
  });
});

describe('a database dropped WITH (FORCE) under an idle pool', () => {
  it("ends the pool's sessions with 57P01, which reach the pool's listener, not the process", async () => {
    const victimUrl = withDatabase(config.databaseUrl, uniqueName('ft_poolvictim'));
    await ensureDatabase(victimUrl);
    const errors: { code?: string }[] = [];
    const pool = createPool({ ...config, databaseUrl: victimUrl, dbPoolMax: POOL_SIZE }, (err) =>
      errors.push(err as { code?: string }),
    );
    try {
      await useEveryConnection(() => pool.query('SELECT 1'));
      expect(openConnectionCount(pool)).toBe(POOL_SIZE);
      await dropDatabase(victimUrl);
      const deadline = performance.now() + TERMINATION_WAIT_MS;
      while (openConnectionCount(pool) > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(openConnectionCount(pool)).toBe(0);
      expect(errors.length).toBeGreaterThan(0);
      expect(errors.every((e) => e.code === '57P01' || /terminat/i.test(String(e)))).toBe(true);
      // The pool is still usable as an object: its next query fails as a rejected promise.
      await expect(pool.query('SELECT 1')).rejects.toThrow(/does not exist/);
    } finally {
      await pool.end();
    }
  });
});
