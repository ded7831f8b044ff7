// The chaos run's view of its queues: the BullMQ events it writes into the history while the run
// goes on, and every job read back after the drain for the checks and the report.
import { type Queue, QueueEvents } from 'bullmq';
import type { TransferQueues } from '../../src/queue/producer.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import { jobRef } from './chaos-enqueue.ts';
import type { FinalJob } from './final-job.ts';
import type { History } from './history.ts';

/** Jobs read per page after the drain. */
const JOBS_PAGE_SIZE = 1_000;

/** One QueueEvents per shard, on one connection, each writing its jobs' events into the history. */
export async function watchQueueEvents(
  queues: TransferQueues,
  connection: RedisClient,
  history: History,
  into: QueueEvents[],
): Promise<void> {
  const shardCount = queues.shards.length;
  for (const { shard } of queues.shards) {
    // From the stream's first entry, not from '$' (BullMQ's default), whose reader misses what is
    // written while it re-sends its XREAD (test/support/pipeline.ts says when). The queue is this
    // run's own (a fresh Redis, or a name with a random suffix on one given with --redis-url).
    const events = new QueueEvents(shard.name, { connection, prefix: shard.prefix, lastEventId: '0' });
    into.push(events);
    const ref = (jobId: string) => jobRef(shard, jobId, shardCount);
    events.on('error', () => undefined);
    events.on('active', ({ jobId, prev }) =>
      history.write({ type: 'job_active', jobId: ref(jobId), ...(prev === undefined ? {} : { prev }) }),
    );
    events.on('completed', ({ jobId, returnvalue }) => {
      history.write({ type: 'job_completed', jobId: ref(jobId), outcome: outcomeOf(returnvalue) });
    });
    events.on('failed', ({ jobId, failedReason }) =>
      history.write({ type: 'job_failed', jobId: ref(jobId), reason: failedReason }),
    );
    events.on('stalled', ({ jobId }) => history.write({ type: 'job_stalled', jobId: ref(jobId) }));
    await events.waitUntilReady();
  }
}

/** The outcome in a completed event's return value (an object, or its JSON text). */
function outcomeOf(returnvalue: unknown): string {
  const v = returnvalue;
  return typeof v === 'object' && v !== null && 'outcome' in v
    ? String((v as { outcome: unknown }).outcome)
    : typeof v === 'string'
      ? (/"outcome":"(\w+)"/.exec(v)?.[1] ?? v.slice(0, 40))
      : 'unknown';
}

export async function readFinalJobs(queues: TransferQueues): Promise<FinalJob[]> {
  const out: FinalJob[] = [];
  for (const { shard, queue } of queues.shards) {
    for (const job of await readShardJobs(queue))
      out.push({ ...job, jobId: jobRef(shard, job.jobId, queues.shards.length) });
  }
  return out;
}

async function readShardJobs(queue: Queue): Promise<FinalJob[]> {
  const out: FinalJob[] = [];
  const states = ['completed', 'failed', 'active', 'waiting', 'delayed', 'prioritized', 'waiting-children'] as const;
  for (const state of states) {
    for (let start = 0; ; start += JOBS_PAGE_SIZE) {
      const page = await queue.getJobs([state], start, start + JOBS_PAGE_SIZE - 1, true);
      for (const job of page) {
        if (job === undefined || job === null || job.id === undefined) continue;
        out.push({
          jobId: job.id,
          name: job.name,
          state,
          returnvalue: job.returnvalue,
          failedReason: job.failedReason === undefined || job.failedReason === null ? null : String(job.failedReason),
          attemptsMade: job.attemptsMade ?? 0,
          attemptsStarted: job.attemptsStarted ?? 0,
          timestamp: job.timestamp,
          processedOn: job.processedOn ?? null,
          finishedOn: job.finishedOn ?? null,
          data: job.data,
        });
      }
      if (page.length < JOBS_PAGE_SIZE) break;
    }
  }
  return out;
}
