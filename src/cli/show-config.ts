// `npm run config -- [--json]`: the resolved configuration, one variable per line with its value
// and where it came from (environment or default), secrets redacted (src/config/config-view.ts).
// An invalid environment fails here with the error a worker would stop with.
import { configView, formatConfigView } from '../config/config-view.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run config -- [--json]';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { json: { type: 'boolean' } }, USAGE);
  const rows = configView(process.env);
  process.stdout.write(values.json ? `${JSON.stringify(rows, null, 2)}\n` : formatConfigView(rows));
});
