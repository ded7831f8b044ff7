// The alert rules and the dashboard of deploy/: promtool checks the rules and the Prometheus
// configuration and runs the rules' unit tests (deploy/prometheus/alerts.test.yml); every alert has
// a case there where it fires and one where it stays quiet; every metric a rule or a panel reads is
// in the generated metrics references; every runbook_url is a heading of the runbook; every panel
// has a query; the PrometheusRule for Kubernetes holds the same groups. promtool comes from
// Debian's prometheus package, which .ci/prerequisites installs before `npm test`: without it
// these tests fail, they do not skip. Each check is also shown failing on a broken scratch copy.
import { type ExecFileSyncOptions, execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import {
  alertCoverage,
  alertRules,
  type Dashboard,
  dashboardQueries,
  panelsWithoutQuery,
  promqlMetricNames,
  type RuleGroups,
  type RuleTests,
  readMetricsReference,
  runbookProblems,
  unknownMetrics,
} from '../support/prometheus-rules.ts';

const PROMETHEUS_DIR = join(PROJECT_ROOT, 'deploy', 'prometheus');
const RULES_FILE = join(PROMETHEUS_DIR, 'alerts.yml');
const RULE_TESTS_FILE = join(PROMETHEUS_DIR, 'alerts.test.yml');
const DASHBOARD_FILE = join(PROJECT_ROOT, 'deploy', 'grafana', 'dashboards', 'fenced-transfers.json');
const PROMETHEUS_RULE_FILE = join(PROJECT_ROOT, 'deploy', 'k8s', 'monitoring', 'prometheusrule.yaml');
const RUNBOOK = 'docs/operating/runbook.md';
const REFERENCES = ['docs/reference/metrics.md', 'docs/reference/relay-metrics.md'];
const PROMTOOL = process.env.PROMTOOL ?? 'promtool';
const PROMTOOL_TIMEOUT_MS = 60_000;

const rules = parse(readFileSync(RULES_FILE, 'utf8')) as RuleGroups;
const ruleTests = parse(readFileSync(RULE_TESTS_FILE, 'utf8')) as RuleTests;
const reference = readMetricsReference(PROJECT_ROOT, REFERENCES);

interface PromtoolRun {
  code: number;
  output: string;
}

/** Runs promtool; a missing promtool throws (ENOENT) and fails the test. */
function promtool(args: string[], options: ExecFileSyncOptions = {}): PromtoolRun {
  try {
    const output = execFileSync(PROMTOOL, args, {
      cwd: PROJECT_ROOT,
      timeout: PROMTOOL_TIMEOUT_MS,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      ...options,
    });
    return { code: 0, output: String(output) };
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { status?: number | null; stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') {
      throw new Error(`${PROMTOOL} is missing: run bash .ci/prerequisites (apt-get install -y prometheus)`);
    }
    return { code: e.status ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

describe('deploy/prometheus: promtool', () => {
  it('promtool check rules accepts alerts.yml', () => {
    const run = promtool(['check', 'rules', RULES_FILE]);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain(`SUCCESS: ${alertRules(rules).length} rules found`);
  });

  it('promtool check config accepts prometheus.yml, the rule files it names included', () => {
    const run = promtool(['check', 'config', join(PROMETHEUS_DIR, 'prometheus.yml')]);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('1 rule files found');
  });

  it('promtool test rules passes alerts.test.yml', () => {
    const run = promtool(['test', 'rules', RULE_TESTS_FILE]);
    expect(run.code, run.output).toBe(0);
    expect(run.output).toContain('SUCCESS');
  });

  it('every alert fires in one case of alerts.test.yml and stays quiet in another', () => {
    expect(alertRules(rules).length).toBeGreaterThanOrEqual(7);
    expect(alertCoverage(rules, ruleTests)).toEqual({ neverFired: [], neverQuiet: [] });
  });
});

describe('deploy/prometheus: what the rules name', () => {
  it('every metric a rule reads is in the generated metrics references', () => {
    const names = alertRules(rules).flatMap((r) => promqlMetricNames(r.expr));
    expect(names.length).toBeGreaterThanOrEqual(alertRules(rules).length);
    expect(unknownMetrics(names, reference)).toEqual([]);
  });

  it('every alert has a severity and a runbook_url that is a heading of the runbook', () => {
    for (const rule of alertRules(rules)) expect(['warning', 'critical'], rule.alert).toContain(rule.labels?.severity);
    expect(runbookProblems(rules, PROJECT_ROOT, RUNBOOK)).toEqual([]);
  });

  it('the PrometheusRule for the Operator holds the same groups as alerts.yml', () => {
    const manifest = parse(readFileSync(PROMETHEUS_RULE_FILE, 'utf8')) as { kind: string; spec: RuleGroups };
    expect(manifest.kind).toBe('PrometheusRule');
    expect(manifest.spec.groups).toEqual(rules.groups);
  });
});

describe('deploy/grafana: the dashboard', () => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;

  it('every panel has a query, and every metric they read is in the generated metrics references', () => {
    expect(dashboard.panels?.length).toBeGreaterThanOrEqual(10);
    expect(panelsWithoutQuery(dashboard)).toEqual([]);
    const names = dashboardQueries(dashboard).flatMap((q) => promqlMetricNames(q));
    expect(unknownMetrics(names, reference)).toEqual([]);
  });

  it('every panel query is PromQL Prometheus parses (promtool check rules, as recording rules)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ft-dashboard-queries-'));
    try {
      // Grafana's interval variables become a fixed range; everything else is the query as written.
      const rules = dashboardQueries(dashboard).map((q, i) => ({
        record: `dashboard:query_${i}`,
        expr: q.replace(/\$__(?:rate_)?interval/g, '5m'),
      }));
      const file = join(dir, 'queries.yml');
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
      const run = promtool(['check', 'rules', file]);
      expect(run.code, run.output).toBe(0);
      expect(run.output).toContain(`SUCCESS: ${rules.length} rules found`);
      writeFileSync(
        file,
        JSON.stringify({ groups: [{ name: 'dashboard', rules: [{ record: 'x:y', expr: 'sum(rate(a[5m])' }] }] }),
      );
      expect(promtool(['check', 'rules', file]).code).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("has a panel for the metric of each alert's expression", () => {
    const shown = new Set(dashboardQueries(dashboard).flatMap((q) => promqlMetricNames(q)));
    for (const rule of alertRules(rules)) {
      for (const name of promqlMetricNames(rule.expr)) expect(shown.has(name), `${rule.alert}: ${name}`).toBe(true);
    }
  });
});

describe('the checks report what is broken', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ft-alerts-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  /** A copy of deploy/prometheus with alerts.yml edited; the edit must change the file. */
  function scratchRules(name: string, edit: (text: string) => string): string {
    const dir = join(scratch, name);
    cpSync(PROMETHEUS_DIR, dir, { recursive: true });
    const original = readFileSync(RULES_FILE, 'utf8');
    const edited = edit(original);
    expect(edited, 'the edit changes alerts.yml').not.toBe(original);
    writeFileSync(join(dir, 'alerts.yml'), edited);
    return dir;
  }

  it('reads metric names out of PromQL, not functions, keywords, labels, durations or variables', () => {
    expect(
      promqlMetricNames(
        'histogram_quantile(0.99, sum by (le, result) (rate(a_seconds_bucket{result="busy", b="c"}[$__rate_interval])))',
      ),
    ).toEqual(['a_seconds_bucket']);
    expect(promqlMetricNames('sum(x) < 1 or absent(y) and on (queue) z offset 5m')).toEqual(['x', 'y', 'z']);
    expect(promqlMetricNames('max by (queue) (q{state="waiting"}) / scalar(sum(r)) > 5e2')).toEqual(['q', 'r']);
    expect(promqlMetricNames('min_over_time(w[10m]) > bool 0')).toEqual(['w']);
  });

  it('a rule or a panel naming a metric no reference lists is reported; up, histogram series and process_* are not', () => {
    expect(reference.metrics.get('fenced_transfers_decision_duration_seconds')).toBe('histogram');
    expect(reference.prefixes).toEqual(expect.arrayContaining(['nodejs_', 'process_']));
    expect(
      unknownMetrics(
        [
          'up',
          'fenced_transfers_decision_duration_seconds_bucket',
          'fenced_transfers_worker_ready',
          'process_resident_memory_bytes',
          'fenced_transfers_worker_ready_total',
          'fenced_transfers_outcomes_total_count',
        ],
        reference,
      ),
    ).toEqual(['fenced_transfers_outcomes_total_count', 'fenced_transfers_worker_ready_total']);
    const dir = scratchRules('unknown-metric', (t) =>
      t.replace('fenced_transfers_worker_ready == 0', 'fenced_transfers_workers_ready == 0'),
    );
    const broken = parse(readFileSync(join(dir, 'alerts.yml'), 'utf8')) as RuleGroups;
    expect(
      unknownMetrics(
        alertRules(broken).flatMap((r) => promqlMetricNames(r.expr)),
        reference,
      ),
    ).toEqual(['fenced_transfers_workers_ready']);
  });

  it('an alert without a firing case, or without a quiet one, is reported', () => {
    const withoutFiring: RuleTests = {
      tests: ruleTests.tests.map((t) => ({
        ...t,
        alert_rule_test: (t.alert_rule_test ?? []).filter(
          (c) => !(c.alertname === 'FencedTransfersLockLosses' && (c.exp_alerts ?? []).length > 0),
        ),
      })),
    };
    expect(alertCoverage(rules, withoutFiring)).toEqual({ neverFired: ['FencedTransfersLockLosses'], neverQuiet: [] });
    const withoutQuiet: RuleTests = {
      tests: ruleTests.tests.map((t) => ({
        ...t,
        alert_rule_test: (t.alert_rule_test ?? []).filter(
          (c) => !(c.alertname === 'FencedTransfersRelayLag' && (c.exp_alerts ?? []).length === 0),
        ),
      })),
    };
    expect(alertCoverage(rules, withoutQuiet)).toEqual({ neverFired: [], neverQuiet: ['FencedTransfersRelayLag'] });
  });

  it('promtool test rules fails when an alert loses its pending time, or its threshold per worker', () => {
    const noPending = scratchRules('no-pending', (t) =>
      t.replace(
        'expr: fenced_transfers_worker_ready == 0\n        for: 5m\n',
        'expr: fenced_transfers_worker_ready == 0\n',
      ),
    );
    const early = promtool(['test', 'rules', join(noPending, 'alerts.test.yml')]);
    expect(early.code).toBe(1);
    expect(early.output).toContain('alertname: FencedTransfersWorkerNotReady, time: 9m');
    const perQueue = scratchRules('not-per-worker', (t) =>
      t.replace(' / scalar(sum(fenced_transfers_worker_ready)) > 500', ' > 500'),
    );
    const notPerWorker = promtool(['test', 'rules', join(perQueue, 'alerts.test.yml')]);
    expect(notPerWorker.code).toBe(1);
    expect(notPerWorker.output).toContain('alertname: FencedTransfersQueueBacklog');
  });

  it('a runbook_url whose anchor the runbook lacks, or that points elsewhere, is reported', () => {
    const dir = scratchRules('runbook', (t) =>
      t
        .replace('runbook.md#fencedtransferslocklosses', 'runbook.md#lock-loss')
        .replace('docs/operating/runbook.md#fencedtransfersrelaylag', 'https://example.com/relay'),
    );
    const broken = parse(readFileSync(join(dir, 'alerts.yml'), 'utf8')) as RuleGroups;
    expect(runbookProblems(broken, PROJECT_ROOT, RUNBOOK)).toEqual([
      `FencedTransfersLockLosses: ${RUNBOOK} has no #lock-loss`,
      `FencedTransfersRelayLag: https://example.com/relay is not an anchor of ${RUNBOOK}`,
    ]);
  });

  it('a panel without a query is reported, and a dashboard that is not JSON does not parse', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const first = dashboard.panels[0] as { title: string; targets: { expr: string }[] };
    const second = dashboard.panels[1] as { title: string; targets: { expr: string }[] };
    first.targets = [];
    second.targets = second.targets.map((t) => ({ ...t, expr: ' ' }));
    expect(panelsWithoutQuery(dashboard)).toEqual([first.title, second.title]);
    expect(() => JSON.parse(`${readFileSync(DASHBOARD_FILE, 'utf8')},`)).toThrow(SyntaxError);
  });

  it('a PrometheusRule that differs from alerts.yml fails the comparison', () => {
    const manifest = parse(readFileSync(PROMETHEUS_RULE_FILE, 'utf8')) as { spec: RuleGroups };
    const edited = parse(
      readFileSync(PROMETHEUS_RULE_FILE, 'utf8').replace('fenced_transfers_relay_lag_seconds) > 60', 'x) > 60'),
    ) as { spec: RuleGroups };
    expect(manifest.spec.groups).toEqual(rules.groups);
    expect(edited.spec.groups).not.toEqual(rules.groups);
  });
});
