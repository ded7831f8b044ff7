// `npm run enqueue`: put operations on the queue, one from flags, many from an NDJSON file, or
// a reproducible random load.
//   -- --from A --to B --amount N [--currency EUR] [--operation-id ID]
//   -- --kind hold --from A --to B --amount N (--expires-in-ms MS | --expires-at T) [--currency EUR]
//   -- --kind capture --from A --hold H [--amount N]      (--kind void: no --amount)
//   -- --kind refund --from B --original O [--amount N]
//   -- --kind split --from A --leg B:97 --leg C:3 [--currency EUR]
//   -- --kind open_wallet --wallet A --currency EUR [--credit-limit N]
//   -- --kind freeze_wallet --wallet A [--credits allowed|refused]   (unfreeze_wallet, close_wallet: --wallet A)
//   any kind from flags: [--metadata KEY=VALUE]...
//   -- --file operations.ndjson                           (one wire-format object per line, any kind)
//   -- --random N --wallets W [--kind hold [--expires-in-ms MS]] [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]
// With --intake, in any of the three modes, the operations are requested in PostgreSQL instead
// (request_transfer() and request_operation(), src/intake/intake.ts), each batch in one
// transaction, and the relay sends them to the queue; Redis is not needed. A conflict rolls its
// batch back and exits 1.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { type Config, loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { IntakeConflictError, UsageError } from '../errors.ts';
import { INTAKE_BATCH_MAX, requestOperations } from '../intake/intake.ts';
import {
  type FreezeCredits,
  OPERATION_KINDS,
  type OperationKind,
  type OperationWire,
  validateOperationWithin,
  type WalletRequest,
} from '../ledger/transfer-request.ts';
import { redactText } from '../log/redact.ts';
import { ENQUEUE_BATCH_MAX, enqueueOperation, enqueueOperations, TransferQueues } from '../queue/producer.ts';
import { bullmqConnection } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { randomWorkload } from '../workload/random-transfers.ts';
import { integerFlag, metadataFlags, parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = [
  'npm run enqueue -- [--intake] --from A --to B --amount N [--currency EUR] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind hold --from A --to B --amount N (--expires-in-ms MS | --expires-at T) [--currency EUR] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind capture --from A --hold H [--amount N] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind void --from A --hold H [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind refund --from B --original O [--amount N] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind split --from A --leg B:N --leg C:N [--currency EUR] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind credit_limit --from A --limit N [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind deposit --to A --amount N --currency EUR --reference R [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind withdrawal --from A --amount N --currency EUR --reference R [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind open_wallet --wallet A --currency EUR [--credit-limit N] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind freeze_wallet --wallet A [--credits allowed|refused] [--operation-id ID]',
  '       npm run enqueue -- [--intake] --kind unfreeze_wallet|close_wallet --wallet A [--operation-id ID]',
  '       (any of the above) [--metadata KEY=VALUE]...',
  '       npm run enqueue -- [--intake] --file operations.ndjson',
  '       npm run enqueue -- [--intake] --random N --wallets W [--kind transfer|hold] [--expires-in-ms MS] [--duplicates 0.2] [--seed S] [--prefix wallet-] [--amount-max 100]',
].join('\n');
/** A random hold's expiry when --expires-in-ms is not given. */
const RANDOM_HOLD_EXPIRES_IN_MS = 60_000;
/** A line longer than this cannot be a valid transfer; it is reported without being parsed. */
export const NDJSON_LINE_LENGTH_MAX = 4_096;
const PROGRESS_EVERY = 10_000;
/** The flags each kind takes: any other is named in the refusal rather than dropped. */
const FLAGS_OF_KIND: Readonly<Record<OperationKind, readonly string[]>> = {
  transfer: ['to', 'amount', 'currency'],
  hold: ['to', 'amount', 'currency', 'expires-in-ms', 'expires-at'],
  capture: ['hold', 'amount'],
  void: ['hold'],
  refund: ['original', 'amount'],
  split: ['leg', 'currency'],
  credit_limit: ['limit'],
  deposit: ['to', 'amount', 'currency', 'reference'],
  withdrawal: ['amount', 'currency', 'reference'],
  open_wallet: ['wallet', 'currency', 'credit-limit'],
  freeze_wallet: ['wallet', 'credits'],
  unfreeze_wallet: ['wallet'],
  close_wallet: ['wallet'],
};
const KIND_FLAGS = [
  'to',
  'amount',
  'currency',
  'expires-in-ms',
  'expires-at',
  'hold',
  'original',
  'leg',
  'limit',
  'reference',
  'wallet',
  'credit-limit',
  'credits',
];

function rate(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) throw new UsageError(`${flag} must be a number between 0 and 1`);
  return n;
}

const FLAGS = {
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
  kind: { type: 'string' },
  hold: { type: 'string' },
  original: { type: 'string' },
  'expires-in-ms': { type: 'string' },
  'expires-at': { type: 'string' },
  leg: { type: 'string', multiple: true },
  limit: { type: 'string' },
  reference: { type: 'string' },
  wallet: { type: 'string' },
  'credit-limit': { type: 'string' },
  credits: { type: 'string' },
  metadata: { type: 'string', multiple: true },
} as const;

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), FLAGS, USAGE);
  const kind = kindFlag(values.kind);
  const modes = [
    values.from !== undefined || values.to !== undefined || values.amount !== undefined || values.wallet !== undefined,
    values.file !== undefined,
    values.random !== undefined,
  ].filter(Boolean).length;
  if (modes !== 1)
    throw new UsageError(`choose exactly one of --from/--to/--amount/--wallet, --file, --random\nusage: ${USAGE}`);
  if (values.file !== undefined && values.kind !== undefined)
    throw new UsageError(`--file takes the kind from each line, not from --kind\nusage: ${USAGE}`);
  if (values.random !== undefined && kind !== 'transfer' && kind !== 'hold')
    throw new UsageError(
      `--random makes transfers or holds; a ${kind} names an operation decided before: use --file or flags\nusage: ${USAGE}`,
    );

  const config = loadConfig();
  // Refused before any connection is opened.
  const flagged = values.file === undefined && values.random === undefined ? flagOperation(values, kind, config) : null;
  if (values.intake === true) {
    await requestThroughIntake(values, kind, flagged, config);
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
      await enqueueFile(values.file, queue, config);
    } else if (values.random !== undefined) {
      const messages = randomMessages(values, kind);
      const jobs = await enqueueOperations(
        queue,
        messages.map((m) => m.wire),
        config.transferAmountMax,
        config.holdExpiryMaxMs,
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
      if (flagged === null) throw new Error('no operation from the flags');
      process.stdout.write(
        `${JSON.stringify(await enqueueOperation(queue, flagged, config.transferAmountMax, config.holdExpiryMaxMs))}\n`,
      );
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
});

async function enqueueFile(path: string, queue: TransferQueues, config: Config): Promise<void> {
  let enqueued = 0;
  const read = await readOperationFile(path, config, ENQUEUE_BATCH_MAX, async (batch, lineNumber) => {
    enqueued += (await enqueueOperations(queue, batch, config.transferAmountMax, config.holdExpiryMaxMs)).length;
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

/** Reads an NDJSON file of operations, reporting each invalid line, and hands on batches of valid ones. */
async function readOperationFile(
  path: string,
  config: Config,
  batchMax: number,
  send: (batch: OperationWire[], lineNumber: number) => Promise<void>,
): Promise<FileRead> {
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let lineNumber = 0;
  const invalid: { line: number; reason: string }[] = [];
  let batch: OperationWire[] = [];
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
    const verdict = validateOperationWithin(parsed, config);
    if (!verdict.ok) {
      report(verdict.reason);
      continue;
    }
    batch.push(parsed as OperationWire);
    if (batch.length >= batchMax) await flush();
  }
  await flush();
  return { lines: lineNumber, invalid };
}

type EnqueueFlags = Record<string, string | boolean | string[] | undefined>;
function text(v: string | boolean | string[] | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function kindFlag(value: string | boolean | string[] | undefined): OperationKind {
  const kind = text(value) ?? 'transfer';
  if (!(OPERATION_KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(
      `--kind must be one of ${OPERATION_KINDS.join(', ')}, got ${JSON.stringify(kind)}\nusage: ${USAGE}`,
    );
  }
  return kind as OperationKind;
}

/** One operation from the flags, validated as the worker will. */
function flagOperation(values: EnqueueFlags, kind: OperationKind, config: Config): OperationWire {
  const given = KIND_FLAGS.filter((f) => values[f] !== undefined && !FLAGS_OF_KIND[kind].includes(f));
  if (given.length > 0) throw new UsageError(`--${given[0]} is not a flag of a ${kind}\nusage: ${USAGE}`);
  if (kind.endsWith('_wallet') && values.from !== undefined) {
    throw new UsageError(`a ${kind} names its wallet with --wallet, not --from\nusage: ${USAGE}`);
  }
  const operationId = text(values['operation-id']) ?? randomUUID();
  const from = text(values.from) ?? '';
  const currency = text(values.currency);
  const amount = text(values.amount);
  const withCurrency = currency === undefined ? {} : { currency };
  const withAmount = amount === undefined ? {} : { amount };
  let wire: OperationWire;
  switch (kind) {
    case 'transfer':
      wire = { operationId, from, to: text(values.to) ?? '', amount: amount ?? '', ...withCurrency };
      break;
    case 'hold': {
      const expiresInMs = text(values['expires-in-ms']);
      const expiresAt = text(values['expires-at']);
      wire = {
        kind,
        operationId,
        from,
        to: text(values.to) ?? '',
        amount: amount ?? '',
        ...withCurrency,
        ...(expiresInMs === undefined ? {} : { expiresInMs: integerFlag(expiresInMs, '--expires-in-ms') }),
        ...(expiresAt === undefined ? {} : { expiresAt }),
      };
      break;
    }
    case 'capture':
      wire = { kind, operationId, from, hold: text(values.hold) ?? '', ...withAmount };
      break;
    case 'void':
      wire = { kind, operationId, from, hold: text(values.hold) ?? '' };
      break;
    case 'refund':
      wire = { kind, operationId, from, original: text(values.original) ?? '', ...withAmount };
      break;
    case 'split':
      wire = { kind, operationId, from, legs: legsOf(values), ...withCurrency };
      break;
    case 'credit_limit':
      wire = { kind, operationId, from, limit: text(values.limit) ?? '' };
      break;
    case 'deposit':
    case 'withdrawal': {
      const settled = {
        operationId,
        amount: amount ?? '',
        currency: currency ?? '',
        reference: text(values.reference) ?? '',
      };
      wire = kind === 'deposit' ? { kind, to: text(values.to) ?? '', ...settled } : { kind, from, ...settled };
      break;
    }
    case 'open_wallet':
    case 'freeze_wallet':
    case 'unfreeze_wallet':
    case 'close_wallet':
      wire = walletWire(values, kind, operationId);
      break;
  }
  const withMetadata = { ...wire, ...metadataOf(values) };
  const verdict = validateOperationWithin(withMetadata, config);
  if (!verdict.ok) throw new UsageError(verdict.reason);
  return withMetadata;
}

/** `--metadata KEY=VALUE`, repeated: the operation's metadata (none when the flag is absent). */
function metadataOf(values: EnqueueFlags): { metadata?: Record<string, string> } {
  const metadata = metadataFlags(Array.isArray(values.metadata) ? values.metadata : undefined);
  return metadata === undefined ? {} : { metadata };
}

/** A split's legs from its --leg WALLET:AMOUNT flags, in order. */
function legsOf(values: EnqueueFlags): { to: string; amount: string }[] {
  return (Array.isArray(values.leg) ? values.leg : []).map((leg) => {
    const at = leg.lastIndexOf(':');
    if (at < 1) throw new UsageError(`--leg must be WALLET:AMOUNT, got ${JSON.stringify(leg)}`);
    return { to: leg.slice(0, at), amount: leg.slice(at + 1) };
  });
}

/** A wallet operation from the flags: --wallet, and an opening's --currency and --credit-limit or a freeze's --credits. */
function walletWire(values: EnqueueFlags, kind: WalletRequest['kind'], operationId: string): OperationWire {
  const wallet = text(values.wallet) ?? '';
  switch (kind) {
    case 'open_wallet': {
      const currency = text(values.currency);
      const limit = text(values['credit-limit']);
      // Without --currency the validation says what is missing, as the worker would.
      return {
        kind,
        operationId,
        wallet,
        ...(currency === undefined ? {} : { currency }),
        ...(limit === undefined ? {} : { creditLimit: limit }),
      } as OperationWire;
    }
    case 'freeze_wallet': {
      const credits = text(values.credits);
      // Any text: the validation names a wrong one as the worker would.
      return { kind, operationId, wallet, ...(credits === undefined ? {} : { credits: credits as FreezeCredits }) };
    }
    default:
      return { kind, operationId, wallet };
  }
}

function randomMessages(values: EnqueueFlags, kind: OperationKind): { wire: OperationWire; kind: string }[] {
  const messages = randomWorkload({
    transfers: integerFlag(text(values.random) ?? '', '--random'),
    wallets: integerFlag(text(values.wallets) ?? '', '--wallets'),
    walletPrefix: text(values.prefix) ?? 'wallet-',
    duplicateRate: rate(text(values.duplicates) ?? '0', '--duplicates'),
    conflicts: 0,
    amountMaxMinor: integerFlag(text(values['amount-max']) ?? '100', '--amount-max'),
    seed: integerFlag(text(values.seed) ?? '1', '--seed'),
    operationPrefix: `rnd-${randomUUID().slice(0, 8)}-`,
  });
  if (kind !== 'hold') return messages;
  const expires = text(values['expires-in-ms']);
  const expiresInMs = expires === undefined ? RANDOM_HOLD_EXPIRES_IN_MS : integerFlag(expires, '--expires-in-ms');
  return messages.map((m) => ({ kind: m.kind, wire: { kind: 'hold', ...m.wire, expiresInMs } }));
}

/** --intake: every batch in one transaction of its own, through request_transfer() / request_operation(). */
async function requestThroughIntake(
  values: EnqueueFlags,
  kind: OperationKind,
  flagged: OperationWire | null,
  config: Config,
): Promise<void> {
  const pool = createPool({ ...config, dbPoolMax: 1 });
  const client = await pool.connect();
  let requested = 0;
  let duplicate = 0;
  const send = async (batch: OperationWire[], where: string) => {
    await client.query('BEGIN');
    try {
      const answers = await requestOperations(client, batch, config.transferAmountMax, config.holdExpiryMaxMs);
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
      const read = await readOperationFile(
        text(values.file) ?? '',
        config,
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
      const wires = randomMessages(values, kind).map((m) => m.wire);
      for (let start = 0; start < wires.length; start += INTAKE_BATCH_MAX) {
        await send(wires.slice(start, start + INTAKE_BATCH_MAX), `the batch from transfer #${start + 1}`);
        process.stderr.write(`requested ${requested + duplicate}/${wires.length}\n`);
      }
      process.stdout.write(`${JSON.stringify({ requested, duplicate })}\n`);
    } else {
      if (flagged === null) throw new Error('no operation from the flags');
      const wire = flagged;
      await send([wire], 'its transaction');
      process.stdout.write(`${JSON.stringify({ operationId: wire.operationId, requested, duplicate })}\n`);
    }
  } finally {
    client.release();
    await endPool(pool);
  }
}
