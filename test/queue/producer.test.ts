// The producer: the library refuses what the wire format refuses, and `npm run enqueue --file`
// turns every valid NDJSON line into its own job and reports the others by line number.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bundledEntry } from '../../harness/fleet/source-bundle.ts';
import { loadConfig } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { InvalidTransferError } from '../../src/errors.ts';
import { createTransferQueue, enqueueTransfer, enqueueTransfers } from '../../src/queue/producer.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { uniqueName } from '../support/test-db.ts';

const run = promisify(execFile);
const config = loadConfig();
const queueName = uniqueName('producer');
const connection = bullmqConnection(config);
let queue: Queue;

beforeAll(() => {
  queue = createTransferQueue(connection, queueName, 7);
});
afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
});

it('enqueues with the default job options and refuses invalid transfers before adding anything', async () => {
  const one = await enqueueTransfer(
    queue,
    { operationId: 'p1', from: 'a', to: 'b', amount: '5' },
    config.transferAmountMax,
  );
  const job = await queue.getJob(one.jobId);
  expect(job?.opts.attempts).toBe(7);
  expect(job?.opts.backoff).toMatchObject({ type: 'transfer-jitter' });
  await expect(
    enqueueTransfer(queue, { operationId: 'p2', from: 'a', to: 'b', amount: '5.0' }, config.transferAmountMax),
  ).rejects.toBeInstanceOf(InvalidTransferError);
  const before = await queue.count();
  await expect(
    enqueueTransfers(
      queue,
      [
        { operationId: 'p3', from: 'a', to: 'b', amount: '5' },
        { operationId: 'p4', from: 'a', to: 'a', amount: '5' },
      ],
      config.transferAmountMax,
    ),
  ).rejects.toThrow('transfer #2: from and to are the same wallet');
  expect(await queue.count()).toBe(before);
  const many = await enqueueTransfers(
    queue,
    Array.from({ length: 2_500 }, () => ({ operationId: 'same', from: 'a', to: 'b', amount: '1' })),
    config.transferAmountMax,
  );
  expect(new Set(many.map((m) => m.jobId)).size).toBe(2_500);
});

it('npm run enqueue -- --file: one job per valid line, invalid lines reported with their number', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ft-ndjson-'));
  const file = join(dir, 'transfers.ndjson');
  writeFileSync(
    file,
    [
      '{"operationId":"f1","from":"a","to":"b","amount":"5"}',
      'not json',
      '{"operationId":"f1","from":"a","to":"b","amount":"5"}',
      '{"operationId":"f2","from":"a","to":"b","amount":5}',
      '',
      `{"operationId":"${'x'.repeat(5000)}","from":"a","to":"b","amount":"5"}`,
    ].join('\n'),
  );
  const before = await queue.count();
  const result = await run(process.execPath, [bundledEntry('src/cli/enqueue.ts'), '--file', file], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, QUEUE_NAME: queueName },
  })
    .catch((err: { code: number; stdout: string; stderr: string }) => err)
    .finally(() => rmSync(dir, { recursive: true, force: true }));
  expect('code' in result ? result.code : 0).toBe(2);
  const summary = JSON.parse(result.stdout);
  expect(summary).toMatchObject({ lines: 6, enqueued: 2, invalid: 3 });
  expect(summary.invalidLines.map((l: { line: number }) => l.line)).toEqual([2, 4, 6]);
  expect(result.stderr).toContain('line 4: amount must be a string of decimal digits, got a number');
  expect(await queue.count()).toBe(before + 2);
});
