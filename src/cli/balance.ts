// `npm run balance -- <wallet> [--at <ISO instant>]`: the wallet's balance and held amount at that
// instant (now unless given), as the running balances of its ledger entries left them
// (src/intake/wallet-history.ts), as one JSON line with the amounts as decimal strings. Works with
// the read role's URL in DATABASE_URL (`npm run db:read-role`).
import { loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { balanceAt } from '../intake/wallet-history.ts';
import { instantFlag, parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run balance -- <wallet> [--at 2026-12-19T10:00:00Z]';

await runCli(async () => {
  const { values, positionals } = parseFlags(process.argv.slice(2), { at: { type: 'string' } }, USAGE, 1);
  const wallet = requireFlag(positionals[0], '<wallet>', USAGE);
  const at = values.at === undefined ? new Date() : instantFlag(values.at, '--at');
  const config = loadConfig();
  const pool = createPool({ ...config, dbPoolMax: 1 });
  try {
    const b = await balanceAt(pool, wallet, at);
    process.stdout.write(
      `${JSON.stringify({
        wallet: b.wallet,
        currency: b.currency,
        balance: b.balance.toString(),
        held: b.held.toString(),
        lastEntry: b.lastEntry?.toString() ?? null,
        at: b.at.toISOString(),
      })}\n`,
    );
  } finally {
    await endPool(pool);
  }
});
