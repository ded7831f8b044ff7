// The generated reference documents match the code that declares their tables: a setting, a
// metric or an outcome added, removed or reworded in the code without `npm run docs` fails here.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderConfigurationDoc } from '../../../harness/docs/configuration-doc.ts';
import { renderMetricsDoc } from '../../../harness/docs/metrics-doc.ts';
import {
  GENERATED_NOTICE,
  generatedDoc,
  REFERENCE_DOCS,
  staleReferenceDocs,
} from '../../../harness/docs/reference-docs.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';
import { SETTINGS, type Setting } from '../../../src/config/settings.ts';
import { type MetricDefinition, WORKER_METRICS } from '../../../src/metrics/worker-metrics.ts';

const CONFIGURATION_DOC = 'docs/reference/configuration.md';
const METRICS_DOC = 'docs/reference/metrics.md';

describe('generated reference documents', () => {
  it('are committed exactly as the code renders them', () => {
    expect(staleReferenceDocs()).toEqual([]);
  });

  it('each say that they are generated', () => {
    for (const doc of REFERENCE_DOCS) expect(doc.render().split('\n')[0], doc.path).toBe(GENERATED_NOTICE);
  });

  it('are caught when one drifts', () => {
    const drifted = { path: 'README.md', render: () => 'not the README\n' };
    expect(staleReferenceDocs([drifted])).toEqual(['README.md']);
  });
});

describe('the configuration reference', () => {
  const configurationDoc = (settings: Readonly<Record<string, Setting>>) =>
    generatedDoc(CONFIGURATION_DOC, () => renderConfigurationDoc(settings));

  it('is registered, and has a row for every variable of the settings table', () => {
    expect(REFERENCE_DOCS.map((d) => d.path)).toContain(CONFIGURATION_DOC);
    const committed = readFileSync(join(PROJECT_ROOT, CONFIGURATION_DOC), 'utf8');
    for (const name of Object.keys(SETTINGS)) expect(committed).toContain(`| \`${name}\` |`);
    expect(committed).toContain('| `LOCK_TTL_MS` | `10000` | 100–600000 ms | ');
  });

  it('is caught when a setting is added to the table and the document is not regenerated', () => {
    expect(staleReferenceDocs([configurationDoc(SETTINGS)])).toEqual([]);
    const added: Readonly<Record<string, Setting>> = {
      ...SETTINGS,
      UNDOCUMENTED_WAIT_MS: { field: null, kind: 'integer', default: '5', min: 0, max: 10, unit: 'ms', doc: 'new' },
    };
    expect(configurationDoc(added).render()).toContain('| `UNDOCUMENTED_WAIT_MS` | `5` | 0–10 ms | new |');
    expect(staleReferenceDocs([configurationDoc(added)])).toEqual([CONFIGURATION_DOC]);
  });

  it('is caught when a bound or a default changes in the table', () => {
    const moved = { ...SETTINGS, LOCK_TTL_MS: { ...SETTINGS.LOCK_TTL_MS, max: 300_000 } };
    expect(staleReferenceDocs([configurationDoc(moved)])).toEqual([CONFIGURATION_DOC]);
    const defaulted = { ...SETTINGS, DB_POOL_MAX: { ...SETTINGS.DB_POOL_MAX, default: '9' } };
    expect(staleReferenceDocs([configurationDoc(defaulted)])).toEqual([CONFIGURATION_DOC]);
  });
});

describe('the metrics reference', () => {
  const metricsDoc = (metrics: Readonly<Record<string, MetricDefinition>>) =>
    generatedDoc(METRICS_DOC, () => renderMetricsDoc(metrics));

  it('is registered, and has a row for every metric the worker registers', () => {
    expect(REFERENCE_DOCS.map((d) => d.path)).toContain(METRICS_DOC);
    const committed = readFileSync(join(PROJECT_ROOT, METRICS_DOC), 'utf8');
    for (const m of Object.values(WORKER_METRICS)) expect(committed).toContain(`| \`${m.name}\` | ${m.type} |`);
    expect(Object.keys(WORKER_METRICS)).toHaveLength(21);
  });

  it('is caught when a metric is added or its help text changes', () => {
    expect(staleReferenceDocs([metricsDoc(WORKER_METRICS)])).toEqual([]);
    const added: Readonly<Record<string, MetricDefinition>> = {
      ...WORKER_METRICS,
      extra: { name: 'fenced_transfers_extra_total', type: 'counter', help: 'Undocumented', labelNames: [] },
    };
    expect(staleReferenceDocs([metricsDoc(added)])).toEqual([METRICS_DOC]);
    const reworded = { ...WORKER_METRICS, ready: { ...WORKER_METRICS.ready, help: 'Something else' } };
    expect(staleReferenceDocs([metricsDoc(reworded)])).toEqual([METRICS_DOC]);
  });
});
