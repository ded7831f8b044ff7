// `npm run db:seed -- --wallets N --balance AMOUNT [--credit-limit AMOUNT] [--prefix wallet-] [--currency EUR]`:
// opens the wallets <prefix>1 … <prefix>N (those that do not exist yet) with their credit limit (0
// unless given) and deposits each one's opening balance, through the fenced lock and the decision
// every operation takes (src/queue/seed-by-operations.ts): each has its records
// (`seed:open:<wallet>`, `seed:fund:<wallet>`) and outcome events. Needs PostgreSQL and Redis (and
// LOCK_BACKEND's lock service, in the epoch in force, as a worker does).
import { loadConfig } from '../config/config.ts';
import { createPrisma, rawQueryable } from '../db/prisma.ts';
import { lockEpochFor } from '../lock/lock-epochs.ts';
import type { LockService } from '../lock/lock-service.ts';
import { createLockService } from '../lock/lock-services.ts';
import { createLogger } from '../log/logger.ts';
import { closeRedis, lockConnection } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { seedByOperations } from '../queue/seed-by-operations.ts';
import { amountFlag, integerFlag, parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE =
  'npm run db:seed -- --wallets N --balance AMOUNT [--credit-limit AMOUNT] [--prefix wallet-] [--currency EUR]';

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      wallets: { type: 'string' },
      balance: { type: 'string' },
      'credit-limit': { type: 'string', default: '0' },
      prefix: { type: 'string', default: 'wallet-' },
      currency: { type: 'string', default: 'EUR' },
    },
    USAGE,
  );
  const request = {
    wallets: integerFlag(requireFlag(values.wallets, '--wallets', USAGE), '--wallets'),
    balanceMinor: amountFlag(requireFlag(values.balance, '--balance', USAGE), '--balance'),
    creditLimitMinor: amountFlag(values['credit-limit'] ?? '0', '--credit-limit'),
    prefix: values.prefix ?? 'wallet-',
    currency: values.currency ?? 'EUR',
  };
  const config = loadConfig();
  const redis = lockConnection(config);
  await redisReachable(redis, config);
  redis.on('error', () => undefined);
  const prisma = createPrisma(config);
  let lock: LockService | undefined;
  try {
    // The lock service of LOCK_BACKEND, in the epoch in force, as a worker's (run-worker.ts).
    const epoch = await lockEpochFor(rawQueryable(prisma), config.lock.backend);
    lock = createLockService(config, { redis, logger: createLogger('warn', 'seed'), epoch: epoch.epoch });
    process.stdout.write(`${JSON.stringify(await seedByOperations(prisma, lock, request))}\n`);
  } finally {
    await lock?.close();
    await prisma.$disconnect();
    await closeRedis(redis, 2_000);
  }
});
