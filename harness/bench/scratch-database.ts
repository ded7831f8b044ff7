// A throwaway database for the database-only bench commands (bench:explain, bench:call-cost):
// created under a random name on the configured server, migrated and seeded with funded wallets,
// and dropped whatever happens. The full bench's cases use Sandbox (sandbox.ts), which also
// opens a queue and Redis keys these commands do not need.
import { randomBytes } from 'node:crypto';
import { type Config, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { BENCH_CURRENCY, BENCH_WALLET_PREFIX } from './sandbox.ts';

export interface ScratchDatabaseSpec {
  readonly config: Config;
  /** In the database's name: `bench_<tag>_<random>`. */
  readonly tag: string;
  /** Wallets `wallet-1` … `wallet-<wallets>`, in the bench's currency. */
  readonly wallets: number;
  readonly balanceMinor: bigint;
  /** Told the database's name before anything is created (so a user knows what to look for). */
  readonly onCreated?: (name: string) => void;
}

export async function withScratchDatabase<T>(
  spec: ScratchDatabaseSpec,
  use: (databaseUrl: string) => Promise<T>,
): Promise<T> {
  const name = `bench_${spec.tag}_${randomBytes(4).toString('hex')}`;
  const databaseUrl = withDatabase(spec.config.databaseUrl, name);
  spec.onCreated?.(name);
  try {
    await migrate(databaseUrl, MIGRATIONS_DIR);
    const prisma = createPrisma({ ...spec.config, databaseUrl });
    try {
      await seedWallets(prisma, {
        wallets: spec.wallets,
        balanceMinor: spec.balanceMinor,
        prefix: BENCH_WALLET_PREFIX,
        currency: BENCH_CURRENCY,
      });
    } finally {
      await closePrisma(prisma);
    }
    return await use(databaseUrl);
  } finally {
    await dropDatabase(databaseUrl);
  }
}
