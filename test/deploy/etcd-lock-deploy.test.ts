// deploy/etcd-lock/: LOCK_BACKEND=etcd on Compose (an overlay of docker-compose.yml) and on
// Kubernetes (beside deploy/k8s). Three members that name each other, the lock epoch opened once
// by the owner after the migrations, workers whose etcd settings the configuration accepts and
// that start only after both; then the Compose client's own validation of the merged files.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

const DIR = join(PROJECT_ROOT, 'deploy', 'etcd-lock');
const MEMBERS = 3;

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  ports?: string[];
  healthcheck?: { test?: string[] };
}

const overlay = parse(readFileSync(join(DIR, 'compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
};

function service(name: string): Service {
  const found = overlay.services[name];
  if (found === undefined) throw new Error(`no service ${name}`);
  return found;
}

/** `name=url,…` of --initial-cluster / ETCD_INITIAL_CLUSTER, as a map. */
function initialCluster(text: string): Map<string, string> {
  return new Map(text.split(',').map((pair) => pair.split('=') as [string, string]));
}

describe('deploy/etcd-lock/compose.yml', () => {
  const members = Array.from({ length: MEMBERS }, (_, i) => `etcd-${i + 1}`);

  it('three members, each in the initial cluster under its own name, healthy by etcdctl', () => {
    for (const name of members) {
      const env = service(name).environment ?? {};
      expect(env.ETCD_NAME).toBe(name);
      const cluster = initialCluster(env.ETCD_INITIAL_CLUSTER ?? '');
      expect([...cluster.keys()].sort()).toEqual(members);
      expect(cluster.get(name)).toBe(env.ETCD_INITIAL_ADVERTISE_PEER_URLS);
      expect(service(name).healthcheck?.test).toEqual(['CMD', 'etcdctl', 'endpoint', 'health']);
      for (const port of service(name).ports ?? []) expect(port).toMatch(/^127\.0\.0\.1:/);
    }
  });

  it('opens the etcd epoch once, as the owner, after the migrations', () => {
    const job = service('lock-epoch');
    expect(job.command).toEqual([
      'node',
      'dist/cli/lock-epoch.js',
      '--open',
      'etcd',
      '--note',
      'compose',
      '--unless-current',
    ]);
    expect(job.environment?.DATABASE_URL).toMatch(/^postgresql:\/\/postgres:/);
    expect(job.depends_on?.migrate?.condition).toBe('service_completed_successfully');
  });

  it('the workers run LOCK_BACKEND=etcd on every member, after the members and the epoch', () => {
    const worker = service('worker');
    const env = worker.environment ?? {};
    const config = loadConfig({ LOCK_BACKEND: env.LOCK_BACKEND, ETCD_ENDPOINTS: env.ETCD_ENDPOINTS });
    expect(config.lock).toEqual({
      backend: 'etcd',
      endpoints: members.map((m) => service(m).environment?.ETCD_ADVERTISE_CLIENT_URLS),
      tls: null,
      auth: null,
    });
    for (const m of members) expect(worker.depends_on?.[m]?.condition).toBe('service_healthy');
    expect(worker.depends_on?.['lock-epoch']?.condition).toBe('service_completed_successfully');
  });

  it('merges with docker-compose.yml in the Compose client, where one exists', () => {
    let client: string[] | null = null;
    for (const candidate of [['docker', 'compose'], ['docker-compose']]) {
      try {
        execFileSync(candidate[0] as string, [...candidate.slice(1), 'version'], { stdio: 'ignore', timeout: 20_000 });
        client = candidate;
        break;
      } catch {
        // not this one
      }
    }
    if (client === null) {
      console.warn('etcd-lock-deploy.test.ts: no Compose client; the merged files are not validated');
      return;
    }
    const args = [...client.slice(1), '-f', 'docker-compose.yml', '-f', 'deploy/etcd-lock/compose.yml', 'config'];
    const merged = parse(
      execFileSync(client[0] as string, args, { cwd: PROJECT_ROOT, encoding: 'utf8', timeout: 60_000 }),
    );
    expect(merged.services.worker.environment.LOCK_BACKEND).toBe('etcd');
    expect(merged.services.worker.environment.DATABASE_URL).toMatch(/^postgresql:\/\/transfers_worker:/);
  });
});

interface K8sObject {
  kind: string;
  metadata: { name: string };
  spec: {
    replicas?: number;
    clusterIP?: string;
    serviceName?: string;
    template?: { spec: { containers: { command: string[]; env?: { name: string; valueFrom?: unknown }[] }[] } };
  };
}

describe('deploy/etcd-lock/k8s.yaml', () => {
  const text = readFileSync(join(DIR, 'k8s.yaml'), 'utf8');
  const objects = parseAllDocuments(text).map((d) => d.toJS() as K8sObject);
  const byKind = (kind: string): K8sObject => {
    const found = objects.filter((o) => o.kind === kind);
    expect(found).toHaveLength(1);
    return found[0] as K8sObject;
  };

  it('a headless Service and three members that name each other by their stable names', () => {
    const svc = byKind('Service');
    expect(svc.spec.clusterIP).toBe('None');
    const set = byKind('StatefulSet');
    expect(set.spec.replicas).toBe(MEMBERS);
    expect(set.spec.serviceName).toBe(svc.metadata.name);
    const command = set.spec.template?.spec.containers[0]?.command ?? [];
    const flag = command.find((c) => c.startsWith('--initial-cluster='))?.slice('--initial-cluster='.length) ?? '';
    const names = Array.from({ length: MEMBERS }, (_, i) => `${set.metadata.name}-${i}`);
    expect([...initialCluster(flag).keys()]).toEqual(names);
    for (const name of names) expect(initialCluster(flag).get(name)).toBe(`http://${name}.${svc.metadata.name}:2380`);
  });

  it("the Job opens the epoch as the owner; the header's worker settings name every member and pass the configuration", () => {
    const job = byKind('Job').spec.template?.spec.containers[0];
    expect(job?.command).toEqual([
      'node',
      'dist/cli/lock-epoch.js',
      '--open',
      'etcd',
      '--note',
      'kubernetes',
      '--unless-current',
    ]);
    expect(job?.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom).toEqual({
      secretKeyRef: { name: 'fenced-transfers-owner', key: 'DATABASE_URL' },
    });
    const endpoints = /ETCD_ENDPOINTS=(\S+)/.exec(text)?.[1] ?? '';
    const config = loadConfig({ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: endpoints });
    expect(config.lock).toMatchObject({
      endpoints: Array.from(
        { length: MEMBERS },
        (_, i) => `http://fenced-transfers-etcd-${i}.fenced-transfers-etcd:2379`,
      ),
    });
  });
});
