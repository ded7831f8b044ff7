// `npm run enqueue`: put transfers on the queue, one from flags, many from an NDJSON file, or
// a reproducible random load.
//   -- --from A --to B --amount N [--currency EUR] [--operation-id ID]
//   -- --file transfers.ndjson
//   -- --random N --wallets W [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]
// With --intake, in any of the three modes, the transfers are requested in PostgreSQL instead
// (request_transfer(), src/intake/intake.ts), each batch in one transaction, and the relay
// sends them to the queue; Redis is not needed. A conflict rolls its batch back and exits 1.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { type Config, loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { INTAKE_BATCH_MAX, IntakeConflictError, requestTransfers } from '../intake/intake.ts';
import { type TransferWire, validateTransferRequest } from '../ledger/transfer-request.ts';
import { redactText } from '../log/redact.ts';
import { ENQUEUE_BATCH_MAX, enqueueTransfer, enqueueTransfers, TransferQueues } from '../queue/producer.ts';
import { bullmqConnection } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { randomWorkload } from '../workload/random-transfers.ts';
import { integerFlag, parseFlags, UsageError } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = [
  'npm run enqueue -- [--intake] --from A --to B --amount N [--currency EUR] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --file transfers.ndjson',
  '       npm run enqueue -- [--intake] --random N --wallets W [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]',
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
      intake: { type: 'boolean', default: false },
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
  if (values.intake === true) {
    await requestThroughIntake(values, config);
    return;
  }
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
      const messages = randomMessages(values);
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
      const wire = flagTransfer(values, config.transferAmountMax);
      process.stdout.write(`${JSON.stringify(await enqueueTransfer(queue, wire, config.transferAmountMax))}\n`);
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
});

async function enqueueFile(path: string, queue: TransferQueues, amountMax: bigint): Promise<void> {
  let enqueued = 0;
  const read = await readTransferFile(path, amountMax, ENQUEUE_BATCH_MAX, async (batch, lineNumber) => {
    enqueued += (await enqueueTransfers(queue, batch, amountMax)).length;
    if (enqueued % PROGRESS_EVERY < ENQUEUE_BATCH_MAX)
      process.stderr.write(`enqueued ${enqueued} (line ${lineNumber})\n`);
  });
  process.stdout.write(
    `${JSON.stringify({ lines: read.lines, enqueued, invalid: read.invalid.length, invalidLines: read.invalid.slice(0, 100) })}\n`,
  );
  if (read.invalid.length > 0) process.exitCode = 2;
}

interface FileRead {
  lines: number;
  invalid: { line: number; reason: string }[];
}

/** Reads an NDJSON file of transfers, reporting each invalid line, and hands on batches of valid ones. */
async function readTransferFile(
  path: string,
  amountMax: bigint,
  batchMax: number,
  send: (batch: TransferWire[], lineNumber: number) => Promise<void>,
): Promise<FileRead> {
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let lineNumber = 0;
  const invalid: { line: number; reason: string }[] = [];
  let batch: TransferWire[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const sending = batch;
    batch = [];
    await send(sending, lineNumber);
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
    if (batch.length >= batchMax) await flush();
  }
  await flush();
  return { lines: lineNumber, invalid };
}

type EnqueueFlags = Record<string, string | boolean | undefined>;
function text(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function flagTransfer(values: EnqueueFlags, amountMax: bigint): TransferWire {
  const currency = text(values.currency);
  const wire: TransferWire = {
    operationId: text(values['operation-id']) ?? randomUUID(),
    from: text(values.from) ?? '',
    to: text(values.to) ?? '',
    amount: text(values.amount) ?? '',
    ...(currency === undefined ? {} : { currency }),
  };
  const verdict = validateTransferRequest(wire, amountMax);
  if (!verdict.ok) throw new UsageError(verdict.reason);
  return wire;
}

function randomMessages(values: EnqueueFlags) {
  return randomWorkload({
    transfers: integerFlag(text(values.random) ?? '', '--random'),
    wallets: integerFlag(text(values.wallets) ?? '', '--wallets'),
    walletPrefix: text(values.prefix) ?? 'wallet-',
    duplicateRate: rate(text(values.duplicates) ?? '0', '--duplicates'),
    conflicts: 0,
    amountMaxMinor: integerFlag(text(values['amount-max']) ?? '100', '--amount-max'),
    seed: integerFlag(text(values.seed) ?? '1', '--seed'),
    operationPrefix: `rnd-${randomUUID().slice(0, 8)}-`,
  });
}

/** --intake: every batch in one transaction of its own, through request_transfer(). */
async function requestThroughIntake(values: EnqueueFlags, config: Config): Promise<void> {
  const pool = createPool({ ...config, dbPoolMax: 1 });
  const client = await pool.connect();
  let requested = 0;
  let duplicate = 0;
  const send = async (batch: TransferWire[], where: string) => {
    await client.query('BEGIN');
    try {
      const answers = await requestTransfers(client, batch, config.transferAmountMax);
      await client.query('COMMIT');
      requested += answers.filter((a) => a === 'requested').length;
      duplicate += answers.filter((a) => a === 'duplicate').length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (err instanceof IntakeConflictError) {
        throw new IntakeConflictError(
          `${err.message}; ${where} rolled back (${requested} requested and ${duplicate} duplicates committed before it)`,
        );
      }
      throw err;
    }
  };
  try {
    if (values.file !== undefined) {
      const read = await readTransferFile(
        text(values.file) ?? '',
        config.transferAmountMax,
        INTAKE_BATCH_MAX,
        async (batch, lineNumber) => {
          await send(batch, `the batch ending at line ${lineNumber}`);
          if ((requested + duplicate) % PROGRESS_EVERY < INTAKE_BATCH_MAX)
            process.stderr.write(`requested ${requested + duplicate} (line ${lineNumber})\n`);
        },
      );
      process.stdout.write(
        `${JSON.stringify({ lines: read.lines, requested, duplicate, invalid: read.invalid.length, invalidLines: read.invalid.slice(0, 100) })}\n`,
      );
      if (read.invalid.length > 0) process.exitCode = 2;
    } else if (values.random !== undefined) {
      const wires = randomMessages(values).map((m) => m.wire);
      for (let start = 0; start < wires.length; start += INTAKE_BATCH_MAX) {
        await send(wires.slice(start, start + INTAKE_BATCH_MAX), `the batch from transfer #${start + 1}`);
        process.stderr.write(`requested ${requested + duplicate}/${wires.length}\n`);
      }
      process.stdout.write(`${JSON.stringify({ requested, duplicate })}\n`);
    } else {
      const wire = flagTransfer(values, config.transferAmountMax);
      await send([wire], 'its transaction');
      process.stdout.write(`${JSON.stringify({ operationId: wire.operationId, requested, duplicate })}\n`);
    }
  } finally {
    client.release();
    await endPool(pool);
  }
}
