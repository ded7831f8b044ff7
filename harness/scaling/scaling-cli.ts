// `npm run scaling -- [--transfers N] [--workers 1,2,4] [--redis single,cluster] [--out DIR]`: the
// throughput table of docs/operating/scaling.md (see run-scaling.ts). Private servers, started and removed
// here; prints the Markdown table, and writes it with the raw figures under the output folder.
import { join } from 'node:path';
import { integerFlag, parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { UsageError } from '../../src/errors.ts';
import { defaultCases, renderTable, runScaling } from './run-scaling.ts';

const USAGE = 'npm run scaling -- [--transfers N] [--workers 1,2,4] [--out DIR]';
export const SCALING_TRANSFERS_DEFAULT = 10_000;
export const SCALING_TRANSFERS_MAX = 200_000;
export const SCALING_WORKERS_MAX = 16;

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      transfers: { type: 'string' },
      workers: { type: 'string' },
      out: { type: 'string' },
    },
    USAGE,
  );
  const transfers =
    values.transfers === undefined ? SCALING_TRANSFERS_DEFAULT : integerFlag(values.transfers, '--transfers');
  if (transfers < 100 || transfers > SCALING_TRANSFERS_MAX)
    throw new UsageError(`--transfers must be from 100 to ${SCALING_TRANSFERS_MAX}`);
  const workers = (values.workers ?? '1,2,4').split(',').map((w) => integerFlag(w.trim(), '--workers'));
  if (workers.some((w) => w < 1 || w > SCALING_WORKERS_MAX))
    throw new UsageError(`--workers: each count from 1 to ${SCALING_WORKERS_MAX}`);
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const out = values.out ?? join(PROJECT_ROOT, '.runs', `scaling-${stamp}`);
  const results = await runScaling({
    cases: defaultCases(workers),
    transfers,
    out,
    workerEntry: loadConfig().workerEntry,
    log: (l) => process.stderr.write(`${l}\n`),
  });
  process.stdout.write(`${renderTable(results)}\n\nfigures: ${out}\n`);
  if (results.some((r) => !r.reconciled)) process.exitCode = 1;
});
