// `npx tsx test/support/long-functions-cli.ts`: the length ratchet's offences, exit 1 if any.
// With `--write` it first takes from test/layout/long-functions.json every entry the code has
// outgrown (tightenList: a function gone or within the limit leaves, a shorter one is lowered). It
// never adds or raises an entry, so what remains to report is code to split.
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { describeOffences, judgeLengths } from './function-lengths.ts';
import { LONG_FUNCTIONS_LIST, measureProject, readList, tightenListFile } from './long-functions.ts';

const USAGE = 'npx tsx test/support/long-functions-cli.ts [--write]';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { write: { type: 'boolean', default: false } }, USAGE);
  const measured = measureProject();
  const list = values.write ? tightenListFile(measured) : readList();
  const offences = judgeLengths(measured, list);
  if (offences.length === 0) {
    process.stdout.write(`${LONG_FUNCTIONS_LIST}: ${Object.keys(list).length} entries, no offence\n`);
    return;
  }
  process.stderr.write(`${describeOffences(offences, LONG_FUNCTIONS_LIST)}\n`);
  process.exitCode = 1;
});
