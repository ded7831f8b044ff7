// Cross-process counters of what the workers saw (outcomes, retries and their causes), kept
// in one Redis hash per queue so the demo and the chaos report can show them.
import type { Cluster, Redis } from 'ioredis';

export const METRIC_EVENTS = [
  'applied', 'rejected', 'duplicate', 'conflict', 'invalid',
  'stale_fence', 'lock_lost', 'lease_lost_in_flight', 'lock_busy', 'transient_error', 'fence_advanced',
] as const;
export type MetricEvent = (typeof METRIC_EVENTS)[number] | `rejected:${string}` | `duplicate:${string}`;

export function metricsKey(keyPrefix: string, queueName: string): string {
  return `${keyPrefix}metrics:{${queueName}}`;
}

export async function recordEvents(redis: Redis | Cluster, key: string, events: readonly MetricEvent[]): Promise<void> {
  if (events.length === 0) return;
  const pipeline = redis.pipeline();
  for (const event of events) pipeline.hincrby(key, event, 1);
  await pipeline.exec();
}

export async function readMetrics(redis: Redis | Cluster, key: string): Promise<Record<string, number>> {
  const raw = await redis.hgetall(key);
  return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
}
