// `npm run enqueue -- --intake …` (the three modes through request_transfer(), each batch in one
// transaction, Redis not needed) and `npm run outcomes` (the feed as NDJSON, --follow until
// SIGTERM, with the read role's URL; --prune-before as the owner, never the newest event).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundledEntry } from '../../harness/fleet/source-bundle.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { ensureIntakeRole, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { readOutcomes, sequenceOutcomeFeed } from '../../src/intake/outcome-feed.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { createTransferQueue } from '../../src/queue/producer.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let dir: string;
let readRole: string;
let readUrl: string;
/** Nothing listens there: --intake must not need Redis. */
const NO_REDIS = 'redis://127.0.0.1:1';
const BIG = 9_007_199_254_740_993n; // 2^53 + 1: not exact as a JSON number

const enqueue = (args: string[]) =>
  runSource('src/cli/enqueue.ts', ['--intake', ...args], { DATABASE_URL: db.url, REDIS_URL: NO_REDIS });
const outcomes = (args: string[], url = readUrl) =>
  runSource('src/cli/outcomes.ts', args, { DATABASE_URL: url, REDIS_URL: NO_REDIS });
const lines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

let fence = 0n;
/** A decision, then the sequencing a worker's timer does (reading never sequences). */
async function decide(operationId: string, amountMinor = 5n): Promise<void> {
  fence += 1n;
  await applyTransfers(db.prisma, [
    { request: { operationId, from: 'w1', to: 'w2', amountMinor, currency: null }, fence, leaseId: leaseIdFor(fence) },
  ]);
  await sequenceOutcomeFeed(db.pg);
}

beforeAll(async () => {
  db = await createTestDatabase('ft_intcli');
  await seedWallets(db.prisma, { wallets: 5, balanceMinor: 10n ** 17n, prefix: 'w', currency: 'EUR' });
  dir = mkdtempSync(join(tmpdir(), 'intake-cli-'));
  readRole = uniqueName('ft_r');
  const password = randomBytes(16).toString('hex');
  await ensureIntakeRole(INTAKE_ROLES.read, db.url, readRole, password, db.config);
  readUrl = roleUrl(db.url, readRole, password);
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
  await dropWorkerRole(db.url, readRole);
});

describe('npm run enqueue -- --intake', () => {
  it('flags: requested, then duplicate; another body is one line on stderr, exit 1, nothing changed', async () => {
    const args = ['--from', 'w1', '--to', 'w2', '--amount', '7', '--operation-id', 'cli-1'];
    const first = await enqueue(args);
    expect(first.code, describeRun(first)).toBe(0);
    expect(lastJsonLine(first)).toEqual({ operationId: 'cli-1', requested: 1, duplicate: 0 });
    expect(lastJsonLine(await enqueue(args))).toEqual({ operationId: 'cli-1', requested: 0, duplicate: 1 });
    const conflict = await enqueue(['--from', 'w1', '--to', 'w2', '--amount', '8', '--operation-id', 'cli-1']);
    expect(conflict.code, describeRun(conflict)).toBe(1);
    expect(conflict.stderr.trim().split('\n')).toHaveLength(1);
    expect(conflict.stderr).toMatch(
      /^error: conflict: operation cli-1 was requested with another body; its transaction rolled back/,
    );
    const { rows } = await db.pg.query(
      "SELECT amount::text AS amount FROM transfer_requests WHERE operation_id = 'cli-1'",
    );
    expect(rows).toEqual([{ amount: '7' }]);
  });

  it('--file: valid lines requested in one transaction, duplicates counted, invalid lines reported (exit 2)', async () => {
    const file = join(dir, 'transfers.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ operationId: 'f-1', from: 'w1', to: 'w2', amount: '1' }),
        JSON.stringify({ operationId: 'f-2', from: 'w2', to: 'w3', amount: '2', currency: 'EUR' }),
        JSON.stringify({ operationId: 'f-1', from: 'w1', to: 'w2', amount: '1' }),
        '{"operationId": "f-3", "from": "w1", "to": "w1"',
        '',
      ].join('\n'),
    );
    const run = await enqueue(['--file', file]);
    expect(run.code, describeRun(run)).toBe(2);
    expect(lastJsonLine(run)).toMatchObject({ lines: 4, requested: 2, duplicate: 1, invalid: 1 });
  });

  it('--file: a conflicting line rolls its whole batch back, exit 1', async () => {
    const file = join(dir, 'conflict.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ operationId: 'g-1', from: 'w1', to: 'w2', amount: '1' }),
        JSON.stringify({ operationId: 'f-1', from: 'w1', to: 'w2', amount: '99' }),
      ].join('\n'),
    );
    const run = await enqueue(['--file', file]);
    expect(run.code, describeRun(run)).toBe(1);
    expect(run.stderr).toMatch(/^error: conflict: operation f-1 .* rolled back/m);
    expect((await db.pg.query("SELECT 1 FROM transfer_requests WHERE operation_id = 'g-1'")).rows).toEqual([]);
  });

  it('--random: N requests', async () => {
    const before = Number((await db.pg.query('SELECT count(*) AS n FROM transfer_requests')).rows[0].n);
    const run = await enqueue(['--random', '25', '--wallets', '5', '--prefix', 'w']);
    expect(run.code, describeRun(run)).toBe(0);
    expect(lastJsonLine(run)).toEqual({ requested: 25, duplicate: 0 });
    expect(Number((await db.pg.query('SELECT count(*) AS n FROM transfer_requests')).rows[0].n)).toBe(before + 25);
  });
});

describe('npm run enqueue without --intake', () => {
  it('flags and --random still go to the queue, and nothing to the intake', async () => {
    const queueName = uniqueName('intcli');
    const connection = bullmqConnection(db.config);
    const queue = createTransferQueue(connection, queueName, 7);
    try {
      const before = Number((await db.pg.query('SELECT count(*) AS n FROM transfer_requests')).rows[0].n);
      const env = { DATABASE_URL: db.url, QUEUE_NAME: queueName };
      const one = await runSource(
        'src/cli/enqueue.ts',
        ['--from', 'w1', '--to', 'w2', '--amount', '3', '--operation-id', 'q-1'],
        env,
      );
      expect(one.code, describeRun(one)).toBe(0);
      expect(lastJsonLine(one)).toMatchObject({ operationId: 'q-1', queueName });
      const many = await runSource('src/cli/enqueue.ts', ['--random', '4', '--wallets', '3'], env);
      expect(many.code, describeRun(many)).toBe(0);
      expect(lastJsonLine(many)).toEqual({ enqueued: 4, duplicates: 0 });
      expect(await queue.count()).toBe(5);
      expect(Number((await db.pg.query('SELECT count(*) AS n FROM transfer_requests')).rows[0].n)).toBe(before);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});

describe('npm run outcomes', () => {
  it('prints the feed as NDJSON with the read role, amounts and positions as exact strings', async () => {
    await decide('o-1', BIG);
    await decide('o-2');
    const run = await outcomes(['--after', '0']);
    expect(run.code, describeRun(run)).toBe(0);
    const events = lines(run.stdout);
    expect(events.map((e) => [e.position, e.operationId, e.kind, e.amountMinor])).toEqual([
      ['1', 'o-1', 'applied', BIG.toString()],
      ['2', 'o-2', 'applied', '5'],
    ]);
    expect(lines((await outcomes(['--after', '1', '--limit', '1'])).stdout).map((e) => e.operationId)).toEqual(['o-2']);
  });

  it('--follow prints new events as they come and stops on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [bundledEntry('src/cli/outcomes.ts'), '--after', '2', '--follow', '--poll-ms', '50'],
      {
        cwd: PROJECT_ROOT,
        env: { ...process.env, DATABASE_URL: readUrl, REDIS_URL: NO_REDIS },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('close', (code, signal) => resolve({ code, signal })),
    );
    const until = async (predicate: () => boolean) => {
      const deadline = Date.now() + 20_000;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`timed out; stdout:\n${out}\nstderr:\n${err}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    try {
      await decide('o-3');
      await until(() => out.includes('o-3'));
      await decide('o-4');
      await until(() => out.includes('o-4'));
      child.kill('SIGTERM');
      expect(await exited).toEqual({ code: 0, signal: null });
      expect(lines(out).map((e) => [e.position, e.operationId])).toEqual([
        ['3', 'o-3'],
        ['4', 'o-4'],
      ]);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('--prune-before deletes the prefix but never the newest event, so positions continue', async () => {
    const refused = await outcomes(['--prune-before', '3']);
    expect(refused.code, describeRun(refused)).toBe(1);
    expect(refused.stderr.trim()).toMatch(/^configuration error: DATABASE_URL: --prune-before needs the owner/);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);

    const some = await outcomes(['--prune-before', '3'], db.url);
    expect(lastJsonLine(some)).toEqual({ pruned: 2, firstKept: '3', last: '4' });
    const all = await outcomes(['--prune-before', '1000'], db.url);
    expect(lastJsonLine(all)).toEqual({ pruned: 1, firstKept: '4', last: '4' });
    await decide('o-5');
    expect((await readOutcomes(db.pg, 3n)).map((e) => [e.position, e.operationId])).toEqual([
      [4n, 'o-4'],
      [5n, 'o-5'],
    ]);
    // A reader asking for a pruned position is told so, with where the feed starts now.
    const pruned = await outcomes(['--after', '0']);
    expect(pruned.code, describeRun(pruned)).toBe(1);
    expect(pruned.stderr.trim()).toBe(
      'error: outcome feed: positions before 4 were pruned, so position 1 is gone; read after 3 to start at the first event kept',
    );
  });

  it('--prune-before refuses to delete what a cursor has not read yet, unless --force', async () => {
    const last = BigInt(
      (await db.pg.query<{ p: string }>('SELECT max(position)::text AS p FROM outcome_events')).rows[0]!.p,
    );
    await decide('o-cur-1');
    await decide('o-cur-2');
    await db.pg.query("INSERT INTO outcome_cursors (name, position) VALUES ('slow-consumer', $1)", [last.toString()]);
    try {
      // The cursor has read up to `last`: pruning before last + 1 keeps all it still needs.
      const past = await outcomes(['--prune-before', (last + 2n).toString()], db.url);
      expect(past.code, describeRun(past)).toBe(1);
      expect(past.stderr.trim()).toBe(
        `error: --prune-before ${last + 2n} would delete events cursor "slow-consumer" has not read (it is at ${last}): prune before ${last + 1n} at most, or add --force`,
      );
      expect((await readOutcomes(db.pg, last)).map((e) => e.operationId)).toEqual(['o-cur-1', 'o-cur-2']);
      const up = await outcomes(['--prune-before', (last + 1n).toString()], db.url);
      expect(up.code, describeRun(up)).toBe(0);
      const forced = await outcomes(['--prune-before', (last + 2n).toString(), '--force'], db.url);
      expect(lastJsonLine(forced)).toMatchObject({ pruned: 1, firstKept: (last + 2n).toString() });
    } finally {
      await db.pg.query("DELETE FROM outcome_cursors WHERE name = 'slow-consumer'");
    }
  });

  it('control: with the newest event deleted too, the next event would be position 1 again', async () => {
    await db.pg.query('DELETE FROM outcome_events');
    await decide('o-6');
    expect((await readOutcomes(db.pg, 0n)).map((e) => [e.position, e.operationId])).toEqual([[1n, 'o-6']]);
  });
});
