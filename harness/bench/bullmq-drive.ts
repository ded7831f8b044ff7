// The BullMQ side of the process cases: enqueue through the project's producer while noting
// each operation's enqueue time, wait for the queue to drain while the processes' memory is
// sampled, and turn BullMQ's per-job timestamps into latencies.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { OperationWire, TransferWire } from '../../src/ledger/transfer-request.ts';
import { ENQUEUE_BATCH_MAX, enqueueOperations, enqueueTransfers } from '../../src/queue/producer.ts';
import { waitForDrain } from '../../src/queue/queue-drain.ts';
import { BenchFleet, type BenchFleetSpec } from './bench-fleet.ts';
import type { CaseContext, LatencyFigures } from './case-result.ts';
import { type CpuSample, type CpuServers, startCpuSampler } from './cpu-account.ts';
import { differences, jobTimes, percentiles } from './measure.ts';
import type { ProcessPeak } from './process-memory.ts';

export interface Enqueued {
  /** operationId → Date.now() just before its addBulk call (the producer's moment of asking). */
  readonly enqueuedAtMs: Map<string, number>;
  /** operationId → BullMQ job id. */
  readonly jobIds: Map<string, string>;
}

export function emptyEnqueued(): Enqueued {
  return { enqueuedAtMs: new Map(), jobIds: new Map() };
}

/** enqueueTransfers (src/queue/producer.ts) one addBulk chunk at a time, stamping each chunk. */
export async function enqueueStamped(
  queue: Queue,
  wires: readonly TransferWire[],
  amountMax: bigint,
  into: Enqueued = emptyEnqueued(),
  onProgress?: (done: number) => void,
): Promise<Enqueued> {
  for (let start = 0; start < wires.length; start += ENQUEUE_BATCH_MAX) {
    const chunk = wires.slice(start, start + ENQUEUE_BATCH_MAX);
    const stampMs = Date.now();
    const added = await enqueueTransfers(queue, chunk, amountMax);
    for (const a of added) {
      into.enqueuedAtMs.set(a.operationId, stampMs);
      into.jobIds.set(a.operationId, a.jobId);
    }
    onProgress?.(start + chunk.length);
  }
  return into;
}

/**
 * enqueueOperations (src/queue/producer.ts) one addBulk chunk at a time, stamping each chunk, as
 * enqueueStamped() does for transfers: the payments' producer, validated by the worker's rules.
 */
export async function enqueueOperationsStamped(
  queue: Queue,
  wires: readonly OperationWire[],
  amountMax: bigint,
  holdExpiryMaxMs: number,
): Promise<Enqueued> {
  const into = emptyEnqueued();
  for (let start = 0; start < wires.length; start += ENQUEUE_BATCH_MAX) {
    const chunk = wires.slice(start, start + ENQUEUE_BATCH_MAX);
    const stampMs = Date.now();
    const added = await enqueueOperations(queue, chunk, amountMax, holdExpiryMaxMs);
    for (const a of added) {
      into.enqueuedAtMs.set(a.operationId, stampMs);
      into.jobIds.set(a.operationId, a.jobId);
    }
  }
  return into;
}

/** Waits for the queue to drain; samples memory and fails at once if a process died. */
export async function drainWithFleet(ctx: CaseContext, queue: Queue, fleet: BenchFleet, total: number): Promise<void> {
  await waitForDrain(
    queue,
    ctx.options.drainTimeoutS * 1000,
    (p) => {
      fleet.sampleMemory();
      const dead = fleet.exited();
      if (dead.length > 0)
        throw new Error(`worker process ${dead.join(', ')} exited during ${ctx.caseName}; see its log`);
      ctx.progress.tick(
        p.completed + p.failed,
        total,
        `(${p.active} active, ${p.delayed} delayed, ${p.failed} failed)`,
      );
    },
    ctx.signal,
  );
}

export interface FleetRun {
  readonly processes: ProcessPeak[];
  /** Bench clock from starting the processes until `use` was done. */
  readonly wallMs: number;
  /** CPU samples of the processes and the servers while `use` ran (see cpu-account.ts). */
  readonly cpuSamples: readonly CpuSample[];
}

/**
 * Starts the processes, samples their CPU and the servers' (unless `servers` is null: no
 * account), runs `use`, then reads their peak memory and stops them (also on error).
 */
export async function withFleet(
  spec: BenchFleetSpec,
  servers: CpuServers | null,
  use: (fleet: BenchFleet) => Promise<void>,
): Promise<FleetRun> {
  const fleet = BenchFleet.create(spec);
  const startedMs = performance.now();
  fleet.startAll();
  let processes: ProcessPeak[];
  let wallMs: number;
  let cpuSamples: readonly CpuSample[] = [];
  try {
    const sampler = servers === null ? null : await startCpuSampler({ processPids: () => fleet.pids(), ...servers });
    try {
      await use(fleet);
    } finally {
      cpuSamples = (await sampler?.stop()) ?? [];
    }
  } finally {
    wallMs = performance.now() - startedMs;
    processes = await fleet.stopAll();
  }
  return { processes, wallMs, cpuSamples };
}

/** Starts the processes on a filled queue and waits for it to drain. */
export function runFleetUntilDrained(
  ctx: CaseContext,
  queue: Queue,
  spec: BenchFleetSpec,
  servers: CpuServers,
  total: number,
): Promise<FleetRun> {
  return withFleet(spec, servers, (fleet) => drainWithFleet(ctx, queue, fleet, total));
}

/** Latencies of the operations in `enqueued` from BullMQ's job hashes and the commit times. */
export async function bullmqLatencies(
  connection: Redis,
  queue: Queue,
  enqueued: Enqueued,
  commits: ReadonlyMap<string, number> | null,
): Promise<LatencyFigures> {
  const times = await jobTimes(connection, queue, [...enqueued.jobIds.values()]);
  const finished = new Map<string, number>();
  const processed = new Map<string, number>();
  for (const [operationId, jobId] of enqueued.jobIds) {
    const t = times.get(jobId);
    if (t === undefined) continue;
    finished.set(operationId, t.finishedOnMs);
    processed.set(operationId, t.processedOnMs);
  }
  return {
    enqueueToCommit: commits === null ? null : percentiles(differences(commits, enqueued.enqueuedAtMs)),
    enqueueToAnswer: percentiles(differences(finished, enqueued.enqueuedAtMs)),
    activeToCommit: commits === null ? null : percentiles(differences(commits, processed)),
    call: null,
  };
}

/** finishedOn of every job, for the throughput span of the no-op case. */
export async function finishTimes(connection: Redis, queue: Queue, jobIds: readonly string[]): Promise<number[]> {
  const times = await jobTimes(connection, queue, jobIds);
  return [...times.values()].map((t) => t.finishedOnMs);
}
