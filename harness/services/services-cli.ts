// `npm run services`: make Redis and PostgreSQL reachable at the configured URLs.

import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { ensureServices } from './ensure-services.ts';

await runCli(async () => {
  parseFlags(process.argv.slice(2), {}, 'npm run services');
  const config = loadConfig();
  const report = await ensureServices(config, createLogger(config.logLevel, 'services'));
  process.stdout.write(`${JSON.stringify(report)}\n`);
});
