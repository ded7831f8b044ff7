// A private, migrated database per test file on the configured PostgreSQL server, so test
// files run in parallel without touching each other's data; dropped again afterwards.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, withDatabase, type Config } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createPrisma, type PrismaClient } from '../../src/db/prisma.ts';

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
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  return {
    name,
    url,
    config,
    prisma,
    pg: pool,
    async drop() {
      await prisma.$disconnect();
      await pool.end();
      await dropDatabase(url);
    },
  };
}
