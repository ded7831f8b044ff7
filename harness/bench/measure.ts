// What a case is measured by, read after it has run: the span of the deciding transactions in
// PostgreSQL (transfers.created_at), enqueue→commit latencies against the bench's own enqueue
// times, BullMQ's per-job timestamps, and percentiles.
//
// transfers.created_at defaults to CURRENT_TIMESTAMP: the start time of the transaction that
// decided the transfer (for a batch, the batch's transaction). So "first commit → last commit"
// is, precisely, the start of the first deciding transaction to the start of the last one; it
// leaves out the last transaction's own run and commit (about a millisecond, or a batch's
// duration). Node's Date.now() and PostgreSQL's clock read the same system clock here (same
// machine), so enqueue→commit differences are meaningful to well under a millisecond.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type pg from 'pg';

export interface Percentiles {
  readonly n: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly max: number;
}

/** Nearest-rank percentiles (no interpolation), values rounded to 0.01 ms; null for no values. */
export function percentiles(values: readonly number[]): Percentiles | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
  const round = (v: number) => Math.round(v * 100) / 100;
  return {
    n: sorted.length,
    p50: round(rank(50)),
    p95: round(rank(95)),
    p99: round(rank(99)),
    max: round(sorted.at(-1) as number),
  };
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export interface Span {
  readonly count: number;
  readonly firstMs: number;
  readonly lastMs: number;
  readonly spanMs: number;
  /** count / span: the "transfers / (last commit − first commit)". */
  readonly perS: number;
}

export function spanOf(times: readonly number[]): Span | null {
  if (times.length < 2) return null;
  let first = Infinity;
  let last = -Infinity;
  for (const t of times) {
    if (t < first) first = t;
    if (t > last) last = t;
  }
  const spanMs = last - first;
  return {
    count: times.length,
    firstMs: first,
    lastMs: last,
    spanMs,
    perS: spanMs > 0 ? (times.length * 1000) / spanMs : 0,
  };
}

/** The throughput fields of a case result from its transfers' created_at times. */
export function createdAtThroughput(commits: ReadonlyMap<string, number>): {
  transfers: number;
  throughputPerS: number | null;
  spanMs: number | null;
  spanSource: 'transfers.created_at';
} {
  const span = spanOf([...commits.values()]);
  return {
    transfers: commits.size,
    throughputPerS: span?.perS ?? null,
    spanMs: span?.spanMs ?? null,
    spanSource: 'transfers.created_at',
  };
}

/** operationId → transfers.created_at (epoch ms, µs precision) of the operations with this prefix. */
export async function commitTimes(pool: pg.Pool, operationPrefix: string): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ operation_id: string; t: number }>(
    `SELECT operation_id, extract(epoch FROM created_at)::float8 * 1000 AS t
       FROM transfers WHERE starts_with(operation_id, $1)`,
    [operationPrefix],
  );
  return new Map(rows.map((r) => [r.operation_id, r.t]));
}

export interface JobTimes {
  /** When a worker took the job (BullMQ's processedOn, the worker's Date.now()). */
  readonly processedOnMs: number;
  /** When the worker finished it, after the decision returned (BullMQ's finishedOn). */
  readonly finishedOnMs: number;
}

/** Reads processedOn/finishedOn of the given jobs from their hashes, pipelined in chunks. */
export async function jobTimes(
  connection: Redis,
  queue: Queue,
  jobIds: readonly string[],
): Promise<Map<string, JobTimes>> {
  const out = new Map<string, JobTimes>();
  const chunk = 1_000;
  for (let start = 0; start < jobIds.length; start += chunk) {
    const ids = jobIds.slice(start, start + chunk);
    const pipeline = connection.pipeline();
    for (const id of ids) pipeline.hmget(queue.toKey(id), 'processedOn', 'finishedOn');
    const replies = (await pipeline.exec()) ?? [];
    replies.forEach(([err, value], i) => {
      const id = ids[i];
      if (err !== null || id === undefined || !Array.isArray(value)) return;
      const [processedOn, finishedOn] = value as (string | null)[];
      if (processedOn == null || finishedOn == null) return;
      out.set(id, { processedOnMs: Number(processedOn), finishedOnMs: Number(finishedOn) });
    });
  }
  return out;
}

/** Each key's value minus its start time, for the keys both maps have. */
export function differences(ends: ReadonlyMap<string, number>, starts: ReadonlyMap<string, number>): number[] {
  const out: number[] = [];
  for (const [key, end] of ends) {
    const start = starts.get(key);
    if (start !== undefined) out.push(end - start);
  }
  return out;
}
