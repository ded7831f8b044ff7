// docker-compose.yml: the services and the roles they log in as, the opt-in monitoring and tracing
// profiles and what they mount, then the Compose client's own validation (`docker compose config`
// or Debian's `docker-compose config`) where one exists.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  profiles?: string[];
  ports?: string[];
  healthcheck?: unknown;
  deploy?: { replicas?: number | string };
  stop_grace_period?: string;
  volumes?: string[];
}

/** The profile of each optional service; every other service runs without one. */
const OPTIONAL_SERVICES: Readonly<Record<string, string>> = {
  seed: 'producer',
  producer: 'producer',
  prometheus: 'monitoring',
  grafana: 'monitoring',
  jaeger: 'tracing',
};

const COMPOSE_FILE = join(PROJECT_ROOT, 'docker-compose.yml');
const compose = parse(readFileSync(COMPOSE_FILE, 'utf8'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;

function service(name: string): Service {
  const s = services[name];
  if (s === undefined) throw new Error(`no service ${name}`);
  return s;
}

/** The login name of a postgresql:// URL with ${...} interpolations left in place. */
function loginOf(url: string | undefined): string {
  const m = /^postgresql:\/\/([^:@/]+)/.exec(url ?? '');
  if (m === null) throw new Error(`not a postgresql URL: ${url}`);
  return m[1] as string;
}

function composeClient(): { cmd: string; args: string[] } | null {
  for (const candidate of [
    { cmd: 'docker', args: ['compose'] },
    { cmd: 'docker-compose', args: [] },
  ]) {
    try {
      execFileSync(candidate.cmd, [...candidate.args, 'version'], { stdio: 'ignore', timeout: 20_000 });
      return candidate;
    } catch {
      // not this one
    }
  }
  return null;
}

describe('docker-compose.yml', () => {
  it('has redis, postgres, a one-shot migrate, replicated workers and an optional producer profile', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['redis', 'postgres', 'migrate', 'worker', 'producer']),
    );
    expect(service('redis').healthcheck).toBeDefined();
    expect(service('postgres').healthcheck).toBeDefined();
    expect(service('migrate').depends_on?.postgres?.condition).toBe('service_healthy');
    expect(service('worker').depends_on?.migrate?.condition).toBe('service_completed_successfully');
    expect(String(service('worker').deploy?.replicas)).toMatch(/^(\$\{WORKER_REPLICAS:-[2-9]\}|[2-9])$/);
    expect(service('producer').profiles).toEqual(['producer']);
    for (const [name, s] of Object.entries(services)) {
      const profile = OPTIONAL_SERVICES[name];
      expect(s.profiles, `${name}'s profiles`).toEqual(profile === undefined ? undefined : [profile]);
    }
  });

  it('monitoring: Prometheus scrapes the worker and relay services on their metrics ports and loads the alert rules', () => {
    const prometheus = service('prometheus');
    const mount = (prometheus.volumes ?? []).find((v) => v.endsWith(':/etc/prometheus:ro'));
    expect(mount).toBe('./deploy/prometheus:/etc/prometheus:ro');
    const dir = join(PROJECT_ROOT, 'deploy', 'prometheus');
    const config = parse(readFileSync(join(dir, 'prometheus.yml'), 'utf8')) as {
      rule_files: string[];
      scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
    };
    expect(prometheus.command).toContain('--config.file=/etc/prometheus/prometheus.yml');
    for (const file of config.rule_files) expect(existsSync(join(dir, file)), file).toBe(true);
    const scraped = Object.fromEntries(
      config.scrape_configs.flatMap((c) => c.dns_sd_configs.flatMap((d) => d.names.map((n) => [n, d.port]))),
    );
    expect(scraped).toEqual({
      worker: Number(service('worker').environment?.METRICS_PORT),
      relay: Number(service('relay').environment?.RELAY_METRICS_PORT),
    });
  });

  it('monitoring: Grafana is provisioned with that Prometheus and the dashboard, whose panels name its uid', () => {
    const grafana = service('grafana');
    for (const volume of grafana.volumes ?? []) {
      const host = volume.split(':')[0] as string;
      expect(existsSync(join(PROJECT_ROOT, host)), volume).toBe(true);
    }
    expect(grafana.volumes).toEqual([
      './deploy/grafana/provisioning:/etc/grafana/provisioning:ro',
      './deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro',
    ]);
    const sources = parse(
      readFileSync(join(PROJECT_ROOT, 'deploy/grafana/provisioning/datasources/prometheus.yml'), 'utf8'),
    ) as { datasources: { uid: string; url: string }[] };
    const prometheusPort = /:(\d+):9090$/.exec(service('prometheus').ports?.[0] ?? '')?.[1];
    expect(prometheusPort).toBe('9090');
    expect(sources.datasources.map((d) => d.url)).toEqual(['http://prometheus:9090']);
    const dashboard = JSON.parse(
      readFileSync(join(PROJECT_ROOT, 'deploy/grafana/dashboards/fenced-transfers.json'), 'utf8'),
    ) as { panels: { datasource: { uid: string } }[] };
    const uids = new Set(dashboard.panels.map((p) => p.datasource.uid));
    expect([...uids]).toEqual([sources.datasources[0]?.uid]);
    const provider = parse(
      readFileSync(join(PROJECT_ROOT, 'deploy/grafana/provisioning/dashboards/fenced-transfers.yml'), 'utf8'),
    ) as { providers: { options: { path: string } }[] };
    expect(provider.providers[0]?.options.path).toBe('/var/lib/grafana/dashboards');
  });

  it('tracing: Jaeger takes OTLP/HTTP on 4318; workers and relays get the endpoint (empty: off) and their names', () => {
    expect(service('jaeger').ports).toEqual(['127.0.0.1:16686:16686', '127.0.0.1:4318:4318']);
    for (const name of ['worker', 'relay']) {
      const env = service(name).environment;
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Compose's interpolation, not a JavaScript template
      expect(env?.OTEL_EXPORTER_OTLP_ENDPOINT, name).toBe('${OTEL_EXPORTER_OTLP_ENDPOINT:-}');
      expect(env?.OTEL_SERVICE_NAME, name).toBe(name);
    }
  });

  it('every published port, of every profile, is on loopback', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const port of s.ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/);
    }
  });

  it('migrate runs as the owner and creates the worker role; the worker logs in as that role, never as the owner', () => {
    const migrate = service('migrate');
    const worker = service('worker');
    const command = migrate.command?.join(' ') ?? '';
    const role = /worker-role\.js --role (\w+)/.exec(command)?.[1];
    expect(command).toMatch(/node dist\/cli\/migrate\.js && node dist\/cli\/worker-role\.js --role \w+/);
    expect(migrate.environment?.WORKER_DB_PASSWORD).toBeDefined();
    expect(loginOf(migrate.environment?.DATABASE_URL)).toBe('postgres');
    expect(loginOf(worker.environment?.DATABASE_URL)).toBe(role);
    expect(worker.environment?.DATABASE_URL).toContain('${WORKER_DB_PASSWORD');
    expect(worker.command).toEqual(['node', ...WORKER_NODE_FLAGS, 'dist/cli/worker.js']);
  });

  it('the worker stops more slowly than its own shutdown timeout, and servers are published on loopback only', () => {
    const worker = service('worker');
    const shutdownMs = Number(worker.environment?.SHUTDOWN_TIMEOUT_MS);
    expect(shutdownMs).toBeGreaterThan(0);
    expect(Number(/^(\d+)s$/.exec(worker.stop_grace_period ?? '')?.[1]) * 1000).toBeGreaterThan(shutdownMs);
    for (const name of ['redis', 'postgres']) {
      for (const port of service(name).ports ?? []) expect(port, name).toMatch(/^127\.0\.0\.1:/);
    }
  });

  it('migrate creates the relay role as the owner; the relay logs in as that role, never as the owner', () => {
    const migrate = service('migrate');
    const command = migrate.command?.join(' ') ?? '';
    const role = /relay-role\.js --role (\w+)/.exec(command)?.[1];
    expect(role).toBeDefined();
    expect(command).toMatch(/node dist\/cli\/migrate\.js && .*node dist\/cli\/relay-role\.js --role \w+/);
    expect(migrate.environment?.RELAY_DB_PASSWORD).toBeDefined();
    const relay = service('relay');
    expect(loginOf(relay.environment?.DATABASE_URL)).toBe(role);
    expect(relay.environment?.DATABASE_URL).toContain('${RELAY_DB_PASSWORD');
  });

  it('the relay runs the compiled relay after migrate, and stops more slowly than its own shutdown timeout', () => {
    const relay = service('relay');
    expect(relay.command).toEqual(['node', 'dist/cli/relay-cli.js']);
    expect(relay.depends_on?.migrate?.condition).toBe('service_completed_successfully');
    expect(relay.environment?.QUEUE_NAME).toBe(service('worker').environment?.QUEUE_NAME);
    const shutdownMs = Number(relay.environment?.SHUTDOWN_TIMEOUT_MS);
    expect(Number(/^(\d+)s$/.exec(relay.stop_grace_period ?? '')?.[1]) * 1000).toBeGreaterThan(shutdownMs);
  });

  const client = composeClient();
  it.skipIf(client === null)("passes the Compose client's own validation (config -q), every profile included", () => {
    if (client === null) return;
    for (const profile of [[], ...['producer', 'monitoring', 'tracing'].map((p) => ['--profile', p])]) {
      execFileSync(client.cmd, [...client.args, '-f', COMPOSE_FILE, ...profile, 'config', '-q'], {
        cwd: PROJECT_ROOT,
        timeout: 60_000,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    }
    const profiles = ['producer', 'monitoring', 'tracing'].flatMap((p) => ['--profile', p]);
    const listed = execFileSync(client.cmd, [...client.args, '-f', COMPOSE_FILE, ...profiles, 'config', '--services'], {
      cwd: PROJECT_ROOT,
      timeout: 60_000,
      encoding: 'utf8',
    })
      .split('\n')
      .filter((l) => l !== '')
      .sort();
    expect(listed).toEqual(Object.keys(services).sort());
  });

  it.skipIf(client === null)(
    'OTEL_EXPORTER_OTLP_ENDPOINT from the environment reaches the workers and relays; unset, it is empty',
    () => {
      if (client === null) return;
      const resolved = (endpoint: string | undefined) => {
        const env: NodeJS.ProcessEnv = { ...process.env };
        delete env.OTEL_EXPORTER_OTLP_ENDPOINT;
        if (endpoint !== undefined) env.OTEL_EXPORTER_OTLP_ENDPOINT = endpoint;
        const out = execFileSync(client.cmd, [...client.args, '-f', COMPOSE_FILE, '--profile', 'tracing', 'config'], {
          cwd: PROJECT_ROOT,
          env,
          timeout: 60_000,
          encoding: 'utf8',
        });
        const config = parse(out) as { services: Record<string, Service> };
        return ['worker', 'relay'].map((name) => config.services[name]?.environment?.OTEL_EXPORTER_OTLP_ENDPOINT);
      };
      expect(resolved('http://jaeger:4318')).toEqual(['http://jaeger:4318', 'http://jaeger:4318']);
      expect(resolved(undefined)).toEqual(['', '']);
    },
  );
});
