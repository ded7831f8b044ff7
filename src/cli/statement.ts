// `npm run statement -- <wallet> --from <ISO> --to <ISO> [--cursor C] [--limit N] [--held]`: one
// page of the wallet's statement (src/intake/wallet-history.ts) as NDJSON: its ledger entries with
// from <= time < to in the order they were decided, each with its account's balance after it
// (amounts and ids as decimal strings, `at` to the microsecond in UTC), then a last line
// {"nextCursor": …}: pass it as --cursor for the next page; null after the last page. --held adds
// the entries of the wallet's holding account (`$held:<wallet>`). Works with the read role's URL
// in DATABASE_URL (`npm run db:read-role`).
import { loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import {
  STATEMENT_LIMIT_DEFAULT,
  STATEMENT_LIMIT_MAX,
  type StatementEntry,
  statement,
} from '../intake/wallet-history.ts';
import { instantFlag, integerFlag, parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = `npm run statement -- <wallet> --from <ISO> --to <ISO> [--cursor C] [--limit 1-${STATEMENT_LIMIT_MAX}] [--held]`;

/** One entry as a JSON line: bigints as decimal strings, the time as the database keeps it. */
const entryLine = (e: StatementEntry): string =>
  JSON.stringify({
    entryId: e.entryId.toString(),
    at: e.atText,
    operationId: e.operationId,
    account: e.account,
    kind: e.kind,
    amount: e.amount.toString(),
    balanceAfter: e.balanceAfter.toString(),
  });

await runCli(async () => {
  const { values, positionals } = parseFlags(
    process.argv.slice(2),
    {
      from: { type: 'string' },
      to: { type: 'string' },
      cursor: { type: 'string' },
      limit: { type: 'string', default: String(STATEMENT_LIMIT_DEFAULT) },
      held: { type: 'boolean', default: false },
    },
    USAGE,
    1,
  );
  const wallet = requireFlag(positionals[0], '<wallet>', USAGE);
  const from = instantFlag(requireFlag(values.from, '--from', USAGE), '--from');
  const to = instantFlag(requireFlag(values.to, '--to', USAGE), '--to');
  const limit = integerFlag(values.limit ?? String(STATEMENT_LIMIT_DEFAULT), '--limit', 1, STATEMENT_LIMIT_MAX);
  const config = loadConfig();
  const pool = createPool({ ...config, dbPoolMax: 1 });
  try {
    const page = await statement(pool, wallet, {
      from,
      to,
      limit,
      held: values.held === true,
      ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
    });
    for (const entry of page.entries) process.stdout.write(`${entryLine(entry)}\n`);
    process.stdout.write(`${JSON.stringify({ nextCursor: page.nextCursor })}\n`);
  } finally {
    await endPool(pool);
  }
});
