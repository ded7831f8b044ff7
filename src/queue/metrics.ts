// Cross-process counters of what the workers saw (outcomes, retries and their causes), kept
// in one Redis hash per queue so the demo and the chaos report can show them. A worker counts
// in process and adds its counts to the hash in the background, so no job waits on a counter.
import type { Cluster, Redis } from 'ioredis';

export const METRIC_EVENTS = [
  'applied', 'rejected', 'duplicate', 'conflict', 'invalid',
  'stale_fence', 'lock_lost', 'lease_lost_in_flight', 'lock_busy', 'transient_error', 'fence_advanced',
] as const;
export type MetricEvent = (typeof METRIC_EVENTS)[number] | `rejected:${string}` | `duplicate:${string}`;

type MetricsRedis = Redis | Cluster;

export function metricsKey(keyPrefix: string, queueName: string): string {
  return `${keyPrefix}metrics:{${queueName}}`;
}

export async function recordEvents(redis: MetricsRedis, key: string, events: readonly MetricEvent[]): Promise<void> {
  if (events.length === 0) return;
  const pipeline = redis.pipeline();
  for (const event of events) pipeline.hincrby(key, event, 1);
  await pipeline.exec();
}

export async function readMetrics(redis: MetricsRedis, key: string): Promise<Record<string, number>> {
  const raw = await redis.hgetall(key);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
}

/**
 * Counts events in process and adds them to the hash every flushIntervalMs with one pipelined
 * round trip. Counts that fail to reach Redis are kept for the next flush. A process killed
 * with SIGKILL loses at most one interval of counts: they are for reports, the database holds
 * the truth.
 */
export class EventCounter {
  private counts = new Map<MetricEvent, number>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly redis: MetricsRedis,
    private readonly key: string,
    flushIntervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {
    this.timer = setInterval(() => void this.flush(), flushIntervalMs);
    this.timer.unref();
  }

  add(events: readonly MetricEvent[]): void {
    for (const event of events) this.counts.set(event, (this.counts.get(event) ?? 0) + 1);
  }

  /** Adds what was counted so far to the hash; one flush at a time. */
  async flush(): Promise<void> {
    while (this.flushing !== null) await this.flushing;
    if (this.counts.size === 0) return;
    const batch = this.counts;
    this.counts = new Map();
    this.flushing = (async () => {
      try {
        const pipeline = this.redis.pipeline();
        for (const [event, n] of batch) pipeline.hincrby(this.key, event, n);
        const replies = await pipeline.exec();
        const failed = replies?.find(([err]) => err !== null);
        if (failed !== undefined) throw failed[0];
      } catch (err) {
        // Not lost: counted again at the next flush. A partial failure may count some twice,
        // which a report can live with; a transfer's outcome is never read from here.
        for (const [event, n] of batch) this.counts.set(event, (this.counts.get(event) ?? 0) + n);
        this.onError(err);
      } finally {
        this.flushing = null;
      }
    })();
    await this.flushing;
  }

  /** Stops the timer and writes the last counts. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
