// `npm run operations -- [--wallet W [--side from|to|any]] [--kind K] [--status applied|rejected]
// [--from <ISO>] [--to <ISO>] [--metadata KEY=VALUE]... [--cursor C] [--limit N]`: one page of the
// operations recorded that match every filter given (src/intake/operation-query.ts) as NDJSON, in
// the order they were decided (amounts as decimal strings, `at` to the microsecond in UTC), then a
// last line {"nextCursor": …}: pass it as --cursor for the next page; null after the last page.
// --from and --to bound the time (from included, to excluded); --side says which side of the
// operations the wallet is on. Works with the read role's URL in DATABASE_URL (`npm run db:read-role`).
import { loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { UsageError } from '../errors.ts';
import {
  type FoundOperation,
  findOperations,
  OPERATION_SIDES,
  OPERATIONS_LIMIT_DEFAULT,
  OPERATIONS_LIMIT_MAX,
  type OperationQuery,
} from '../intake/operation-query.ts';
import { instantFlag, integerFlag, metadataFlags, parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = `npm run operations -- [--wallet W [--side ${OPERATION_SIDES.join('|')}]] [--kind K] [--status applied|rejected] [--from <ISO>] [--to <ISO>] [--metadata KEY=VALUE]... [--cursor C] [--limit 1-${OPERATIONS_LIMIT_MAX}]`;

/** One operation as a JSON line: bigints as decimal strings, the time as the database keeps it. */
const operationLine = (o: FoundOperation): string =>
  JSON.stringify({
    operationId: o.operationId,
    at: o.atText,
    kind: o.kind,
    status: o.status,
    reason: o.reason,
    from: o.from,
    to: o.to,
    amount: o.amount?.toString() ?? null,
    currency: o.currency,
    original: o.original,
    reference: o.reference,
    metadata: o.metadata,
    legs: o.legs?.map((leg) => ({ to: leg.to, amount: leg.amount.toString() })) ?? null,
  });

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      wallet: { type: 'string' },
      side: { type: 'string' },
      kind: { type: 'string' },
      status: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      metadata: { type: 'string', multiple: true },
      cursor: { type: 'string' },
      limit: { type: 'string', default: String(OPERATIONS_LIMIT_DEFAULT) },
    },
    USAGE,
  );
  const metadata = metadataFlags(values.metadata);
  const query = {
    ...(values.wallet === undefined ? {} : { wallet: values.wallet }),
    ...(values.side === undefined ? {} : { side: values.side }),
    ...(values.kind === undefined ? {} : { kind: values.kind }),
    ...(values.status === undefined ? {} : { status: values.status }),
    ...(values.from === undefined ? {} : { from: instantFlag(values.from, '--from') }),
    ...(values.to === undefined ? {} : { to: instantFlag(values.to, '--to') }),
    ...(metadata === undefined ? {} : { metadata }),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
    limit: integerFlag(values.limit ?? String(OPERATIONS_LIMIT_DEFAULT), '--limit', 1, OPERATIONS_LIMIT_MAX),
  } as OperationQuery;
  const config = loadConfig();
  const pool = createPool({ ...config, dbPoolMax: 1 });
  try {
    const page = await findOperations(pool, query).catch((err: unknown) => {
      // What the library refuses before any query is the caller's mistake: a usage error.
      throw err instanceof RangeError ? new UsageError(`${err.message}\nusage: ${USAGE}`) : err;
    });
    for (const operation of page.operations) process.stdout.write(`${operationLine(operation)}\n`);
    process.stdout.write(`${JSON.stringify({ nextCursor: page.nextCursor })}\n`);
  } finally {
    await endPool(pool);
  }
});
