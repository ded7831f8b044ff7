// Checks of the monitoring files in deploy/ (test/deploy/alerts.test.ts): the metric names a
// PromQL expression reads, whether each exists in the generated metrics references, whether each
// alert has a firing and a quiet case in the promtool unit tests, whether each runbook_url points
// at a heading of the runbook, and whether every dashboard panel has a query. Pure functions over
// parsed files, so the test can show each one reporting a broken scratch copy.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { headingAnchors } from './doc-check.ts';

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface RuleGroups {
  readonly groups: readonly { readonly name: string; readonly rules: readonly AlertRule[] }[];
}

/** promtool's unit test file: only what the coverage check reads. */
export interface RuleTests {
  readonly tests: readonly {
    readonly alert_rule_test?: readonly { readonly alertname: string; readonly exp_alerts?: readonly unknown[] }[];
  }[];
}

export interface Dashboard {
  readonly panels?: readonly { readonly title?: string; readonly type?: string; readonly targets?: unknown }[];
}

/** PromQL's keywords and aggregation modifiers: identifiers that are not metric names. */
const PROMQL_WORDS = new Set([
  'and',
  'or',
  'unless',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
  'inf',
  'nan',
]);

/** Series Prometheus makes itself, not the processes it scrapes. */
export const PROMETHEUS_OWN_SERIES = new Set(['up', 'ALERTS', 'ALERTS_FOR_STATE']);

/**
 * The metric names a PromQL expression reads: identifiers that are not a function (followed by
 * `(`), a keyword, a label name (inside `{…}` or a `by (…)` list), a string, a duration or a
 * Grafana variable (`$__rate_interval`).
 */
export function promqlMetricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/(?<![\w.])([A-Za-z_:][\w:]*)(?!\w)(\s*\()?/g)) {
    const name = m[1] as string;
    if (m[2] !== undefined) continue; // a function call
    if (PROMQL_WORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names].sort();
}

export interface MetricsReference {
  /** Every metric of the references' tables, with its type. */
  readonly metrics: ReadonlyMap<string, string>;
  /** Families a reference names by a prefix only (`process_*`, `nodejs_*`: prom-client's defaults). */
  readonly prefixes: readonly string[];
}

/** Reads the generated references' tables (`| \`name\` | type | …`) and their `prefix_*` families. */
export function readMetricsReference(root: string, files: readonly string[]): MetricsReference {
  const metrics = new Map<string, string>();
  const prefixes = new Set<string>();
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const m of text.matchAll(/^\| `([a-z_:][a-z0-9_:]*)` \| (counter|gauge|histogram|summary) \|/gm)) {
      metrics.set(m[1] as string, m[2] as string);
    }
    for (const m of text.matchAll(/`([a-z][a-z0-9]*_)\*`/g)) prefixes.add(m[1] as string);
  }
  return { metrics, prefixes: [...prefixes].sort() };
}

/** The names no reference lists: a histogram's `_bucket`, `_sum` and `_count` count as the histogram. */
export function unknownMetrics(names: Iterable<string>, reference: MetricsReference): string[] {
  const unknown = new Set<string>();
  for (const name of names) {
    if (PROMETHEUS_OWN_SERIES.has(name) || reference.metrics.has(name)) continue;
    const base = /^(.*)_(?:bucket|sum|count)$/.exec(name)?.[1];
    if (base !== undefined && reference.metrics.get(base) === 'histogram') continue;
    if (reference.prefixes.some((p) => name.startsWith(p))) continue;
    unknown.add(name);
  }
  return [...unknown].sort();
}

export function alertRules(rules: RuleGroups): AlertRule[] {
  return rules.groups.flatMap((g) => g.rules).filter((r) => typeof r.alert === 'string');
}

/** Alerts of `rules` without a case in `tests` where they fire, and without one where they stay quiet. */
export function alertCoverage(rules: RuleGroups, tests: RuleTests): { neverFired: string[]; neverQuiet: string[] } {
  const fired = new Set<string>();
  const quiet = new Set<string>();
  for (const t of tests.tests) {
    for (const c of t.alert_rule_test ?? []) {
      if ((c.exp_alerts ?? []).length > 0) fired.add(c.alertname);
      else quiet.add(c.alertname);
    }
  }
  const names = alertRules(rules).map((r) => r.alert);
  return { neverFired: names.filter((n) => !fired.has(n)), neverQuiet: names.filter((n) => !quiet.has(n)) };
}

/** Alerts whose runbook_url is missing, points elsewhere than `runbook`, or at an anchor it lacks. */
export function runbookProblems(rules: RuleGroups, root: string, runbook: string): string[] {
  const anchors = existsSync(join(root, runbook)) ? headingAnchors(readFileSync(join(root, runbook), 'utf8')) : null;
  const problems: string[] = [];
  for (const rule of alertRules(rules)) {
    const url = rule.annotations?.runbook_url;
    const [path, anchor] = (url ?? '').split('#');
    if (url === undefined) problems.push(`${rule.alert}: no runbook_url`);
    else if (path !== runbook || anchor === undefined || anchor === '') {
      problems.push(`${rule.alert}: ${url} is not an anchor of ${runbook}`);
    } else if (anchors === null || !anchors.has(anchor)) problems.push(`${rule.alert}: ${runbook} has no #${anchor}`);
  }
  return problems;
}

/** Every query of a dashboard's panels. */
export function dashboardQueries(dashboard: Dashboard): string[] {
  return (dashboard.panels ?? []).flatMap((p) => panelQueries(p));
}

/** Panels without a query (a panel of type `row` would be one: the dashboard has none). */
export function panelsWithoutQuery(dashboard: Dashboard): string[] {
  return (dashboard.panels ?? []).filter((p) => panelQueries(p).length === 0).map((p) => p.title ?? '(untitled)');
}

function panelQueries(panel: { readonly targets?: unknown }): string[] {
  if (!Array.isArray(panel.targets)) return [];
  return panel.targets
    .map((t) => (t as { expr?: unknown }).expr)
    .filter((e): e is string => typeof e === 'string' && e.trim() !== '');
}
