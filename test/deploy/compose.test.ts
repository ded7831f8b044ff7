// docker-compose.yml: the services and the roles they log in as, then the Compose client's
// own validation (`docker compose config` or Debian's `docker-compose config`) where one exists.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
}

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
      if (s.profiles === undefined) continue;
      expect(['seed', 'producer'], `${name} is optional`).toContain(name);
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
  it.skipIf(client === null)(
    "passes the Compose client's own validation (config -q), the producer profile included",
    () => {
      if (client === null) return;
      for (const profile of [[], ['--profile', 'producer']]) {
        execFileSync(client.cmd, [...client.args, '-f', COMPOSE_FILE, ...profile, 'config', '-q'], {
          cwd: PROJECT_ROOT,
          timeout: 60_000,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      }
      const listed = execFileSync(
        client.cmd,
        [...client.args, '-f', COMPOSE_FILE, '--profile', 'producer', 'config', '--services'],
        { cwd: PROJECT_ROOT, timeout: 60_000, encoding: 'utf8' },
      )
        .split('\n')
        .filter((l) => l !== '')
        .sort();
      expect(listed).toEqual(Object.keys(services).sort());
    },
  );
});
