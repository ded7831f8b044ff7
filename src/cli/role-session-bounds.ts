// `npm run db:session-bounds [-- --role NAME]`: make the configured session bounds
// (DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS, DB_IDLE_IN_TRANSACTION_TIMEOUT_MS, TimeZone=UTC)
// the defaults of a role in the database of DATABASE_URL: of the role logged in there (the owner,
// whose commands then run behind PgBouncer with them), or of --role. `npm run db:worker-role`
// does the same for the worker role. Prints what it set.
import pg from 'pg';
import { databaseName, loadConfig } from '../config/config.ts';
import { setRoleSessionBounds } from '../db/session-bounds.ts';
import { ROLE_NAME_PATTERN } from '../db/worker-role-grants.ts';
import { WorkerRoleError } from '../errors.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run db:session-bounds [-- --role NAME]';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { role: { type: 'string' } }, USAGE);
  const config = loadConfig();
  if (values.role !== undefined && !ROLE_NAME_PATTERN.test(values.role))
    throw new WorkerRoleError(`--role must be 1-63 characters of [a-z0-9_], not starting with a digit`);
  const client = new pg.Client({ connectionString: config.databaseUrl, application_name: 'fenced-transfers-admin' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const role = values.role ?? (await client.query<{ me: string }>('SELECT current_user AS me')).rows[0]?.me;
    if (role === undefined) throw new Error('cannot read the current role');
    const sessionDefaults = await setRoleSessionBounds(client, role, config);
    process.stdout.write(`${JSON.stringify({ role, database: databaseName(config.databaseUrl), sessionDefaults })}\n`);
  } finally {
    await client.end().catch(() => undefined);
  }
});
