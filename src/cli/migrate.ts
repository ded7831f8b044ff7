// `npm run db:migrate`: create the database when missing and apply pending migrations.
import { loadConfig } from '../config/config.ts';
import { MIGRATIONS_DIR } from '../config/paths.ts';
import { migrate } from '../db/migrations.ts';
import { ConfigError } from '../errors.ts';
import { createLogger } from '../log/logger.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  parseFlags(process.argv.slice(2), {}, 'npm run db:migrate');
  const config = loadConfig();
  if (config.databasePooler === 'pgbouncer')
    throw new ConfigError(
      'DATABASE_POOLER',
      'is pgbouncer, but db:migrate needs a session of its own (an advisory lock), which PgBouncer in transaction mode cannot keep: run it with DATABASE_URL pointing straight at PostgreSQL and DATABASE_POOLER=none',
    );
  const result = await migrate(config.databaseUrl, MIGRATIONS_DIR, createLogger(config.logLevel, 'migrate'));
  process.stdout.write(`${JSON.stringify(result)}\n`);
});
