// `npm run demo`: the main job end to end (see harness/demo/run-demo.ts); exit 0 only if it all adds up.

import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { createLogger } from '../../src/log/logger.ts';
import { formatSummary, runDemo } from './run-demo.ts';

await runCli(async () => {
  const config = loadConfig();
  const summary = await runDemo(
    config,
    createLogger(config.logLevel === 'info' ? 'warn' : config.logLevel, 'demo'),
    process.stdout,
  );
  process.stdout.write(`\n${formatSummary(summary)}\n`);
  if (!summary.ok) process.exitCode = 1;
});
