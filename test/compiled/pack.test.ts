// The package as another project gets it: `npm pack` of this project (dist/ is built by the
// compiled project's global setup), installed from the tarball into a scratch project with its
// own package.json, where plain node runs a producer that requests a transfer through
// `fenced-transfers/intake` against a migrated database, under hooks that refuse BullMQ and
// ioredis (test/support/queue-free/); the same hooks refuse the full entry there, so the check can
// fail. A consumer's TypeScript file is type-checked against the installed declarations.
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { describeRun, lastJsonLine, runCommand } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const run = promisify(execFile);
const INSTALL_TIMEOUT_MS = 90_000;
const TSC = join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** A producer as a service writes it: its own transaction, the intake's entry, nothing else of ours. */
const PRODUCER = `import { createRequire } from 'node:module';
import pg from 'pg';
import { loadConfig, requestTransfer } from 'fenced-transfers/intake';
import { QUEUE_MODULE } from './queue-free/hooks.mjs';

const config = loadConfig();
const client = new pg.Client({ connectionString: config.databaseUrl });
await client.connect();
const transfer = { operationId: 'pack-1', from: 'w1', to: 'w2', amount: '250' };
await client.query('BEGIN');
const answer = await requestTransfer(client, transfer, config.transferAmountMax);
await client.query('COMMIT');
let conflict = null;
try {
  await requestTransfer(client, { ...transfer, amount: '251' }, config.transferAmountMax);
} catch (err) {
  conflict = { code: err.code, name: err.name };
}
await client.end();
const required = Object.keys(createRequire(import.meta.url).cache).filter((file) => QUEUE_MODULE.test(file));
console.log(JSON.stringify({ answer, conflict, required }));
`;

/** A consumer's types: the wire union checks a refund's fields, and the intake entry has no enqueue. */
const CONSUMER_TS = `import type pg from 'pg';
import { enqueueTransfer, type TransferQueues } from 'fenced-transfers';
import { type IntakeAnswer, type OperationWire, type OutcomeEvent, readOutcomes, requestOperation } from 'fenced-transfers/intake';

const refund: OperationWire = { kind: 'refund', operationId: 'r-1', from: 'w2', original: 'pay-1' };
// @ts-expect-error a refund names its original, not a hold
const wrong: OperationWire = { kind: 'refund', operationId: 'r-2', from: 'w2', hold: 'h-1' };

export async function request(client: pg.ClientBase): Promise<IntakeAnswer> {
  return requestOperation(client, refund, 1_000_000n, 900_000);
}
export async function firstEvents(pool: pg.Pool): Promise<OutcomeEvent[]> {
  return readOutcomes(pool, 0n, 10);
}
export async function straight(queues: TransferQueues): Promise<string> {
  return (await enqueueTransfer(queues, { operationId: 't-1', from: 'w1', to: 'w2', amount: '1' }, 10n)).jobId;
}
void wrong;
`;

describe('the packed package, installed into another project', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ft-pack-'));
  const project = join(scratch, 'producer');
  let db: TestDatabase;
  let packed: { filename: string; files: { path: string }[] };

  beforeAll(async () => {
    db = await createTestDatabase('ft_pack');
    const { stdout } = await run('npm', ['pack', '--pack-destination', scratch, '--json'], { cwd: PROJECT_ROOT });
    packed = (JSON.parse(stdout) as (typeof packed)[])[0] as typeof packed;
    cpSync(join(PROJECT_ROOT, 'test', 'support', 'queue-free'), join(project, 'queue-free'), { recursive: true });
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'scratch-producer', version: '1.0.0', private: true, type: 'module' }),
    );
    await run('npm', ['install', join(scratch, packed.filename), '--prefer-offline', '--no-audit', '--no-fund'], {
      cwd: project,
      timeout: INSTALL_TIMEOUT_MS,
    });
    writeFileSync(join(project, 'producer.mjs'), PRODUCER);
  }, INSTALL_TIMEOUT_MS + 30_000);

  afterAll(async () => {
    await db?.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('ships the compiled entries with their types, the lock scripts and the migrations, and no sources', () => {
    const paths = packed.files.map((f) => f.path);
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/intake-entry.js', 'dist/intake-entry.d.ts'])
      expect(paths).toContain(file);
    expect(paths.some((p) => p.startsWith('lua/') && p.endsWith('.lua'))).toBe(true);
    expect(paths.some((p) => p.startsWith('prisma/migrations/') && p.endsWith('migration.sql'))).toBe(true);
    expect(paths.filter((p) => /^(src|test|harness)\//.test(p) || p.endsWith('.map'))).toEqual([]);
  });

  it('requests a transfer through fenced-transfers/intake without loading BullMQ or ioredis', async () => {
    const produced = await runProducer(['--import', './queue-free/register.mjs', 'producer.mjs']);
    expect(produced.code, describeRun(produced)).toBe(0);
    expect(lastJsonLine(produced)).toEqual({
      answer: 'requested',
      conflict: { code: 'INTAKE_CONFLICT', name: 'IntakeConflictError' },
      required: [],
    });
    const { rows } = await db.pg.query(
      "SELECT from_wallet, to_wallet, amount::text AS amount, decided_at FROM transfer_requests WHERE operation_id = 'pack-1'",
    );
    expect(rows).toEqual([{ from_wallet: 'w1', to_wallet: 'w2', amount: '250', decided_at: null }]);
  });

  it('refuses, under the same hooks, the full entry there: it loads BullMQ and ioredis', async () => {
    const refused = await runProducer([
      '--import',
      './queue-free/register.mjs',
      'queue-free/import-entry.mjs',
      'fenced-transfers',
    ]);
    expect(refused.code, describeRun(refused)).not.toBe(0);
    // The loader resolves sibling imports concurrently: whichever of the two comes first is refused.
    expect(refused.stderr).toMatch(/refused to load \S*node_modules\/(bullmq|ioredis)\//);
  });

  it("type-checks a consumer's file against the installed declarations", async () => {
    writeFileSync(join(project, 'consumer.ts'), CONSUMER_TS);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: true },
        files: ['consumer.ts'],
      }),
    );
    const checked = await runProducer([TSC, '-p', 'tsconfig.json']);
    expect(checked.code, describeRun(checked)).toBe(0);
  });

  function runProducer(args: string[]) {
    return runCommand(process.execPath, args, { DATABASE_URL: db.url }, 60_000, project);
  }
});
