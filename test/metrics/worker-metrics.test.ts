// The registry a worker serves on /metrics, read by the same strict parser the operations tests
// use (and that parser rejecting what a scraper would reject), and the counter ids the Redis
// aggregate stores being exactly the series /metrics prints.
import { describe, expect, it } from 'vitest';
import { REJECTION_REASONS, RETRY_KINDS, TERMINAL_OUTCOMES } from '../../src/ledger/vocabulary.ts';
import { transferCounterSummary } from '../../src/metrics/counter-aggregate.ts';
import { GIVE_UP_FEED_RESULTS, seriesId, WORKER_METRICS, WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.ts';

function busyMetrics(): WorkerMetrics {
  const m = new WorkerMetrics({ instanceId: 'worker-1-abcd', queueName: 'q"1\\x', defaultMetrics: true });
  m.decided({ outcome: 'applied', operationId: 'a', fence: '1' });
  m.decided({ outcome: 'applied', operationId: 'b', fence: '2' });
  m.decided({ outcome: 'rejected', operationId: 'c', reason: 'insufficient_funds', fence: '3' });
  m.decided({ outcome: 'duplicate', operationId: 'a', stored: { status: 'applied', fence: '1' } });
  m.staleFenceRefused();
  m.fenceAdvanced();
  m.lockLost('in_flight');
  m.lockBusyDeferred();
  m.retry('transient_error');
  m.invalidMessage();
  m.observeLockWait(0.003, 'acquired');
  m.startDecisionTimer()();
  m.setQueueDepthSource(async () => [{ queue: 'q"1\\x', state: 'waiting', jobs: 7 }]);
  m.setPoolUseSource(() => ({ total: 8, idle: 3, waiting: 2 }));
  return m;
}

describe('WorkerMetrics', () => {
  it('renders Prometheus text with our families, units and counters', async () => {
    const families = parsePrometheusText(await busyMetrics().exposition());
    const ours = [...families.values()].filter((f) => f.name.startsWith('fenced_transfers_'));
    expect(ours.map((f) => `${f.name} ${f.type}`).sort()).toEqual([
      'fenced_transfers_db_pool_connections gauge',
      'fenced_transfers_db_pool_waiting gauge',
      'fenced_transfers_decision_batch_size histogram',
      'fenced_transfers_decision_duration_seconds histogram',
      'fenced_transfers_fence_advances_total counter',
      'fenced_transfers_given_up_jobs_total counter',
      'fenced_transfers_holds_expired_total counter',
      'fenced_transfers_invalid_messages_total counter',
      'fenced_transfers_job_duration_seconds histogram',
      'fenced_transfers_jobs_in_progress gauge',
      'fenced_transfers_lock_busy_deferrals_total counter',
      'fenced_transfers_lock_epoch gauge',
      'fenced_transfers_lock_losses_total counter',
      'fenced_transfers_lock_wait_seconds histogram',
      'fenced_transfers_operations_total counter',
      'fenced_transfers_outcomes_total counter',
      'fenced_transfers_queue_jobs gauge',
      'fenced_transfers_rejections_total counter',
      'fenced_transfers_retries_total counter',
      'fenced_transfers_stale_fence_refusals_total counter',
      'fenced_transfers_worker_info gauge',
      'fenced_transfers_worker_ready gauge',
    ]);
    expect(sampleValue(families, 'fenced_transfers_outcomes_total', { outcome: 'applied' })).toBe(2);
    expect(sampleValue(families, 'fenced_transfers_rejections_total', { reason: 'insufficient_funds' })).toBe(1);
    expect(sampleValue(families, 'fenced_transfers_lock_wait_seconds_count', { result: 'acquired' })).toBe(1);
    expect(sampleValue(families, 'fenced_transfers_queue_jobs', { queue: 'q"1\\x', state: 'waiting' })).toBe(7);
    expect(sampleValue(families, 'fenced_transfers_db_pool_connections', { state: 'busy' })).toBe(5);
    expect(sampleValue(families, 'fenced_transfers_db_pool_connections', { state: 'idle' })).toBe(3);
    expect(sampleValue(families, 'fenced_transfers_db_pool_waiting', {})).toBe(2);
    expect(families.get('process_resident_memory_bytes')?.type).toBe('gauge');
  });

  it("starts one series per name of the vocabulary's lists, and no other", async () => {
    const samples = await new WorkerMetrics({ instanceId: 'w', queueName: 'q' }).counterSamples();
    const labels = (name: string, label: string) =>
      samples.filter((s) => s.name === `fenced_transfers_${name}`).map((s) => s.labels[label]);
    expect(labels('outcomes_total', 'outcome')).toEqual([...TERMINAL_OUTCOMES]);
    expect(labels('rejections_total', 'reason')).toEqual([...REJECTION_REASONS]);
    expect(labels('retries_total', 'kind')).toEqual([...RETRY_KINDS]);
    expect(labels('given_up_jobs_total', 'feed')).toEqual([...GIVE_UP_FEED_RESULTS]);
  });

  it('serves exactly the metrics WORKER_METRICS declares, with their type, help and labels', async () => {
    const families = parsePrometheusText(await busyMetrics().exposition());
    const served = [...families.values()]
      .filter((f) => f.name.startsWith('fenced_transfers_'))
      .map((f) => ({
        name: f.name,
        type: f.type,
        help: f.help,
        labelNames: [...new Set(f.samples.flatMap((s) => Object.keys(s.labels)).filter((l) => l !== 'le'))].sort(),
      }));
    const declared = Object.values(WORKER_METRICS).map((d) => ({
      name: d.name,
      type: d.type,
      help: d.help,
      labelNames: [...d.labelNames].sort(),
    }));
    expect(served.sort((a, b) => a.name.localeCompare(b.name))).toEqual(
      declared.sort((a, b) => a.name.localeCompare(b.name)),
    );
  });

  it('a queue that cannot be read leaves the depth gauge empty, the scrape still works', async () => {
    const m = busyMetrics();
    m.setQueueDepthSource(async () => {
      throw new Error('redis down');
    });
    const families = parsePrometheusText(await m.exposition());
    expect(families.get('fenced_transfers_queue_jobs')?.samples).toEqual([]);
    expect(sampleValue(families, 'fenced_transfers_outcomes_total', { outcome: 'applied' })).toBe(2);
  });

  it('the counter samples the aggregate stores are the series /metrics prints, value for value', async () => {
    const m = busyMetrics();
    const families = parsePrometheusText(await m.exposition());
    const printed = new Map<string, number>();
    for (const f of families.values()) {
      if (f.type !== 'counter' || !f.name.startsWith('fenced_transfers_')) continue;
      for (const s of f.samples) printed.set(seriesId(s.name, s.labels), s.value);
    }
    const samples = await m.counterSamples();
    expect(new Map(samples.map((s) => [seriesId(s.name, s.labels), s.value]))).toEqual(printed);
    const totals = Object.fromEntries(printed);
    expect(transferCounterSummary(totals)).toEqual({
      applied: 2,
      rejected: 1,
      duplicate: 1,
      'rejected:insufficient_funds': 1,
      invalid: 1,
      stale_fence: 1,
      fence_advanced: 1,
      lease_lost_in_flight: 1,
      lock_busy: 1,
      transient_error: 1,
    });
  });
});

describe('the Prometheus text parser of the tests', () => {
  const ok = '# HELP a_total help\n# TYPE a_total counter\na_total{x="1"} 2\n';
  it('accepts a well-formed exposition', () => {
    expect(sampleValue(parsePrometheusText(ok), 'a_total', { x: '1' })).toBe(2);
  });

  it.each([
    ['no final newline', ok.trimEnd()],
    ['a bad value', '# TYPE a_total counter\na_total 1,5\n'],
    ['an unterminated label value', '# TYPE a_total counter\na_total{x="1} 2\n'],
    ['a bad escape', '# TYPE a_total counter\na_total{x="\\t"} 2\n'],
    ['a family in two pieces', '# TYPE a_total counter\na_total 1\n# TYPE b gauge\nb 1\na_total{x="2"} 1\n'],
    ['a TYPE after samples', 'a_total 1\n# TYPE a_total counter\n'],
    [
      'buckets that are not cumulative',
      '# TYPE h histogram\nh_bucket{le="1"} 3\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n',
    ],
    [
      'a +Inf bucket that differs from _count',
      '# TYPE h histogram\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n',
    ],
  ])('rejects %s', (_, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});
