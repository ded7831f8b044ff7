// Renders docs/reference/metrics.md from the worker's metric definitions (WORKER_METRICS in
// src/metrics/worker-metrics.ts, from which the registry is built): every metric's name, type,
// labels and help text, and the buckets of the histograms. The definitions are a parameter so
// that a test can render a changed list and see the drift check catch it.
import type { MetricDefinition } from '../../src/metrics/worker-metrics.ts';

/** A Markdown table cell: pipes escaped, so a help text cannot split the row. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

function labelsOf(metric: MetricDefinition): string {
  return metric.labelNames.length === 0 ? '(none)' : metric.labelNames.map((l) => `\`${l}\``).join(', ');
}

export function renderMetricsDoc(metrics: Readonly<Record<string, MetricDefinition>>): string {
  const all = Object.values(metrics);
  const rows = all.map((m) => `| \`${m.name}\` | ${m.type} | ${labelsOf(m)} | ${cell(m.help)} |`);
  const histograms = all
    .filter((m) => m.type === 'histogram')
    .map((m) => `| \`${m.name}\` | ${(m.buckets ?? []).join(', ')} |`);
  return [
    '# Metrics',
    '',
    'Every worker process serves these on `GET /metrics` of its HTTP server (port `METRICS_PORT`, see',
    '[configuration](configuration.md)), in the Prometheus text format. They are counted in the',
    'process, so each worker reports its own; sum them over the workers. Every labelled counter series',
    'a worker knows of starts at 0, so a `rate()` over it works from the first scrape.',
    "A worker also serves prom-client's process and Node.js metrics (`process_*`, `nodejs_*`).",
    '',
    'The metrics are declared in WORKER_METRICS in',
    '[src/metrics/worker-metrics.ts](../../src/metrics/worker-metrics.ts), from which the registry and',
    'this page are made.',
    '',
    '| metric | type | labels | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    '## Histogram buckets',
    '',
    "Upper bounds of the buckets, in the histogram's unit (`_seconds`: seconds; a size: transfers).",
    '',
    '| histogram | buckets |',
    '| --- | --- |',
    ...histograms,
    '',
  ].join('\n');
}

/** docs/reference/relay-metrics.md: the relay's metrics (RELAY_METRICS in src/intake/relay-metrics.ts). */
export function renderRelayMetricsDoc(metrics: Readonly<Record<string, MetricDefinition>>): string {
  const rows = Object.values(metrics).map((m) => `| \`${m.name}\` | ${m.type} | ${labelsOf(m)} | ${cell(m.help)} |`);
  return [
    '# Relay metrics',
    '',
    'Every relay process (`npm run relay`) serves these on `GET /metrics` of its HTTP server (port',
    '`RELAY_METRICS_PORT`, see [configuration](configuration.md)), in the Prometheus text format. The',
    'counters count what that relay did (sum them over the relays); the gauges are read from',
    'PostgreSQL at scrape time, so every relay reports the same backlog and cursor. A relay also serves',
    "prom-client's process and Node.js metrics (`process_*`, `nodejs_*`).",
    '',
    'The metrics are declared in RELAY_METRICS in',
    '[src/intake/relay-metrics.ts](../../src/intake/relay-metrics.ts), from which this page is made.',
    '',
    '| metric | type | labels | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
