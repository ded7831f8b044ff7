// `npm run lock:epoch`: the lock epochs the database recorded, newest last, and the one in force.
// `npm run lock:epoch -- --open redis|etcd|postgres [--note TEXT]`, as the database's owner
// (DATABASE_URL): opens the next epoch for that lock service, the step of a switch that makes
// every token of the new service outrank every token of the old (docs/operating/lock-services.md).
// `--unless-current`: open it only when the epoch in force is not already that service's (a
// deployment's one-shot job, run at every start, opens one epoch, once).
import pg from 'pg';
import { loadConfig } from '../config/config.ts';
import { UsageError } from '../errors.ts';
import { currentLockEpoch, lockEpochHistory, openLockEpoch } from '../lock/lock-epochs.ts';
import { LOCK_BACKENDS, type LockBackendName } from '../lock/lock-service.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run lock:epoch [-- --open redis|etcd|postgres [--note TEXT] [--unless-current]]';
const NOTE_LENGTH_MAX = 200;

function backendOf(raw: string): LockBackendName {
  const backend = LOCK_BACKENDS.find((b) => b === raw);
  if (backend === undefined) throw new UsageError(`--open must be one of ${LOCK_BACKENDS.join(', ')}\nusage: ${USAGE}`);
  return backend;
}

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    { open: { type: 'string' }, note: { type: 'string' }, 'unless-current': { type: 'boolean' } },
    USAGE,
  );
  if ((values.note !== undefined || values['unless-current'] === true) && values.open === undefined)
    throw new UsageError(`--note and --unless-current go with --open\nusage: ${USAGE}`);
  const note = values.note ?? '';
  if (note.length > NOTE_LENGTH_MAX) throw new UsageError(`--note is at most ${NOTE_LENGTH_MAX} characters`);
  const backend = values.open === undefined ? null : backendOf(values.open);
  const client = new pg.Client({ connectionString: loadConfig().databaseUrl });
  await client.connect();
  try {
    const skip =
      backend !== null && values['unless-current'] === true && (await currentLockEpoch(client)).backend === backend;
    const opened = backend === null || skip ? null : await openLockEpoch(client, backend, note);
    const current = await currentLockEpoch(client);
    const epochs = await lockEpochHistory(client);
    process.stdout.write(`${JSON.stringify({ ...(opened === null ? {} : { opened }), current, epochs })}\n`);
  } finally {
    await client.end();
  }
});
