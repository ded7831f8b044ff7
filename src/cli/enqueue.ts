// `npm run enqueue`: put transfers on the queue, one from flags, many from an NDJSON file, or
// a reproducible random load.
//   -- --from A --to B --amount N [--currency EUR] [--operation-id ID]
//   -- --file transfers.ndjson
//   -- --random N --wallets W [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadConfig } from '../config/config.ts';
import { type TransferWire, validateTransferRequest } from '../ledger/transfer-request.ts';
import { redactText } from '../log/redact.ts';
import { ENQUEUE_BATCH_MAX, enqueueTransfer, enqueueTransfers, TransferQueues } from '../queue/producer.ts';
import { bullmqConnection } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { randomWorkload } from '../workload/random-transfers.ts';
import { integerFlag, parseFlags, UsageError } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = [
  'npm run enqueue -- --from A --to B --amount N [--currency EUR] [--operation-id ID]',
  '       npm run enqueue -- --file transfers.ndjson',
  '       npm run enqueue -- --random N --wallets W [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]',
].join('\n');
/** A line longer than this cannot be a valid transfer; it is reported without being parsed. */
export const NDJSON_LINE_LENGTH_MAX = 4_096;
const PROGRESS_EVERY = 10_000;

function rate(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) throw new UsageError(`${flag} must be a number between 0 and 1`);
  return n;
}

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      from: { type: 'string' },
      to: { type: 'string' },
      amount: { type: 'string' },
      currency: { type: 'string' },
      'operation-id': { type: 'string' },
      file: { type: 'string' },
      random: { type: 'string' },
      wallets: { type: 'string' },
      duplicates: { type: 'string', default: '0' },
      seed: { type: 'string', default: '1' },
      prefix: { type: 'string', default: 'wallet-' },
      'amount-max': { type: 'string', default: '100' },
    },
    USAGE,
  );
  const modes = [
    values.from !== undefined || values.to !== undefined || values.amount !== undefined,
    values.file !== undefined,
    values.random !== undefined,
  ].filter(Boolean).length;
  if (modes !== 1)
    throw new UsageError(`choose exactly one of --from/--to/--amount, --file, --random\nusage: ${USAGE}`);

  const config = loadConfig();
  const connection = bullmqConnection(config);
  await redisReachable(connection, config);
  // QUEUE_SHARDS queues; each transfer goes to its source wallet's shard.
  const queue = TransferQueues.open(connection, config, config.jobAttemptsMax);
  // The message only: a refused password's error object carries the password (see redact.ts).
  for (const q of queue.queues)
    q.on('error', (err) => process.stderr.write(`queue error: ${redactText(err.message)}\n`));
  try {
    if (values.file !== undefined) {
      await enqueueFile(values.file, queue, config.transferAmountMax);
    } else if (values.random !== undefined) {
      const messages = randomWorkload({
        transfers: integerFlag(values.random, '--random'),
        wallets: integerFlag(values.wallets ?? '', '--wallets'),
        walletPrefix: values.prefix ?? 'wallet-',
        duplicateRate: rate(values.duplicates ?? '0', '--duplicates'),
        conflicts: 0,
        amountMaxMinor: integerFlag(values['amount-max'] ?? '100', '--amount-max'),
        seed: integerFlag(values.seed ?? '1', '--seed'),
        operationPrefix: `rnd-${randomUUID().slice(0, 8)}-`,
      });
      const jobs = await enqueueTransfers(
        queue,
        messages.map((m) => m.wire),
        config.transferAmountMax,
        {},
        (done) => process.stderr.write(`enqueued ${done}/${messages.length}\n`),
      );
      process.stdout.write(
        `${JSON.stringify({
          enqueued: jobs.length,
          duplicates: messages.filter((m) => m.kind === 'duplicate').length,
        })}\n`,
      );
    } else {
      const wire: TransferWire = {
        operationId: values['operation-id'] ?? randomUUID(),
        from: values.from ?? '',
        to: values.to ?? '',
        amount: values.amount ?? '',
        ...(values.currency === undefined ? {} : { currency: values.currency }),
      };
      const verdict = validateTransferRequest(wire, config.transferAmountMax);
      if (!verdict.ok) throw new UsageError(verdict.reason);
      process.stdout.write(`${JSON.stringify(await enqueueTransfer(queue, wire, config.transferAmountMax))}\n`);
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
});

async function enqueueFile(path: string, queue: TransferQueues, amountMax: bigint): Promise<void> {
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let lineNumber = 0;
  let enqueued = 0;
  const invalid: { line: number; reason: string }[] = [];
  let batch: TransferWire[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    enqueued += (await enqueueTransfers(queue, batch, amountMax)).length;
    batch = [];
    if (enqueued % PROGRESS_EVERY < ENQUEUE_BATCH_MAX)
      process.stderr.write(`enqueued ${enqueued} (line ${lineNumber})\n`);
  };
  for await (const line of lines) {
    lineNumber += 1;
    if (line.trim() === '') continue;
    const report = (reason: string) => {
      invalid.push({ line: lineNumber, reason });
      process.stderr.write(`line ${lineNumber}: ${reason}\n`);
    };
    if (line.length > NDJSON_LINE_LENGTH_MAX) {
      report(`longer than ${NDJSON_LINE_LENGTH_MAX} characters`);
      continue;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      report('not valid JSON');
      continue;
    }
    const verdict = validateTransferRequest(parsed, amountMax);
    if (!verdict.ok) {
      report(verdict.reason);
      continue;
    }
    batch.push(parsed as TransferWire);
    if (batch.length >= ENQUEUE_BATCH_MAX) await flush();
  }
  await flush();
  process.stdout.write(
    `${JSON.stringify({ lines: lineNumber, enqueued, invalid: invalid.length, invalidLines: invalid.slice(0, 100) })}\n`,
  );
  if (invalid.length > 0) process.exitCode = 2;
}
