// `npm run db:seed -- --wallets N --balance AMOUNT [--credit-limit AMOUNT] [--prefix wallet-] [--currency EUR]`:
// the new wallets, each with its opening balance and its credit limit (0 unless given).
import { loadConfig } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import { seedWallets } from '../ledger/seed-wallets.ts';
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
  const prisma = createPrisma(loadConfig());
  try {
    process.stdout.write(`${JSON.stringify(await seedWallets(prisma, request))}\n`);
  } finally {
    await prisma.$disconnect();
  }
});
