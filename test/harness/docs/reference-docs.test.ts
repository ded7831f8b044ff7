// The generated reference documents match the code that declares their tables: a setting, a
// metric or an outcome added, removed or reworded in the code without `npm run docs` fails here,
// and so does a migration added or its leading comment reworded.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderConfigurationDoc } from '../../../harness/docs/configuration-doc.ts';
import { renderMetricsDoc } from '../../../harness/docs/metrics-doc.ts';
import {
  type DescribedMigration,
  leadingParagraph,
  MIGRATIONS_BEGIN,
  MIGRATIONS_DOC,
  MIGRATIONS_END,
  migrationsReferenceDoc,
  withMigrationsTable,
} from '../../../harness/docs/migrations-doc.ts';
import {
  GENERATED_NOTICE,
  generatedDoc,
  REFERENCE_DOCS,
  staleReferenceDocs,
} from '../../../harness/docs/reference-docs.ts';
import { MIGRATIONS_DIR, PROJECT_ROOT } from '../../../src/config/paths.ts';
import { SETTINGS, type Setting } from '../../../src/config/settings.ts';
import { readMigrations } from '../../../src/db/migrations.ts';
import { type MetricDefinition, WORKER_METRICS } from '../../../src/metrics/worker-metrics.ts';

const CONFIGURATION_DOC = 'docs/reference/configuration.md';
const METRICS_DOC = 'docs/reference/metrics.md';

describe('generated reference documents', () => {
  it('are committed exactly as the code renders them', () => {
    expect(staleReferenceDocs()).toEqual([]);
  });

  it('each say that they are generated (a whole page on its first line, a generated part at its start)', () => {
    for (const doc of REFERENCE_DOCS) {
      const text = doc.render();
      if (doc.path === MIGRATIONS_DOC) expect(text, doc.path).toContain(`${MIGRATIONS_BEGIN}\n`);
      else expect(text.split('\n')[0], doc.path).toBe(GENERATED_NOTICE);
    }
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
    expect(Object.keys(WORKER_METRICS)).toHaveLength(22);
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

describe('the migrations table (docs/reference/migrations.md)', () => {
  const committed = () => readFileSync(join(PROJECT_ROOT, MIGRATIONS_DOC), 'utf8');
  const real = (): DescribedMigration[] => readMigrations(MIGRATIONS_DIR);

  it('is registered, and has a row for every folder of prisma/migrations, with its leading comment', () => {
    expect(REFERENCE_DOCS.map((d) => d.path)).toContain(MIGRATIONS_DOC);
    const text = committed();
    const folders = real().map((m) => m.name);
    expect(folders.length).toBeGreaterThanOrEqual(13);
    for (const name of folders) expect(text).toContain(`| \`${name}\` | `);
    expect(text).toContain(
      "| `20261209000000_front_door_edges` | The front door's edges (issue 31): what a review of the intake, the feed and the give-ups found. |",
    );
  });

  it('is caught when a migration is added, or its leading comment changes, and the page is not regenerated', () => {
    expect(staleReferenceDocs([migrationsReferenceDoc(real)])).toEqual([]);
    const added = () => [...real(), { name: '20991231000000_extra', sql: '-- One more column.\nSELECT 1;\n' }];
    expect(migrationsReferenceDoc(added).render()).toContain('| `20991231000000_extra` | One more column. |');
    expect(staleReferenceDocs([migrationsReferenceDoc(added)])).toEqual([MIGRATIONS_DOC]);
    const reworded = () => real().map((m, i) => (i === 0 ? { ...m, sql: `-- Something else.\n${m.sql}` } : m));
    expect(staleReferenceDocs([migrationsReferenceDoc(reworded)])).toEqual([MIGRATIONS_DOC]);
  });

  it('takes the first paragraph of the leading comment, a hyphenated word joined, pointers left out', () => {
    const sql =
      '-- Adds a plain-\n-- insert path. See README, "Gone".\n-- Then says why.\n--\n-- Not this.\nSELECT 1;\n';
    expect(leadingParagraph('x', sql)).toBe('Adds a plain-insert path. Then says why.');
  });

  it('refuses a migration that opens with no comment, and a page without the markers', () => {
    const bare = () => [...real(), { name: '20991231000000_bare', sql: 'SELECT 1;\n' }];
    expect(() => migrationsReferenceDoc(bare).render()).toThrow(/20991231000000_bare.*no comment/);
    expect(() => withMigrationsTable('# Database\n', 'table')).toThrow(/markers/);
    expect(withMigrationsTable(`a\n${MIGRATIONS_BEGIN}\nold\n${MIGRATIONS_END}\nb\n`, 'new')).toBe('a\nnew\nb\n');
  });
});
