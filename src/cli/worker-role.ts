// `npm run db:worker-role -- --role NAME`: create or update the worker's login role (password
// from WORKER_DB_PASSWORD, never printed), connected as the owner in DATABASE_URL. Prints the
// role's privileges as read back from the catalogs.
import { loadConfig, loadWorkerDbPassword } from '../config/config.ts';
import { ensureWorkerRole } from '../db/worker-role-grants.ts';
import { parseFlags, requireFlag } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'WORKER_DB_PASSWORD=... npm run db:worker-role -- --role NAME';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { role: { type: 'string' } }, USAGE);
  const role = requireFlag(values.role, '--role', USAGE);
  const config = loadConfig();
  const password = loadWorkerDbPassword();
  process.stdout.write(`${JSON.stringify(await ensureWorkerRole(config.databaseUrl, role, password, config))}\n`);
});
