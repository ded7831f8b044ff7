// The producer side: validates transfers against the wire format and puts them on the queue.
// Every call makes new jobs (ids assigned by BullMQ), so a re-sent operation is a second job:
// the idempotency record, not the queue, is what makes it harmless.
import { type JobsOptions, Queue } from 'bullmq';
import { InvalidTransferError } from '../errors.ts';
import { checkedOperations } from '../ledger/checked-operations.ts';
import {
  type OperationWire,
  type TransferWire,
  validateTransferRequest,
  walletOf,
} from '../ledger/transfer-request.ts';
import { jobTelemetryOf, traceCarrierOf } from '../tracing/spans.ts';
import { defaultJobOptions, TRANSFER_JOB_NAME } from './job-options.ts';
import {
  type QueueShard,
  queueShardsOf,
  type ShardingConfig,
  SINGLE_NODE_QUEUE_PREFIX,
  shardIndexOf,
} from './queue-shards.ts';
import type { RedisClient } from './redis-connection.ts';

/** Jobs per addBulk call: one Redis round trip each, bounded memory per call. */
export const ENQUEUE_BATCH_MAX = 1_000;

/** A job added to BullMQ for one operation. */
export interface EnqueuedTransfer {
  operationId: string;
  jobId: string;
  /** The shard queue it went to (job ids are unique per queue only). */
  queueName: string;
}

/**
 * One BullMQ Queue for transfer jobs, with the workers' default job options (attempts, back-off,
 * retention); `prefix` is BullMQ's key prefix (`bull` unless given).
 *
 * @throws BullMQ's Error when `queueName` is empty or contains `:`.
 */
export function createTransferQueue(
  connection: RedisClient,
  queueName: string,
  attemptsMax: number,
  prefix: string = SINGLE_NODE_QUEUE_PREFIX,
): Queue {
  return new Queue(queueName, { connection, prefix, defaultJobOptions: defaultJobOptions(attemptsMax) });
}

/** The producer's view of a sharded deployment: one BullMQ Queue per shard, and the routing rule. */
export class TransferQueues {
  private constructor(readonly shards: readonly { readonly shard: QueueShard; readonly queue: Queue }[]) {}

  static open(connection: RedisClient, config: ShardingConfig, attemptsMax: number): TransferQueues {
    return new TransferQueues(
      queueShardsOf(config).map((shard) => ({
        shard,
        queue: createTransferQueue(connection, shard.name, attemptsMax, shard.prefix),
      })),
    );
  }

  get queues(): Queue[] {
    return this.shards.map((s) => s.queue);
  }

  /** The queue of the shard a transfer from this wallet goes to. */
  queueOf(sourceWalletId: string): Queue {
    return (this.shards[shardIndexOf(sourceWalletId, this.shards.length)] as { queue: Queue }).queue;
  }

  async close(): Promise<void> {
    await Promise.all(this.shards.map((s) => s.queue.close()));
  }
}

type EnqueueTarget = Queue | TransferQueues;

function queueFor(target: EnqueueTarget, wire: OperationWire): Queue {
  return target instanceof TransferQueues ? target.queueOf(walletOf(wire)) : target;
}

function checked(wire: unknown, amountMax: bigint): TransferWire {
  const result = validateTransferRequest(wire, amountMax);
  if (!result.ok) throw new InvalidTransferError(result.reason);
  return wire as TransferWire;
}

/**
 * Validates a transfer and adds it to its shard's queue (BullMQ straight, no intake). A re-sent
 * operation is a second job, answered from the idempotency record.
 *
 * @param amountMax - the largest amount accepted, in minor units: the workers' TRANSFER_AMOUNT_MAX.
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) when it is outside the wire format,
 * before anything is added; Redis's error when the add fails.
 */
export async function enqueueTransfer(
  target: EnqueueTarget,
  wire: TransferWire,
  amountMax: bigint,
  options: JobsOptions = {},
): Promise<EnqueuedTransfer> {
  const queue = queueFor(target, checked(wire, amountMax));
  const job = await queue.add(TRANSFER_JOB_NAME, wire, tracedOptions(options));
  if (job.id === undefined) throw new Error('BullMQ assigned no job id');
  return { operationId: wire.operationId, jobId: job.id, queueName: queue.name };
}

/**
 * Enqueues many transfers with addBulk (one call per shard and slice); all are validated before
 * any is added. The results come back in the order of `wires`.
 *
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) naming the first transfer refused,
 * before any is added; Redis's error when an add fails (the slices before it are added).
 */
export async function enqueueTransfers(
  target: EnqueueTarget,
  wires: readonly TransferWire[],
  amountMax: bigint,
  options: JobsOptions = {},
  onProgress?: (done: number) => void,
): Promise<EnqueuedTransfer[]> {
  const data = wires.map((wire, i) => {
    try {
      return checked(wire, amountMax);
    } catch (err) {
      throw new InvalidTransferError(`transfer #${i + 1}: ${(err as Error).message}`);
    }
  });
  return addChecked(target, data, options, onProgress);
}

/**
 * Enqueues one operation of any kind (a transfer, a hold, a capture, a void, a refund, a split).
 *
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) when it is outside the wire format,
 * before anything is added; Redis's error when the add fails.
 */
export async function enqueueOperation(
  target: EnqueueTarget,
  wire: OperationWire,
  amountMax: bigint,
  holdExpiryMaxMs: number,
  options: JobsOptions = {},
): Promise<EnqueuedTransfer> {
  const [enqueued] = await enqueueOperations(target, [wire], amountMax, holdExpiryMaxMs, options);
  if (enqueued === undefined) throw new Error('BullMQ assigned no job id');
  return enqueued;
}

/**
 * Enqueues operations of any kind, as enqueueTransfers() does: all validated by the worker's rules
 * first (HOLD_EXPIRY_MAX_MS for a hold's expiry), each routed by `from`, the wallet it debits, to
 * the shard whose workers lock that wallet.
 *
 * @throws {@link InvalidTransferError} (`INVALID_TRANSFER`) naming the first operation refused,
 * before any is added; Redis's error when an add fails (the slices before it are added).
 */
export async function enqueueOperations(
  target: EnqueueTarget,
  wires: readonly OperationWire[],
  amountMax: bigint,
  holdExpiryMaxMs: number,
  options: JobsOptions = {},
  onProgress?: (done: number) => void,
): Promise<EnqueuedTransfer[]> {
  return addChecked(target, checkedOperations(wires, amountMax, holdExpiryMaxMs), options, onProgress);
}

/**
 * The options with the caller's trace context as the job's telemetry metadata, when the caller
 * traces (a span active around the call) and named none itself: the job's consumer span then
 * continues the caller's trace. A queue made with BullMQ's own `telemetry` option puts its `add`
 * span there instead.
 */
function tracedOptions(options: JobsOptions): JobsOptions {
  if (options.telemetry?.metadata !== undefined || options.telemetry?.omitContext === true) return options;
  const carrier = traceCarrierOf();
  return carrier === null ? options : { ...options, telemetry: { ...options.telemetry, ...jobTelemetryOf(carrier) } };
}

async function addChecked(
  target: EnqueueTarget,
  data: readonly OperationWire[],
  options: JobsOptions,
  onProgress?: (done: number) => void,
): Promise<EnqueuedTransfer[]> {
  const opts = tracedOptions(options);
  const out: EnqueuedTransfer[] = new Array(data.length);
  let done = 0;
  for (let start = 0; start < data.length; start += ENQUEUE_BATCH_MAX) {
    const slice = data.slice(start, start + ENQUEUE_BATCH_MAX);
    const byQueue = new Map<Queue, number[]>();
    slice.forEach((wire, i) => {
      const queue = queueFor(target, wire);
      const positions = byQueue.get(queue) ?? [];
      positions.push(start + i);
      byQueue.set(queue, positions);
    });
    for (const [queue, positions] of byQueue) {
      const jobs = await queue.addBulk(
        positions.map((p) => ({ name: TRANSFER_JOB_NAME, data: data[p] as OperationWire, opts })),
      );
      jobs.forEach((job, i) => {
        const position = positions[i] as number;
        const wire = data[position];
        if (job.id === undefined || wire === undefined) throw new Error('BullMQ assigned no job id');
        out[position] = { operationId: wire.operationId, jobId: job.id, queueName: queue.name };
      });
    }
    done += slice.length;
    onProgress?.(done);
  }
  return out;
}
