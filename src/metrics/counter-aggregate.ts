// The workers' counters gathered in Redis, for the demo and the chaos harness: the same numbers
// as each worker's /metrics, summed over the workers of a queue.
//
// Why a shared aggregate rather than scraping every worker's /metrics at the end: the chaos
// harness kills workers with SIGKILL and restarts them, and a dead process's endpoint is gone
// with its counters. So each worker copies its prom-client counters to Redis every
// COUNTER_FLUSH_INTERVAL_MS and once more when it stops, on a timer, never on a job's path.
//
// It writes absolute values into a hash of its own (`…:i:<instance>`), not increments into a
// shared one: a flush whose reply was lost (a cut link) can be sent again without counting
// twice, and a killed worker leaves its last flushed values behind. A reader sums the hashes of
// the instances listed in the queue's set. A worker killed with SIGKILL loses at most its last
// interval of counts; the ledger, not these counters, is the record of what happened.
import type { Cluster, Redis } from 'ioredis';
import { TERMINAL_OUTCOMES } from '../ledger/vocabulary.ts';
import type { Logger } from '../log/logger.ts';
import { METRIC_PREFIX, seriesId, type WorkerMetrics } from './worker-metrics.ts';

export const COUNTER_FLUSH_INTERVAL_MS = 1_000;
/** A flush that has not answered in this long is abandoned; the next one sends the same values again. */
export const COUNTER_FLUSH_TIMEOUT_MS = 2_000;
/** How long an instance's hash outlives its last flush (reports of old runs need not stay forever). */
export const COUNTER_AGGREGATE_TTL_S = 7 * 24 * 3600;

export interface AggregateKeys {
  /** The set of instance ids that have flushed for this queue. */
  readonly instances: string;
  instance(instanceId: string): string;
}

/** All keys share the queue's hash tag, so one pipeline reaches them on Redis Cluster too. */
export function aggregateKeys(keyPrefix: string, queueName: string): AggregateKeys {
  const base = `${keyPrefix}metrics:{${queueName}}`;
  return { instances: `${base}:instances`, instance: (id) => `${base}:i:${id}` };
}

export class CounterAggregatePublisher {
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<boolean> | null = null;

  constructor(
    private readonly options: {
      readonly redis: Redis;
      readonly keys: AggregateKeys;
      readonly metrics: WorkerMetrics;
      readonly logger: Logger;
      readonly intervalMs?: number;
    },
  ) {}

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => void this.flush(), this.options.intervalMs ?? COUNTER_FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  /** Writes the current values; resolves false when Redis did not take them (they go again next time). */
  flush(): Promise<boolean> {
    if (this.inFlight !== null) return this.inFlight;
    this.inFlight = this.write().finally(() => {
      this.inFlight = null;
    });
    return this.inFlight;
  }

  /** Stops the timer and flushes one last time. */
  async stop(): Promise<boolean> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.inFlight !== null) await this.inFlight;
    return this.flush();
  }

  private async write(): Promise<boolean> {
    const { redis, keys, metrics, logger } = this.options;
    const samples = await metrics.counterSamples();
    const hashKey = keys.instance(metrics.instanceId);
    const fields: Record<string, string> = {};
    for (const s of samples) fields[seriesId(s.name, s.labels)] = String(s.value);
    const pipeline = redis
      .pipeline()
      .hset(hashKey, fields)
      .expire(hashKey, COUNTER_AGGREGATE_TTL_S)
      .sadd(keys.instances, metrics.instanceId)
      .expire(keys.instances, COUNTER_AGGREGATE_TTL_S);
    let timer: NodeJS.Timeout | undefined;
    try {
      const replies = await Promise.race([
        pipeline.exec(),
        new Promise<'timed_out'>((resolve) => {
          timer = setTimeout(() => resolve('timed_out'), COUNTER_FLUSH_TIMEOUT_MS);
        }),
      ]);
      if (replies === 'timed_out') throw new Error(`no reply within ${COUNTER_FLUSH_TIMEOUT_MS} ms`);
      const failed = replies?.find(([err]) => err !== null);
      if (failed !== undefined) throw failed[0];
      return true;
    } catch (err) {
      logger.debug(
        { event: 'counter_flush_failed', err: err instanceof Error ? err.message : String(err) },
        'counters not copied to Redis; the next flush sends them again',
      );
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Series id (as /metrics prints it) → value summed over every instance that flushed for this queue. */
export type CounterTotals = Readonly<Record<string, number>>;

export async function readCounterTotals(redis: Redis | Cluster, keys: AggregateKeys): Promise<CounterTotals> {
  const instances = await redis.smembers(keys.instances);
  if (instances.length === 0) return {};
  const pipeline = redis.pipeline();
  for (const id of instances) pipeline.hgetall(keys.instance(id));
  const replies = (await pipeline.exec()) ?? [];
  const totals: Record<string, number> = {};
  for (const [err, hash] of replies) {
    if (err !== null) throw err;
    for (const [series, value] of Object.entries(hash as Record<string, string>)) {
      totals[series] = (totals[series] ?? 0) + Number(value);
    }
  }
  return totals;
}

/**
 * The totals under the short names the demo and the chaos report print (`applied`,
 * `rejected:<reason>`, `stale_fence`, …): a view of the same counters, not a second set.
 */
export function transferCounterSummary(totals: CounterTotals): Record<string, number> {
  const p = METRIC_PREFIX;
  const out: Record<string, number> = {};
  const put = (name: string, value: number | undefined) => {
    if (value !== undefined && value !== 0) out[name] = value;
  };
  for (const outcome of TERMINAL_OUTCOMES) {
    put(outcome, totals[seriesId(`${p}outcomes_total`, { outcome })]);
  }
  const rejection = new RegExp(`^${p}rejections_total\\{reason="([a-z_]+)"\\}$`);
  for (const [series, value] of Object.entries(totals)) {
    const reason = rejection.exec(series)?.[1];
    if (reason !== undefined) put(`rejected:${reason}`, value);
  }
  put('invalid', totals[`${p}invalid_messages_total`]);
  put('stale_fence', totals[`${p}stale_fence_refusals_total`]);
  put('fence_advanced', totals[`${p}fence_advances_total`]);
  put('lock_lost', totals[seriesId(`${p}lock_losses_total`, { when: 'before_commit' })]);
  put('lease_lost_in_flight', totals[seriesId(`${p}lock_losses_total`, { when: 'in_flight' })]);
  put('lock_busy', totals[`${p}lock_busy_deferrals_total`]);
  put('transient_error', totals[seriesId(`${p}retries_total`, { kind: 'transient_error' })]);
  put('holds_expired', totals[`${p}holds_expired_total`]);
  return out;
}
