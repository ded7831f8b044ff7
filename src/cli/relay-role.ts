// `npm run db:relay-role -- --role NAME`: create or update the relay's login role (password from
// RELAY_DB_PASSWORD, never printed), connected as the owner in DATABASE_URL. The role may only
// execute the relay's functions (src/db/relay-role-grants.ts). Prints its privileges as read back
// from the catalogs.
import { loadConfig } from '../config/config.ts';
import { ensureRelayRole, loadRelayDbPassword } from '../db/relay-role-grants.ts';
import { parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'RELAY_DB_PASSWORD=... npm run db:relay-role -- --role NAME';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { role: { type: 'string' } }, USAGE);
  const role = requireFlag(values.role, '--role', USAGE);
  const config = loadConfig();
  const password = loadRelayDbPassword();
  process.stdout.write(`${JSON.stringify(await ensureRelayRole(config.databaseUrl, role, password, config))}\n`);
});
