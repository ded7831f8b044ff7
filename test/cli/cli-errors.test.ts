// Every command a user runs, against each mistake a newcomer makes: a database that does not
// exist, one that was never migrated, PostgreSQL or Redis not listening, a wrong password, a role
// that does not exist, a role without the owner's rights. Each must end with exit code non-zero
// and one line on stderr that names the variable or the missing step: no stack, no password.
// The wrong password and the missing rights need password authentication, so they run against a
// private PostgreSQL (SCRAM); the rest against the shared server.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/services/free-port.ts';
import { LocalPostgres } from '../../harness/services/local-postgres.ts';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { type CliResult, describeRun, runSource } from '../support/cli-process.ts';
import { uniqueName } from '../support/test-db.ts';

/** Commands run at once: each is a tsx start-up (1-2 s of CPU) on a machine shared with others. */
const PARALLEL_MAX = 4;
const CASE_TIMEOUT_MS = 45_000;

type Trip =
  | 'missing-database'
  | 'unmigrated'
  | 'postgres-unreachable'
  | 'redis-unreachable'
  | 'wrong-password'
  | 'missing-role'
  | 'not-owner';

interface Command {
  name: string;
  file: string;
  args: string[];
  env?: Record<string, string>;
  trips: Trip[];
}

const POSTGRES_TRIPS: Trip[] = [
  'missing-database',
  'unmigrated',
  'postgres-unreachable',
  'wrong-password',
  'missing-role',
  'not-owner',
];

const COMMANDS: Command[] = [
  // A missing or unmigrated database is what db:migrate fixes, so those are not trips for it.
  {
    name: 'db:migrate',
    file: 'src/cli/migrate.ts',
    args: [],
    trips: ['postgres-unreachable', 'wrong-password', 'missing-role', 'not-owner'],
  },
  {
    name: 'db:seed',
    file: 'src/cli/seed.ts',
    args: ['--wallets', '2', '--balance', '100'],
    trips: [...POSTGRES_TRIPS, 'redis-unreachable'],
  },
  {
    name: 'db:worker-role',
    file: 'src/cli/worker-role.ts',
    args: ['--role', 'cli_trip_worker'],
    env: { WORKER_DB_PASSWORD: randomBytes(12).toString('hex') },
    trips: POSTGRES_TRIPS,
  },
  {
    name: 'worker',
    file: 'src/cli/worker.ts',
    args: [],
    // Its JSON log shares stderr; the start-up error line is what is checked here.
    env: { METRICS_PORT: 'off', STARTUP_TIMEOUT_MS: '1000', LOG_LEVEL: 'silent' },
    trips: [
      'missing-database',
      'unmigrated',
      'postgres-unreachable',
      'redis-unreachable',
      'wrong-password',
      'missing-role',
    ],
  },
  {
    name: 'relay',
    file: 'src/cli/relay-cli.ts',
    args: [],
    env: { RELAY_METRICS_PORT: 'off', STARTUP_TIMEOUT_MS: '1000', LOG_LEVEL: 'silent' },
    trips: [
      'missing-database',
      'unmigrated',
      'postgres-unreachable',
      'redis-unreachable',
      'wrong-password',
      'missing-role',
    ],
  },
  { name: 'redrive', file: 'src/cli/redrive.ts', args: ['--all'], trips: [...POSTGRES_TRIPS, 'redis-unreachable'] },
  {
    name: 'enqueue',
    file: 'src/cli/enqueue.ts',
    args: ['--from', 'wallet-1', '--to', 'wallet-2', '--amount', '1'],
    trips: ['redis-unreachable'],
  },
  { name: 'status <id>', file: 'src/cli/status.ts', args: ['cli-trip-1'], trips: POSTGRES_TRIPS },
  { name: 'status', file: 'src/cli/status.ts', args: [], trips: ['redis-unreachable'] },
  { name: 'reconcile', file: 'src/cli/reconcile.ts', args: [], trips: POSTGRES_TRIPS },
  {
    name: 'dashboard',
    file: 'src/cli/dashboard.ts',
    args: [],
    env: { DASHBOARD_PORT: '0' },
    trips: ['redis-unreachable'],
  },
  // These start local servers when none answers (by design), so only a server that refuses is a trip.
  {
    name: 'services',
    file: 'harness/services/services-cli.ts',
    args: [],
    trips: ['wrong-password', 'missing-role'],
  },
  { name: 'demo', file: 'harness/demo/demo-cli.ts', args: [], trips: ['wrong-password', 'missing-role'] },
  {
    name: 'bench',
    file: 'harness/bench/bench-cli.ts',
    args: ['--quick'],
    trips: ['wrong-password', 'missing-role'],
  },
];

const OWNER_PASSWORD = `owner-${randomBytes(8).toString('hex')}`;
const NEWCOMER_PASSWORD = `right-${randomBytes(8).toString('hex')}`;
const WRONG_PASSWORD = `wrong-${randomBytes(8).toString('hex')}`;
const PASSWORDS = [OWNER_PASSWORD, NEWCOMER_PASSWORD, WRONG_PASSWORD];
const NEWCOMER = 'cli_newcomer';

let dir: string;
let postgres: LocalPostgres;
let unmigratedUrl: string;
const missingDatabase = uniqueName('ft_cli_missing');
const missingRole = uniqueName('ft_nobody');
let closedPostgresPort: number;
let closedRedisPort: number;

/** The environment of each trip and what its one line must say. */
function trip(t: Trip): { env: Record<string, string>; says: RegExp[] } {
  const shared = loadConfig().databaseUrl;
  const privateUrl = (user: string, password: string) =>
    `postgresql://${user}:${password}@127.0.0.1:${postgres.port}/transfers`;
  switch (t) {
    case 'missing-database':
      return { env: { DATABASE_URL: withDatabase(shared, missingDatabase) }, says: [/run npm run db:migrate/] };
    case 'unmigrated':
      return { env: { DATABASE_URL: unmigratedUrl }, says: [/run npm run db:migrate/] };
    case 'postgres-unreachable': {
      const u = new URL(shared);
      u.port = String(closedPostgresPort);
      return { env: { DATABASE_URL: u.toString() }, says: [/DATABASE_URL/, new RegExp(`:${closedPostgresPort}\\b`)] };
    }
    case 'redis-unreachable':
      return {
        env: { REDIS_URL: `redis://127.0.0.1:${closedRedisPort}` },
        says: [/REDIS_URL/, new RegExp(`:${closedRedisPort}\\b`)],
      };
    case 'wrong-password':
      return { env: { DATABASE_URL: privateUrl(NEWCOMER, WRONG_PASSWORD) }, says: [/DATABASE_URL/, /password/] };
    case 'missing-role': {
      const u = new URL(shared);
      u.username = missingRole;
      return { env: { DATABASE_URL: u.toString() }, says: [/DATABASE_URL/, new RegExp(`role "${missingRole}"`)] };
    }
    case 'not-owner':
      return {
        env: { DATABASE_URL: privateUrl(NEWCOMER, NEWCOMER_PASSWORD) },
        says: [/DATABASE_URL/, /permission denied/, /owner/],
      };
  }
}

const cases = COMMANDS.flatMap((command) => command.trips.map((t) => ({ command, trip: t })));
const results = new Map<string, Promise<CliResult>>();
const key = (c: (typeof cases)[number]) => `${c.command.name} / ${c.trip}`;

/** Runs every case, at most PARALLEL_MAX at a time; each test awaits its own. */
function runAll(): void {
  let running = 0;
  const waiting: (() => void)[] = [];
  const slot = async (): Promise<() => void> => {
    if (running >= PARALLEL_MAX) await new Promise<void>((r) => waiting.push(r));
    running += 1;
    return () => {
      running -= 1;
      waiting.shift()?.();
    };
  };
  for (const c of cases) {
    const { env } = trip(c.trip);
    results.set(
      key(c),
      (async () => {
        const release = await slot();
        try {
          return await runSource(c.command.file, c.command.args, { ...c.command.env, ...env }, CASE_TIMEOUT_MS);
        } finally {
          release();
        }
      })(),
    );
  }
}

beforeAll(async () => {
  const shared = loadConfig().databaseUrl;
  unmigratedUrl = withDatabase(shared, uniqueName('ft_cli_unmigrated'));
  const admin = new pg.Client({ connectionString: withDatabase(shared, 'postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${new URL(unmigratedUrl).pathname.slice(1)}"`);
  } finally {
    await admin.end();
  }

  dir = mkdtempSync(join(tmpdir(), 'ft-cli-errors-'));
  chmodSync(dir, 0o711);
  postgres = await LocalPostgres.start({
    dir: join(dir, 'pg'),
    fsync: false,
    superuserPassword: OWNER_PASSWORD,
    hba: ['local all all trust', 'host all all 127.0.0.1/32 scram-sha-256'],
  });
  // Chosen after the private server took its port, which freePort() could otherwise hand out twice.
  closedPostgresPort = await freePort();
  closedRedisPort = await freePort();
  expect([closedPostgresPort, closedRedisPort]).not.toContain(postgres.port);
  const ownerUrl = `postgresql://postgres:${OWNER_PASSWORD}@127.0.0.1:${postgres.port}/transfers`;
  await migrate(ownerUrl, MIGRATIONS_DIR);
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    // A login role with a password and nothing else: what a person gets by guessing.
    await owner.query(`CREATE ROLE ${NEWCOMER} LOGIN PASSWORD '${NEWCOMER_PASSWORD}'`);
  } finally {
    await owner.end();
  }
  runAll();
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(results.values());
  await postgres?.stop('immediate');
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  if (unmigratedUrl !== undefined) await dropDatabase(unmigratedUrl);
}, 60_000);

describe('a command that trips prints one line naming the variable or the step, and exits non-zero', () => {
  it.each(cases.map((c) => [key(c), c] as const))('%s', { timeout: 240_000 }, async (_name, c) => {
    const result = await (results.get(key(c)) as Promise<CliResult>);
    const run = describeRun(result);
    expect(result.code, run).not.toBe(0);
    expect(result.code, run).not.toBeNull();
    const lines = result.stderr.split('\n').filter((l) => l.trim() !== '');
    expect(lines, run).toHaveLength(1);
    const line = lines[0] as string;
    expect(line, run).toMatch(/^(configuration )?error: /);
    for (const says of trip(c.trip).says) expect(line, run).toMatch(says);
    expect(`${result.stdout}\n${result.stderr}`, run).not.toMatch(/^\s+at /m);
    for (const password of PASSWORDS) expect(`${result.stdout}\n${result.stderr}`, run).not.toContain(password);
  });
});
