// A private, migrated database per test file on the configured PostgreSQL server, so test
// files run in parallel without touching each other's data; dropped again afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, withDatabase, type Config } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrate.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';

export interface TestDatabase {
  name: string;
  url: string;
  /** The base configuration with DATABASE_URL pointing at this database. */
  config: Config;
  prisma: PrismaClient;
  /** A plain pg pool for assertions that should not go through the code under test. */
  pg: pg.Pool;
  drop(): Promise<void>;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export async function createTestDatabase(prefix = 'ft_test', env: Record<string, string> = {}): Promise<TestDatabase> {
  const base = loadConfig({ ...process.env, ...env });
  const name = uniqueName(prefix);
  const url = withDatabase(base.databaseUrl, name);
  try {
    await migrate(url, MIGRATIONS_DIR);
  } catch (err) {
    await dropDatabase(url).catch(() => undefined);
    throw err;
  }
  const config = loadConfig({ ...process.env, ...env, DATABASE_URL: url });
  const prisma = createPrisma(config);
  const pool = trackConnections(new pg.Pool({ connectionString: url, max: 4 }));
  // An idle connection the server ends (a test that terminates backends, the drop below when a
  // socket is slow to close) is dropped by the pool and replaced on the next query; a server
  // that is really gone fails that query instead. Without a listener it would crash the file.
  pool.on('error', () => undefined);
  return {
    name,
    url,
    config,
    prisma,
    pg: pool,
    async drop() {
      // Every socket closed first, so the drop's FORCE has no session of ours left to end.
      await closePrisma(prisma);
      await endPool(pool);
      await dropDatabase(url);
    },
  };
}
