// The chaos run's producer: sends the workload's messages at a steady pace (valid ones through
// the product's producer, hostile ones straight onto a queue), retries what Redis did not
// acknowledge, and records each message sent under its job in the history.
import { setTimeout as sleep } from 'node:timers/promises';
import { CONFIG_DEFAULTS } from '../../src/config/config.ts';
import type { OperationWire } from '../../src/ledger/transfer-request.ts';
import { enqueueOperations, type TransferQueues } from '../../src/queue/producer.ts';
import type { QueueProgress } from '../../src/queue/queue-drain.ts';
import type { QueueShard } from '../../src/queue/queue-shards.ts';
import type { ChaosMessage } from './chaos-workload.ts';
import type { History } from './history.ts';

export const ENQUEUE_TICK_MS = 100;
/**
 * A producer retries what Redis did not acknowledge (a master failing over, a restart): for this
 * long at most, every PRODUCER_RETRY_DELAY_MS. A retried add whose first try did land leaves a
 * job the harness has no record of (counted in the report, answered from the idempotency record).
 */
export const PRODUCER_RETRY_TIMEOUT_MS = 60_000;
export const PRODUCER_RETRY_DELAY_MS = 250;
const AMOUNT_MAX = BigInt(CONFIG_DEFAULTS.TRANSFER_AMOUNT_MAX);
export const HOLD_EXPIRY_MAX_MS = Number(CONFIG_DEFAULTS.HOLD_EXPIRY_MAX_MS);

/** What the progress line shows; the run's steps update it. */
export interface Progress {
  phase: string;
  enqueued: number;
  /** Enqueue calls the producer repeated after an error. */
  producerRetries: number;
  queue: QueueProgress | null;
  faults: number;
  lastFault: string;
}

/** Where a sent message is recorded: the run's map of jobs, its history and its progress. */
export interface SentRecord {
  readonly history: History;
  /** jobId → the message sent under it. */
  readonly sent: Map<string, ChaosMessage>;
  readonly progress: Progress;
  /** jobId → when the producer first tried to send it (history time), when the run wants it. */
  readonly firstTryMs?: Map<string, number>;
  /**
   * Operations whose add Redis acknowledged (intake runs: the producer's side of "lost"). Kept
   * apart from `sent`: after a lossy failover BullMQ may hand out a lost job's id again.
   */
  readonly acknowledged?: Set<string>;
}

/**
 * How the run names a job: its BullMQ id with one queue; `<shard>:<id>` with several (ids are
 * unique per queue only).
 */
export function jobRef(shard: Pick<QueueShard, 'index'>, jobId: string, shardCount: number): string {
  return shardCount === 1 ? jobId : `${shard.index}:${jobId}`;
}

async function producerRetry<T>(send: () => Promise<T>, progress: Progress): Promise<T> {
  const deadline = performance.now() + PRODUCER_RETRY_TIMEOUT_MS;
  for (;;) {
    try {
      return await send();
    } catch (err) {
      if (performance.now() > deadline) throw err;
      progress.producerRetries += 1;
      await sleep(PRODUCER_RETRY_DELAY_MS);
    }
  }
}

function record(to: SentRecord, message: ChaosMessage, jobId: string, triedAtMs: number): void {
  to.sent.set(jobId, message);
  to.firstTryMs?.set(jobId, triedAtMs);
  if (message.kind !== 'invalid' && message.operationId !== null) to.acknowledged?.add(message.operationId);
  to.progress.enqueued = to.sent.size;
  const wire =
    message.kind === 'invalid' ? null : (message.data as Partial<Record<'kind' | 'from' | 'to' | 'amount', string>>);
  to.history.write({
    type: 'enqueue',
    jobId,
    seq: message.seq,
    kind: message.kind,
    operationId: message.operationId,
    ...(message.defect === null ? {} : { defect: message.defect }),
    ...(wire === null
      ? {}
      : { effect: { kind: wire.kind ?? 'transfer', from: wire.from, to: wire.to, amount: wire.amount } }),
  });
}

/** Sends the messages in order, a slice every tick, so they spread over `windowMs`. */
export async function enqueuePaced(
  queues: TransferQueues,
  messages: readonly ChaosMessage[],
  windowMs: number,
  to: SentRecord,
  signal: AbortSignal,
): Promise<void> {
  const { history } = to;
  const ticks = Math.max(1, Math.floor(windowMs / ENQUEUE_TICK_MS));
  for (let tick = 0, next = 0; next < messages.length; tick++) {
    const dueMs = tick * ENQUEUE_TICK_MS - history.nowMs();
    if (dueMs > 0) await sleep(dueMs);
    if (signal.aborted) return;
    // Tick k sends up to message ceil((k + 1) · n / ticks): the last one goes at the end of the window, not before.
    const slice = messages.slice(next, Math.ceil(((tick + 1) * messages.length) / ticks));
    next += slice.length;
    await sendSlice(queues, slice, to);
  }
}

/** Valid messages go through the producer (validated, addBulk); hostile ones straight onto the queue. */
export async function sendSlice(queues: TransferQueues, slice: readonly ChaosMessage[], to: SentRecord): Promise<void> {
  const { history, progress } = to;
  const shardCount = queues.shards.length;
  const shardOfName = new Map(queues.shards.map(({ shard }) => [shard.name, shard]));
  let run: ChaosMessage[] = [];
  const flush = async () => {
    if (run.length === 0) return;
    const batch = run;
    const triedAtMs = history.nowMs();
    const done = await producerRetry(
      () =>
        enqueueOperations(
          queues,
          batch.map((m) => m.data as OperationWire),
          AMOUNT_MAX,
          HOLD_EXPIRY_MAX_MS,
        ),
      progress,
    );
    done.forEach((d, i) => {
      record(
        to,
        run[i] as ChaosMessage,
        jobRef(shardOfName.get(d.queueName) as QueueShard, d.jobId, shardCount),
        triedAtMs,
      );
    });
    run = [];
  };
  for (const message of slice) {
    if (message.kind !== 'invalid') {
      run.push(message);
      continue;
    }
    await flush();
    // Hostile messages have no trustworthy source wallet: spread them over the shards by position.
    const target = queues.shards[message.seq % shardCount] as (typeof queues.shards)[number];
    const triedAtMs = history.nowMs();
    const job = await producerRetry(() => target.queue.add(message.jobName, message.data as object), progress);
    if (job.id !== undefined) record(to, message, jobRef(target.shard, job.id, shardCount), triedAtMs);
  }
  await flush();
}
