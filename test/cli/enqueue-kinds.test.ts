// `npm run enqueue` with --kind: every payment kind from flags, an NDJSON file of mixed kinds,
// random holds, through the intake (request_operation(), Redis not needed) and straight to
// BullMQ; and the refusals a user meets first (a flag of another kind, --random of a capture).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTransferQueue } from '../../src/queue/producer.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let dir: string;
const NO_REDIS = 'redis://127.0.0.1:1';

const intake = (args: string[]) =>
  runSource('src/cli/enqueue.ts', ['--intake', ...args], { DATABASE_URL: db.url, REDIS_URL: NO_REDIS });

async function request(op: string) {
  const { rows } = await db.pg.query<{ kind: string; body: Record<string, unknown> | null }>(
    'SELECT kind, body FROM transfer_requests WHERE operation_id = $1',
    [op],
  );
  return rows[0];
}

beforeAll(async () => {
  db = await createTestDatabase('ft_kindcli');
  dir = mkdtempSync(join(tmpdir(), 'enqueue-kinds-'));
});

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await db.drop();
});

describe('npm run enqueue -- --intake --kind', () => {
  it('requests each kind from flags, with its body kept as the wire format', async () => {
    const runs = [
      [
        '--kind',
        'hold',
        '--from',
        'w1',
        '--to',
        'w2',
        '--amount',
        '30',
        '--expires-in-ms',
        '60000',
        '--operation-id',
        'k-h',
      ],
      ['--kind', 'capture', '--from', 'w1', '--hold', 'k-h', '--amount', '20', '--operation-id', 'k-c'],
      ['--kind', 'void', '--from', 'w1', '--hold', 'k-h', '--operation-id', 'k-v'],
      ['--kind', 'refund', '--from', 'w2', '--original', 'k-h', '--operation-id', 'k-r'],
      ['--kind', 'split', '--from', 'w1', '--leg', 'w2:97', '--leg', 'w3:3', '--operation-id', 'k-s'],
    ];
    for (const args of runs) {
      const run = await intake(args);
      expect(run.code, describeRun(run)).toBe(0);
      expect(lastJsonLine(run)).toMatchObject({ requested: 1, duplicate: 0 });
    }
    expect(await request('k-h')).toEqual({
      kind: 'hold',
      body: { kind: 'hold', operationId: 'k-h', from: 'w1', to: 'w2', amount: '30', expiresInMs: 60000 },
    });
    expect(await request('k-c')).toMatchObject({ kind: 'capture', body: { hold: 'k-h', amount: '20' } });
    expect(await request('k-v')).toMatchObject({ kind: 'void', body: { hold: 'k-h' } });
    expect(await request('k-r')).toMatchObject({ kind: 'refund', body: { original: 'k-h' } });
    expect(await request('k-s')).toMatchObject({
      kind: 'split',
      body: {
        legs: [
          { to: 'w2', amount: '97' },
          { to: 'w3', amount: '3' },
        ],
      },
    });
  });

  it('requests each wallet operation from --wallet', async () => {
    const runs = [
      [
        '--kind',
        'open_wallet',
        '--wallet',
        'n1',
        '--currency',
        'EUR',
        '--credit-limit',
        '500',
        '--operation-id',
        'k-o',
      ],
      ['--kind', 'freeze_wallet', '--wallet', 'n1', '--credits', 'refused', '--operation-id', 'k-f'],
      ['--kind', 'unfreeze_wallet', '--wallet', 'n1', '--operation-id', 'k-u'],
      ['--kind', 'close_wallet', '--wallet', 'n1', '--operation-id', 'k-x', '--metadata', 'case=offboard=1'],
    ];
    for (const args of runs) {
      const run = await intake(args);
      expect(run.code, describeRun(run)).toBe(0);
    }
    expect(await request('k-o')).toEqual({
      kind: 'open_wallet',
      body: { kind: 'open_wallet', operationId: 'k-o', wallet: 'n1', currency: 'EUR', creditLimit: '500' },
    });
    expect(await request('k-f')).toMatchObject({ kind: 'freeze_wallet', body: { wallet: 'n1', credits: 'refused' } });
    expect(await request('k-u')).toMatchObject({ kind: 'unfreeze_wallet', body: { wallet: 'n1' } });
    expect(await request('k-x')).toMatchObject({
      kind: 'close_wallet',
      body: { wallet: 'n1', metadata: { case: 'offboard=1' } },
    });
    const { rows } = await db.pg.query<{ from_wallet: string }>(
      "SELECT DISTINCT from_wallet FROM transfer_requests WHERE operation_id IN ('k-o', 'k-f', 'k-u', 'k-x')",
    );
    expect(rows).toEqual([{ from_wallet: 'n1' }]);
  });

  it('refuses a flag the kind does not take, a bad leg, a hold without expiry, and --random of a capture', async () => {
    const cases: [string[], RegExp][] = [
      [['--kind', 'void', '--from', 'w1', '--hold', 'h', '--amount', '5'], /--amount is not a flag of a void/],
      [['--kind', 'split', '--from', 'w1', '--leg', 'w2'], /--leg must be WALLET:AMOUNT/],
      [['--kind', 'hold', '--from', 'w1', '--to', 'w2', '--amount', '5'], /expiresInMs or expiresAt/],
      [['--kind', 'capture', '--random', '5', '--wallets', '3'], /--random makes transfers or holds/],
      [['--kind', 'payout', '--from', 'w1'], /--kind must be one of transfer, hold, capture, void, refund, split/],
      [['--kind', 'close_wallet', '--from', 'w1'], /names its wallet with --wallet, not --from/],
      [['--from', 'w1', '--to', 'w2', '--amount', '1', '--metadata', 'novalue'], /--metadata must be KEY=VALUE/],
      [['--from', 'w1', '--to', 'w2', '--amount', '1', '--metadata', 'bad key=1'], /every metadata key must be/],
      [['--kind', 'freeze_wallet', '--wallet', 'w1', '--credits', 'maybe'], /credits must be "allowed" or "refused"/],
      [['--kind', 'open_wallet', '--wallet', 'w1'], /an open_wallet needs its currency/],
      [['--kind', 'transfer', '--from', 'w1', '--wallet', 'w2'], /--wallet is not a flag of a transfer/],
    ];
    for (const [args, message] of cases) {
      const run = await intake(args);
      expect(run.code, describeRun(run)).toBe(1);
      expect(run.stderr).toMatch(message);
    }
  });

  it('a file of mixed kinds: valid lines requested in one transaction per batch, invalid ones reported', async () => {
    const file = join(dir, 'mixed.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({ operationId: 'f-t', from: 'w1', to: 'w2', amount: '1' }),
        JSON.stringify({
          kind: 'hold',
          operationId: 'f-h',
          from: 'w1',
          to: 'w2',
          amount: '2',
          expiresAt: '2099-01-01T00:00:00Z',
        }),
        JSON.stringify({ kind: 'capture', operationId: 'f-c', from: 'w1', hold: 'f-h', amount: '0' }),
        '',
      ].join('\n'),
    );
    const run = await intake(['--file', file]);
    expect(run.code, describeRun(run)).toBe(2);
    expect(lastJsonLine(run)).toMatchObject({ lines: 3, requested: 2, duplicate: 0, invalid: 1 });
    expect((await request('f-t'))?.kind).toBe('transfer');
    expect((await request('f-h'))?.kind).toBe('hold');
    expect(await request('f-c')).toBeUndefined();
  });

  it('random holds, each with the expiry asked for', async () => {
    const run = await intake(['--kind', 'hold', '--random', '5', '--wallets', '3', '--expires-in-ms', '5000']);
    expect(run.code, describeRun(run)).toBe(0);
    const { rows } = await db.pg.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM transfer_requests WHERE kind = 'hold' AND (body->>'expiresInMs')::int = 5000 AND operation_id LIKE 'rnd-%'",
    );
    expect(rows[0]?.n).toBe(5);
  });
});

describe('npm run enqueue -- --kind (straight to BullMQ)', () => {
  it('puts a capture on the queue of the wallet it debits, its data the wire format', async () => {
    const queueName = uniqueName('q');
    const run = await runSource(
      'src/cli/enqueue.ts',
      ['--kind', 'capture', '--from', 'w1', '--hold', 'h-9', '--operation-id', 'q-c'],
      { DATABASE_URL: db.url, QUEUE_NAME: queueName },
    );
    expect(run.code, describeRun(run)).toBe(0);
    const { jobId } = lastJsonLine(run) as { jobId: string };
    const connection = bullmqConnection(db.config);
    const queue = createTransferQueue(connection, queueName, 3);
    try {
      expect((await queue.getJob(jobId))?.data).toEqual({
        kind: 'capture',
        operationId: 'q-c',
        from: 'w1',
        hold: 'h-9',
      });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      connection.disconnect();
    }
  });
});
