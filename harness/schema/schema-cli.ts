// `npm run db:new-migration -- <name> "<why>"` writes the next migration from the source files in
// prisma/sql/ that changed (harness/schema/new-migration.ts) and refreshes prisma/schema.sql;
// `npm run db:snapshot` refreshes prisma/schema.sql alone, refusing when the source files and the
// migrations disagree. Both make scratch databases on the server of DATABASE_URL and drop them.
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { UsageError } from '../../src/errors.ts';
import { writeNewMigration, writeSnapshot } from './new-migration.ts';
import { SCHEMA_SNAPSHOT_PATH, SQL_SOURCES_DIR } from './sql-sources.ts';

const USAGE = 'npm run db:new-migration -- <name> "<what it changes and why>" | npm run db:snapshot';

await runCli(async () => {
  const [command, ...rest] = process.argv.slice(2);
  const paths = {
    serverUrl: loadConfig().databaseUrl,
    migrationsDir: MIGRATIONS_DIR,
    sourcesDir: SQL_SOURCES_DIR,
    snapshotPath: SCHEMA_SNAPSHOT_PATH,
  };
  if (command === 'snapshot') {
    parseFlags(rest, {}, USAGE);
    await writeSnapshot(paths);
    process.stdout.write(`${JSON.stringify({ written: 'prisma/schema.sql' })}\n`);
    return;
  }
  if (command !== 'new-migration') throw new UsageError(`usage: ${USAGE}`);
  const { positionals } = parseFlags(rest, {}, USAGE, 2);
  const [name, why] = positionals;
  if (name === undefined || why === undefined) throw new UsageError(`usage: ${USAGE}`);
  try {
    const result = await writeNewMigration({ ...paths, name, why });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    if (result.folder === null) process.stderr.write('nothing to write: prisma/sql/ agrees with the migrations\n');
  } catch (err) {
    if (err instanceof Error && /^migration name|^say what/.test(err.message)) throw new UsageError(err.message);
    throw err;
  }
});
