// `npm run db:read-role -- --role NAME`: create or update a reader's login role (password from
// READ_DB_PASSWORD, never printed), connected as the owner in DATABASE_URL. The role may only
// call outcome_events_after() (the outcome feed), wallet_balance_at() and wallet_statement() (a
// wallet's history: `npm run balance`, `npm run statement`) and operations_matching() (the query
// API: `npm run operations`). Prints its privileges as read back from the catalogs.
import { loadConfig } from '../config/config.ts';
import { ensureIntakeRole, INTAKE_ROLES, loadIntakeRolePassword } from '../db/intake-role-grants.ts';
import { parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'READ_DB_PASSWORD=... npm run db:read-role -- --role NAME';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { role: { type: 'string' } }, USAGE);
  const role = requireFlag(values.role, '--role', USAGE);
  const config = loadConfig();
  const spec = INTAKE_ROLES.read;
  const password = loadIntakeRolePassword(spec);
  process.stdout.write(`${JSON.stringify(await ensureIntakeRole(spec, config.databaseUrl, role, password, config))}\n`);
});
