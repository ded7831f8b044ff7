// `npm run status -- <operationId>`: the stored outcome as JSON; exit 1 when unknown.
import { loadConfig } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import { ID_PATTERN } from '../ledger/transfer-request.ts';
import { readTransfer } from '../ledger/transfer-status.ts';
import { parseFlags, UsageError } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run status -- <operationId>';

await runCli(async () => {
  const { positionals } = parseFlags(process.argv.slice(2), {}, USAGE, 1);
  const operationId = positionals[0];
  if (positionals.length !== 1 || operationId === undefined) throw new UsageError(`expected one operation id\nusage: ${USAGE}`);
  if (!ID_PATTERN.test(operationId)) throw new UsageError('an operation id is 1-128 characters of [A-Za-z0-9._:-]');
  const prisma = createPrisma(loadConfig());
  try {
    const record = await readTransfer(prisma, operationId);
    if (record === null) {
      process.stdout.write(`${JSON.stringify({ operationId, status: 'unknown' })}\n`);
      process.exitCode = 1;
      return;
    }
    process.stdout.write(`${JSON.stringify(record)}\n`);
  } finally {
    await prisma.$disconnect();
  }
});
