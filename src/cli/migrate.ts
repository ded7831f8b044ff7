// `npm run db:migrate`: create the database when missing and apply pending migrations.
import { loadConfig } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { migrate } from '../db/migrations.ts';
import { createLogger } from '../log/logger.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  parseFlags(process.argv.slice(2), {}, 'npm run db:migrate');
  const config = loadConfig();
  const result = await migrate(config.databaseUrl, MIGRATIONS_DIR, createLogger(config.logLevel, 'migrate'));
  process.stdout.write(`${JSON.stringify(result)}\n`);
});
