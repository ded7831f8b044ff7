// The producer side: validates transfers against the wire format and puts them on the queue.
// Every call makes new jobs (ids assigned by BullMQ), so a re-sent operation is a second job:
// the idempotency record, not the queue, is what makes it harmless.
import { Queue, type JobsOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { validateTransferRequest, type TransferWire } from '../ledger/transfer-request.ts';
import { defaultJobOptions, TRANSFER_JOB_NAME } from './job-options.ts';

/** Jobs per addBulk call: one Redis round trip each, bounded memory per call. */
export const ENQUEUE_BATCH_MAX = 1_000;

export class InvalidTransferError extends Error {
  override name = 'InvalidTransferError';
}

export interface EnqueuedTransfer {
  operationId: string;
  jobId: string;
}

export function createTransferQueue(connection: Redis, queueName: string, attemptsMax: number): Queue {
  return new Queue(queueName, { connection, defaultJobOptions: defaultJobOptions(attemptsMax) });
}

function checked(wire: unknown, amountMax: bigint): TransferWire {
  const result = validateTransferRequest(wire, amountMax);
  if (!result.ok) throw new InvalidTransferError(result.reason);
  return wire as TransferWire;
}

export async function enqueueTransfer(
  queue: Queue,
  wire: TransferWire,
  amountMax: bigint,
  options: JobsOptions = {},
): Promise<EnqueuedTransfer> {
  const job = await queue.add(TRANSFER_JOB_NAME, checked(wire, amountMax), options);
  if (job.id === undefined) throw new Error('BullMQ assigned no job id');
  return { operationId: wire.operationId, jobId: job.id };
}

/** Enqueues many transfers with addBulk; all are validated before any is added. */
export async function enqueueTransfers(
  queue: Queue,
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
  const out: EnqueuedTransfer[] = [];
  for (let start = 0; start < data.length; start += ENQUEUE_BATCH_MAX) {
    const batch = data.slice(start, start + ENQUEUE_BATCH_MAX);
    const jobs = await queue.addBulk(batch.map((d) => ({ name: TRANSFER_JOB_NAME, data: d, opts: options })));
    jobs.forEach((job, i) => {
      const wire = batch[i];
      if (job.id === undefined || wire === undefined) throw new Error('BullMQ assigned no job id');
      out.push({ operationId: wire.operationId, jobId: job.id });
    });
    onProgress?.(out.length);
  }
  return out;
}
