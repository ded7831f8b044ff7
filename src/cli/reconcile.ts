// `npm run reconcile`: check the ledger invariants; prints a JSON summary, exit 0 only if all hold.
import { loadConfig } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import { reconcile } from '../ledger/reconciliation.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  const prisma = createPrisma(loadConfig());
  try {
    const report = await reconcile(prisma);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    if (!report.ok) process.exitCode = 1;
  } finally {
    await prisma.$disconnect();
  }
});
