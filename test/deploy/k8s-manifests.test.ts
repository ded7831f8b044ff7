// Every file in deploy/k8s/ parses, and the fields that keep a rollout safe are there: probes
// on the health endpoints, a grace period above the shutdown timeout, requests and limits, a
// non-root security context, URLs from secrets (the owner's only in the migration Job), the
// PodDisruptionBudget, and a KEDA trigger on the transfers queue's wait list, whose key name
// is checked against the installed BullMQ on the real Redis.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { uniqueName } from '../support/test-db.ts';

const K8S_DIR = join(PROJECT_ROOT, 'deploy', 'k8s');
/** The default of SHUTDOWN_TIMEOUT_MS, used when a container does not set it. */
const SHUTDOWN_TIMEOUT_MS_DEFAULT = 20_000;
const METRICS_PORT_DEFAULT = 9464;

// The manifests' shapes, as far as these checks read them.
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
interface Probe {
  httpGet?: { path: string; port: number | string };
}
interface Container {
  name: string;
  command?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    capabilities?: { drop?: string[] };
  };
}
interface PodSpec {
  containers: Container[];
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number };
  automountServiceAccountToken?: boolean;
  restartPolicy?: string;
}
interface Manifest {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name);
    if (d.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(d.name) ? [path] : [];
  });
}

function loadManifests(): Manifest[] {
  const out: Manifest[] = [];
  for (const path of yamlFiles(K8S_DIR)) {
    for (const doc of parseAllDocuments(readFileSync(path, 'utf8'))) {
      if (doc.errors.length > 0)
        throw new Error(`${relative(PROJECT_ROOT, path)}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const value = doc.toJS() as Manifest | null;
      if (value === null) continue;
      out.push({ ...value, file: relative(K8S_DIR, path) });
    }
  }
  return out;
}

const manifests = loadManifests();

function one(kind: string, file?: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind && (file === undefined || m.file === file));
  expect(found, `exactly one ${kind}${file ? ` in ${file}` : ''}`).toHaveLength(1);
  return found[0] as Manifest;
}

function podSpec(m: Manifest): PodSpec {
  const template = (m.spec as { template?: { spec?: PodSpec } }).template;
  if (template?.spec === undefined) throw new Error(`${m.file}: ${m.kind} ${m.metadata.name} has no pod template`);
  return template.spec;
}

function envValue(c: Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value;
}

function secretRef(c: Container, name: string): { name: string; key: string } | undefined {
  return c.env?.find((e) => e.name === name)?.valueFrom?.secretKeyRef;
}

/** A probe's port as a number: named ports resolve through the container's ports. */
function probePort(c: Container, probe: Probe | undefined): number | undefined {
  const port = probe?.httpGet?.port;
  if (typeof port === 'number') return port;
  return c.ports?.find((p) => p.name === port)?.containerPort;
}

function deployment(name: string): Manifest {
  const found = manifests.filter((m) => m.kind === 'Deployment' && m.metadata.name === name);
  expect(found, `exactly one Deployment ${name}`).toHaveLength(1);
  return found[0] as Manifest;
}

const worker = deployment('fenced-transfers-worker');
const workerPod = podSpec(worker);
const workerContainer = workerPod.containers.find((c) => c.name === 'worker') as Container;

describe('deploy/k8s parses', () => {
  it('every file is YAML of Kubernetes objects with apiVersion, kind and a name', () => {
    expect(yamlFiles(K8S_DIR).length).toBeGreaterThanOrEqual(8);
    for (const m of manifests) {
      expect(m.apiVersion, m.file).toMatch(/^[a-z0-9.\-/]+$/);
      expect(m.kind, m.file).toMatch(/^[A-Z][A-Za-z]+$/);
      if (m.kind !== 'Kustomization') expect(m.metadata?.name, m.file).toMatch(/^[a-z0-9-]+$/);
    }
  });

  it('kustomization.yaml lists every base file, and neither the HPA alternative nor the ServiceMonitor', () => {
    const k = one('Kustomization') as unknown as { resources: string[] };
    const base = yamlFiles(K8S_DIR)
      .map((p) => relative(K8S_DIR, p))
      .filter((f) => !f.includes('/') && f !== 'kustomization.yaml')
      .sort();
    expect([...k.resources].sort()).toEqual(base);
  });
});

describe('worker Deployment', () => {
  it('liveness on /healthz and readiness on /readyz, at METRICS_PORT', () => {
    const metricsPort = Number(envValue(workerContainer, 'METRICS_PORT') ?? METRICS_PORT_DEFAULT);
    expect(workerContainer.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(workerContainer.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect(probePort(workerContainer, workerContainer.livenessProbe)).toBe(metricsPort);
    expect(probePort(workerContainer, workerContainer.readinessProbe)).toBe(metricsPort);
  });

  it('terminationGracePeriodSeconds is above SHUTDOWN_TIMEOUT_MS, which the manifest sets explicitly', () => {
    const shutdownMs = Number(envValue(workerContainer, 'SHUTDOWN_TIMEOUT_MS') ?? Number.NaN);
    expect(shutdownMs).toBe(SHUTDOWN_TIMEOUT_MS_DEFAULT);
    expect((workerPod.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(shutdownMs);
  });

  it('requests and limits for CPU and memory on every container, limits not below requests', () => {
    for (const m of manifests.filter((x) => x.kind === 'Deployment' || x.kind === 'Job')) {
      for (const c of podSpec(m).containers) {
        for (const r of ['cpu', 'memory']) {
          expect(c.resources?.requests?.[r], `${m.file} ${c.name} requests.${r}`).toBeDefined();
          expect(c.resources?.limits?.[r], `${m.file} ${c.name} limits.${r}`).toBeDefined();
        }
        expect(quantity(c.resources?.limits?.memory)).toBeGreaterThanOrEqual(quantity(c.resources?.requests?.memory));
        expect(quantity(c.resources?.limits?.cpu)).toBeGreaterThanOrEqual(quantity(c.resources?.requests?.cpu));
      }
    }
  });

  it('runs as non-root without privilege escalation, capabilities or a service account token (worker and Job)', () => {
    for (const m of manifests.filter((x) => x.kind === 'Deployment' || x.kind === 'Job')) {
      const pod = podSpec(m);
      expect(pod.securityContext?.runAsNonRoot, m.file).toBe(true);
      expect(pod.securityContext?.runAsUser ?? 0, m.file).toBeGreaterThan(0);
      expect(pod.automountServiceAccountToken, m.file).toBe(false);
      for (const c of pod.containers) {
        expect(c.securityContext?.allowPrivilegeEscalation, `${m.file} ${c.name}`).toBe(false);
        expect(c.securityContext?.readOnlyRootFilesystem, `${m.file} ${c.name}`).toBe(true);
        expect(c.securityContext?.capabilities?.drop, `${m.file} ${c.name}`).toContain('ALL');
      }
    }
  });

  it("runs the compiled worker; both URLs come from secrets, the worker's DATABASE_URL not from the owner's secret", () => {
    expect(workerContainer.command).toEqual(['node', ...WORKER_NODE_FLAGS, 'dist/cli/worker.js']);
    const job = podSpec(one('Job')).containers[0] as Container;
    const workerDb = secretRef(workerContainer, 'DATABASE_URL');
    const ownerDb = secretRef(job, 'DATABASE_URL');
    expect(workerDb).toBeDefined();
    expect(ownerDb).toBeDefined();
    expect(workerDb?.name).not.toBe(ownerDb?.name);
    expect(secretRef(workerContainer, 'REDIS_URL')).toBeDefined();
    for (const c of [workerContainer, job]) {
      for (const e of c.env ?? []) {
        if (/URL|PASSWORD/.test(e.name)) expect(e.value, `${c.name} ${e.name} must come from a secret`).toBeUndefined();
      }
    }
    // Verified TLS to Redis: the CA file named in the environment is on a mounted volume.
    expect(envValue(workerContainer, 'REDIS_TLS_CA_FILE')).toMatch(/^\/etc\/fenced-transfers\/tls\//);
  });

  it('a rollout never takes a ready worker away before its replacement is ready', () => {
    const strategy = (worker.spec as { strategy?: { rollingUpdate?: { maxUnavailable?: number | string } } }).strategy;
    expect(strategy?.rollingUpdate?.maxUnavailable).toBe(0);
  });

  it("metrics: scrape annotations on the pods, and a ServiceMonitor on the Service's metrics port", () => {
    const annotations = (worker.spec as { template: { metadata: { annotations?: Record<string, string> } } }).template
      .metadata.annotations;
    expect(annotations?.['prometheus.io/scrape']).toBe('true');
    expect(Number(annotations?.['prometheus.io/port'])).toBe(Number(envValue(workerContainer, 'METRICS_PORT')));
    const service = one('Service');
    const monitor = one('ServiceMonitor') as unknown as {
      spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
    };
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    const servicePorts = (service.spec as { ports: { name: string }[] }).ports.map((p) => p.name);
    expect(servicePorts).toContain(monitor.spec.endpoints[0]?.port);
  });

  it("relays: scrape annotations on the pods, and a PodMonitor on the relay pods' metrics port", () => {
    const relay = deployment('fenced-transfers-relay');
    const template = (relay.spec as { template: { metadata: { labels: Record<string, string> } } }).template;
    const relayContainer = podSpec(relay).containers.find((c) => c.name === 'relay') as Container;
    const monitor = one('PodMonitor') as unknown as {
      spec: { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string }[] };
    };
    expect(template.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    const port = relayContainer.ports?.find((p) => p.name === monitor.spec.podMetricsEndpoints[0]?.port);
    expect(port?.containerPort).toBe(Number(envValue(relayContainer, 'RELAY_METRICS_PORT')));
  });
});

describe('migration Job', () => {
  it('migrates, then creates the worker role, as the owner; never restarts in place', () => {
    const job = one('Job');
    const c = podSpec(job).containers[0] as Container;
    expect(c.command?.join(' ')).toMatch(/node dist\/cli\/migrate\.js && node dist\/cli\/worker-role\.js --role \w+/);
    expect(secretRef(c, 'WORKER_DB_PASSWORD')).toBeDefined();
    expect(podSpec(job).restartPolicy).toBe('Never');
    expect((job.spec as { backoffLimit?: number }).backoffLimit).toBeGreaterThan(0);
  });
});

describe('PodDisruptionBudget', () => {
  it('selects the worker pods and lets at most one go at a time', () => {
    const pdb = one('PodDisruptionBudget');
    const spec = pdb.spec as {
      maxUnavailable?: number;
      minAvailable?: number;
      selector: { matchLabels: Record<string, string> };
    };
    const podLabels = (worker.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata
      .labels;
    expect(podLabels).toMatchObject(spec.selector.matchLabels);
    expect(spec.maxUnavailable ?? Number.NaN).toBe(1);
  });
});

describe('autoscaling', () => {
  const queueName = envValue(workerContainer, 'QUEUE_NAME') ?? 'transfers';
  const scaled = one('ScaledObject') as unknown as {
    spec: {
      scaleTargetRef: { name: string };
      minReplicaCount: number;
      maxReplicaCount: number;
      triggers: { type: string; metadata: Record<string, string>; authenticationRef?: { name: string } }[];
    };
  };
  const trigger = scaled.spec.triggers[0];

  it("KEDA scales the worker Deployment on the transfers queue's BullMQ wait list, never to zero", () => {
    expect(scaled.spec.scaleTargetRef.name).toBe(worker.metadata.name);
    expect(scaled.spec.triggers).toHaveLength(1);
    expect(trigger?.type).toBe('redis');
    expect(trigger?.metadata.listName).toBe(`bull:${queueName}:wait`);
    expect(Number(trigger?.metadata.listLength)).toBeGreaterThan(0);
    // Delayed retries are promoted and stalled jobs recovered only by a running worker.
    expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    expect(scaled.spec.maxReplicaCount).toBeGreaterThan(scaled.spec.minReplicaCount);
    const auth = one('TriggerAuthentication');
    expect(trigger?.authenticationRef?.name).toBe(auth.metadata.name);
    const params = (auth.spec as { secretTargetRef: { parameter: string }[] }).secretTargetRef.map((r) => r.parameter);
    expect(params).toEqual(expect.arrayContaining(['address', 'password', 'tls', 'ca']));
  });

  describe('the list KEDA reads is where the installed BullMQ keeps waiting jobs', () => {
    const config = loadConfig();
    const connection = bullmqConnection(config);
    const probeQueue = uniqueName('keda');
    const queue = new Queue(probeQueue, { connection });
    afterAll(async () => {
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      connection.disconnect();
    });

    it("LLEN of the manifest's key (with this queue's name) counts exactly the waiting jobs", async () => {
      const listName = (trigger?.metadata.listName ?? '').replace(`:${queueName}:`, `:${probeQueue}:`);
      expect(await connection.llen(listName)).toBe(0);
      await queue.add(TRANSFER_JOB_NAME, { operationId: 'k1', from: 'w1', to: 'w2', amount: '1' });
      await queue.add(TRANSFER_JOB_NAME, { operationId: 'k2', from: 'w1', to: 'w2', amount: '1' });
      expect(await connection.type(listName)).toBe('list');
      expect(await connection.llen(listName)).toBe(2);
      expect(await queue.getWaitingCount()).toBe(2);
    });
  });

  it('the plain HPA alternative targets the same Deployment, is kept out of the kustomization, never below one replica', () => {
    const hpa = one('HorizontalPodAutoscaler');
    expect(hpa.file).toBe('alternatives/worker-hpa.yaml');
    const spec = hpa.spec as {
      scaleTargetRef: { name: string };
      minReplicas: number;
      maxReplicas: number;
      metrics: unknown[];
    };
    expect(spec.scaleTargetRef.name).toBe(worker.metadata.name);
    expect(spec.minReplicas).toBeGreaterThanOrEqual(1);
    expect(spec.maxReplicas).toBeGreaterThan(spec.minReplicas);
    expect(spec.metrics.length).toBeGreaterThan(0);
  });
});

/** A Kubernetes quantity (250m, 1, 192Mi, 1Gi) as a number, for comparisons. */
function quantity(raw: string | undefined): number {
  if (raw === undefined) return Number.NaN;
  const m = /^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|k|M|G)?$/.exec(String(raw));
  if (m === null) throw new Error(`not a quantity: ${raw}`);
  const scale: Record<string, number> = { m: 1e-3, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 };
  return Number(m[1]) * (m[2] === undefined ? 1 : (scale[m[2]] as number));
}

describe('relay Deployment', () => {
  const relay = deployment('fenced-transfers-relay');
  const pod = podSpec(relay);
  const container = pod.containers.find((c) => c.name === 'relay') as Container;

  it('runs the compiled relay with its probes at RELAY_METRICS_PORT, stopping more slowly than SHUTDOWN_TIMEOUT_MS', () => {
    expect(container.command).toEqual(['node', 'dist/cli/relay-cli.js']);
    const port = Number(envValue(container, 'RELAY_METRICS_PORT'));
    expect(probePort(container, container.livenessProbe)).toBe(port);
    expect(probePort(container, container.readinessProbe)).toBe(port);
    expect(container.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(container.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect((pod.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(
      Number(envValue(container, 'SHUTDOWN_TIMEOUT_MS')),
    );
  });

  it("logs in as the relay role the migration Job creates: its DATABASE_URL is not the owner's", () => {
    const job = podSpec(one('Job')).containers[0] as Container;
    expect(job.command?.join(' ')).toMatch(
      /node dist\/cli\/migrate\.js && .*node dist\/cli\/relay-role\.js --role \w+/,
    );
    const relayPassword = secretRef(job, 'RELAY_DB_PASSWORD');
    expect(relayPassword).toBeDefined();
    const relayDb = secretRef(container, 'DATABASE_URL');
    expect(relayDb?.name).toBe(relayPassword?.name);
    expect(relayDb?.name).not.toBe(secretRef(job, 'DATABASE_URL')?.name);
  });

  it('both URLs come from secrets, with verified TLS to Redis', () => {
    expect(secretRef(container, 'DATABASE_URL')).toBeDefined();
    expect(secretRef(container, 'REDIS_URL')).toBeDefined();
    for (const e of container.env ?? []) {
      if (/URL|PASSWORD/.test(e.name)) expect(e.value, `relay ${e.name} must come from a secret`).toBeUndefined();
    }
    expect(envValue(container, 'REDIS_TLS_CA_FILE')).toMatch(/^\/etc\/fenced-transfers\/tls\//);
  });
});
