// The counters, histograms and gauges of one worker process, in a prom-client registry of its
// own. They live in memory and cost nothing on the hot path; /metrics renders them, and the
// counter aggregate (counter-aggregate.ts) copies the counters to Redis off the hot path for the
// demo and the chaos harness. There is no other set of counters. Each metric is declared once,
// in WORKER_METRICS: the registry is built from that list, and docs/reference/metrics.md is
// rendered from it (`npm run docs`).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { TransferOutcome } from '../ledger/outcome.ts';
import { OPERATION_KINDS, type OperationKind } from '../ledger/transfer-request.ts';
import { REJECTION_REASONS, RETRY_KINDS, type RetryKind, TERMINAL_OUTCOMES } from '../ledger/vocabulary.ts';

/** Every metric of ours starts with this (Prometheus naming: a common prefix, units and `_total` last). */
export const METRIC_PREFIX = 'fenced_transfers_';

/** before_commit: the watchdog or assertHeld() stopped the decision; in_flight: the lease ended while it was sent. */
export const LOCK_LOSS_MOMENTS = ['before_commit', 'in_flight'] as const;
export type LockLossMoment = (typeof LOCK_LOSS_MOMENTS)[number];
export type LockWaitResult = 'acquired' | 'busy';
/**
 * What the outcome feed got of a job that failed for good (recordGiveUp() in the worker):
 * recorded: its intake request parked, a given_up event; no_open_request: the database recorded
 * nothing, there being no open request of that operation and body (a job sent to BullMQ straight,
 * or a request given up, decided or of another body already); invalid_job: no valid transfer in
 * the job; superseded: the job was redriven or retried before a later try; error: every try failed.
 */
export const GIVE_UP_FEED_RESULTS = ['recorded', 'no_open_request', 'invalid_job', 'superseded', 'error'] as const;
export type GiveUpFeedResult = (typeof GIVE_UP_FEED_RESULTS)[number];
/** BullMQ job states reported by the queue depth gauge. */
export const QUEUE_DEPTH_STATES = [
  'waiting',
  'prioritized',
  'delayed',
  'active',
  'waiting-children',
  'completed',
  'failed',
] as const;
export type QueueDepthState = (typeof QUEUE_DEPTH_STATES)[number];

export interface QueueDepth {
  readonly queue: string;
  readonly state: QueueDepthState;
  readonly jobs: number;
}
/** Read at scrape time; throws (or rejects) when the queue cannot be read. */
export type QueueDepthSource = () => Promise<readonly QueueDepth[]>;

/** A PostgreSQL pool's connections (`total`, of which `idle`) and the queries waiting for one, as pg.Pool counts them. */
export interface PoolUse {
  readonly total: number;
  readonly idle: number;
  readonly waiting: number;
}
/** Read at scrape time (pg.Pool keeps the counts in memory); null when there is no pool to read. */
export type PoolUseSource = () => PoolUse | null;

export const DECISION_DURATION_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
export const LOCK_WAIT_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
export const JOB_DURATION_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000];

/** One metric as declared: what /metrics calls it, its Prometheus type, its labels and its help text. */
export interface MetricDefinition {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly help: string;
  readonly labelNames: readonly string[];
  /** Histograms only: the upper bounds of the buckets, in the metric's unit. */
  readonly buckets?: readonly number[];
}

const p = METRIC_PREFIX;

/** Every metric of a worker process, in the order /metrics and the reference document list them. */
export const WORKER_METRICS = {
  outcomes: {
    name: `${p}outcomes_total`,
    type: 'counter',
    help: 'Transfers answered, by outcome (duplicate and conflict are answered from the idempotency record)',
    labelNames: ['outcome'],
  },
  rejections: {
    name: `${p}rejections_total`,
    type: 'counter',
    help: 'Transfers rejected, by reason (a subset of outcome="rejected")',
    labelNames: ['reason'],
  },
  invalid: {
    name: `${p}invalid_messages_total`,
    type: 'counter',
    help: 'Messages outside the wire format, failed at once without retry',
    labelNames: [],
  },
  staleFences: {
    name: `${p}stale_fence_refusals_total`,
    type: 'counter',
    help: 'Decisions the database refused because the token was below the wallet fence',
    labelNames: [],
  },
  fenceAdvances: {
    name: `${p}fence_advances_total`,
    type: 'counter',
    help: 'Lock service counters raised past the database fence after a refusal (Redis; etcd and PostgreSQL never need it)',
    labelNames: [],
  },
  lockLosses: {
    name: `${p}lock_losses_total`,
    type: 'counter',
    help: 'Leases lost while a job held them: before the commit (decision not sent) or with the decision in flight (the fence decided)',
    labelNames: ['when'],
  },
  busyDeferrals: {
    name: `${p}lock_busy_deferrals_total`,
    type: 'counter',
    help: 'Jobs handed back to the queue, delayed, because their wallet was locked by another holder',
    labelNames: [],
  },
  retries: {
    name: `${p}retries_total`,
    type: 'counter',
    help: 'Attempts that failed and went back to BullMQ for a retry, by kind (a permanent kind puts the job back delayed, without spending an attempt)',
    labelNames: ['kind'],
  },
  givenUp: {
    name: `${p}given_up_jobs_total`,
    type: 'counter',
    help: 'Jobs that failed for good, by what the outcome feed got: recorded (the intake request parked, a given_up event), no_open_request (nothing: a job sent straight, or its request given up, decided or of another body already), invalid_job, superseded (redriven or retried before a later try), error (every try failed; the relay records an intake request when it finds the job failed)',
    labelNames: ['feed'],
  },
  operations: {
    name: `${p}operations_total`,
    type: 'counter',
    help: 'Terminal answers by operation kind (transfer, hold, capture, void, refund, split); outcomes_total has the same answers by outcome',
    labelNames: ['kind'],
  },
  holdsExpired: {
    name: `${p}holds_expired_total`,
    type: 'counter',
    help: "Holds this worker's expiry sweep released (holds_expire(), every HOLD_SWEEP_INTERVAL_MS); a capture or void that finds its hold expired releases it itself, which is not counted here",
    labelNames: [],
  },
  decisionDuration: {
    name: `${p}decision_duration_seconds`,
    type: 'histogram',
    help: 'Time of one decision call to PostgreSQL (one batch of transfers, one round trip and one commit)',
    labelNames: [],
    buckets: DECISION_DURATION_BUCKETS_S,
  },
  batchSize: {
    name: `${p}decision_batch_size`,
    type: 'histogram',
    help: 'Transfers decided by one decision call',
    labelNames: [],
    buckets: BATCH_SIZE_BUCKETS,
  },
  jobDuration: {
    name: `${p}job_duration_seconds`,
    type: 'histogram',
    help: 'Time a job held a worker slot, per attempt (lock_wait_seconds_sum over this sum is the share of slot time spent waiting for locks)',
    labelNames: [],
    buckets: JOB_DURATION_BUCKETS_S,
  },
  lockWait: {
    name: `${p}lock_wait_seconds`,
    type: 'histogram',
    help: 'Time a job waited for its wallet lease: a ride on the one this process holds, an acquisition, or polling a wallet held elsewhere until it was ours (result="acquired") or the wait gave up and the job was deferred (result="busy")',
    labelNames: ['result'],
    buckets: LOCK_WAIT_BUCKETS_S,
  },
  inProgress: {
    name: `${p}jobs_in_progress`,
    type: 'gauge',
    help: 'Jobs this process holds right now',
    labelNames: [],
  },
  ready: {
    name: `${p}worker_ready`,
    type: 'gauge',
    help: '1 while this worker takes jobs (what /readyz answers), 0 while gated or stopping',
    labelNames: [],
  },
  info: {
    name: `${p}worker_info`,
    type: 'gauge',
    help: 'Always 1; labels identify the process (instance is the prefix of its lock owner ids) and its lock service (LOCK_BACKEND)',
    labelNames: ['instance', 'queue', 'lock_backend'],
  },
  lockEpoch: {
    name: `${p}lock_epoch`,
    type: 'gauge',
    help: 'The lock epoch whose tokens this worker issues (lock_epochs in the database), by lock service',
    labelNames: ['backend'],
  },
  queueJobs: {
    name: `${p}queue_jobs`,
    type: 'gauge',
    help: 'Jobs in the queue by state, read from Redis at scrape time',
    labelNames: ['queue', 'state'],
  },
  dbPoolConnections: {
    name: `${p}db_pool_connections`,
    type: 'gauge',
    help: "Connections of this process's PostgreSQL pool (at most DB_POOL_MAX) by state: busy (lent to a query or a transaction) or idle, read at scrape time",
    labelNames: ['state'],
  },
  dbPoolWaiting: {
    name: `${p}db_pool_waiting`,
    type: 'gauge',
    help: 'Queries of this process waiting for a connection of its PostgreSQL pool (every one of DB_POOL_MAX busy), read at scrape time',
    labelNames: [],
  },
} as const satisfies Readonly<Record<string, MetricDefinition>>;

type WorkerMetricKey = keyof typeof WORKER_METRICS;
type LabelOf<D> = D extends { readonly labelNames: readonly (infer L extends string)[] } ? L : never;
/** The prom-client object a definition becomes. */
type MetricOf<D> = D extends { readonly type: 'counter' }
  ? Counter<LabelOf<D>>
  : D extends { readonly type: 'histogram' }
    ? Histogram<LabelOf<D>>
    : Gauge<LabelOf<D>>;
type WorkerMetricSet = { readonly [K in WorkerMetricKey]: MetricOf<(typeof WORKER_METRICS)[K]> };

/** Gauges whose value is read at scrape time, by key. */
type Collectors = Partial<Record<WorkerMetricKey, (this: Gauge<string>) => Promise<void>>>;

/** Every metric of WORKER_METRICS, registered in `registry`; nothing else is registered here. */
function registerWorkerMetrics(registry: Registry, collectors: Collectors): WorkerMetricSet {
  const registers = [registry];
  const built: Record<string, Counter<string> | Gauge<string> | Histogram<string>> = {};
  for (const [key, d] of Object.entries(WORKER_METRICS) as [WorkerMetricKey, MetricDefinition][]) {
    const common = { name: d.name, help: d.help, labelNames: d.labelNames, registers };
    if (d.type === 'counter') built[key] = new Counter(common);
    else if (d.type === 'histogram') built[key] = new Histogram({ ...common, buckets: [...(d.buckets ?? [])] });
    else {
      const collect = collectors[key];
      built[key] = new Gauge(collect === undefined ? common : { ...common, collect });
    }
  }
  return built as unknown as WorkerMetricSet;
}

/** One counter series: its name, labels and value, as /metrics shows it. */
export interface CounterSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface WorkerMetricsOptions {
  /** Identifies this process (also the prefix of its lock owner ids). */
  readonly instanceId: string;
  readonly queueName: string;
  /** prom-client's process and Node.js metrics (CPU, memory, event loop, GC); off for in-process test workers. */
  readonly defaultMetrics?: boolean;
  /** LOCK_BACKEND, a label of worker_info and lock_epoch. @defaultValue 'redis' */
  readonly lockBackend?: string;
}

export class WorkerMetrics {
  readonly registry = new Registry();
  readonly instanceId: string;
  private readonly outcomes: WorkerMetricSet['outcomes'];
  private readonly rejections: WorkerMetricSet['rejections'];
  private readonly invalid: WorkerMetricSet['invalid'];
  private readonly staleFences: WorkerMetricSet['staleFences'];
  private readonly fenceAdvances: WorkerMetricSet['fenceAdvances'];
  private readonly lockLosses: WorkerMetricSet['lockLosses'];
  private readonly busyDeferrals: WorkerMetricSet['busyDeferrals'];
  private readonly retries: WorkerMetricSet['retries'];
  private readonly givenUpJobs: WorkerMetricSet['givenUp'];
  private readonly operations: WorkerMetricSet['operations'];
  private readonly holdsExpired: WorkerMetricSet['holdsExpired'];
  private readonly decisionDuration: WorkerMetricSet['decisionDuration'];
  private readonly lockWait: WorkerMetricSet['lockWait'];
  private readonly lockEpochGauge: WorkerMetricSet['lockEpoch'];
  private readonly lockBackend: string;
  private readonly jobDuration: WorkerMetricSet['jobDuration'];
  private readonly batchSize: WorkerMetricSet['batchSize'];
  private readonly inProgress: WorkerMetricSet['inProgress'];
  private readonly ready: WorkerMetricSet['ready'];
  private readonly counters: readonly Counter<string>[];
  private queueDepthSource: QueueDepthSource | null = null;
  private poolUseSource: PoolUseSource | null = null;
  private jobsInHand = 0;

  constructor(options: WorkerMetricsOptions) {
    this.instanceId = options.instanceId;
    const source = () => this.queueDepthSource;
    const poolUse = () => this.poolUseSource?.() ?? null;
    const m = registerWorkerMetrics(this.registry, {
      async queueJobs() {
        this.reset();
        const read = source();
        if (read === null) return;
        try {
          for (const d of await read()) this.set({ queue: d.queue, state: d.state }, d.jobs);
        } catch {
          // Redis did not answer: the gauge stays empty and the rest of the scrape still works.
        }
      },
      async dbPoolConnections() {
        this.reset();
        const use = poolUse();
        if (use === null) return;
        this.set({ state: 'busy' }, use.total - use.idle);
        this.set({ state: 'idle' }, use.idle);
      },
      async dbPoolWaiting() {
        this.set(poolUse()?.waiting ?? 0);
      },
    });
    this.outcomes = m.outcomes;
    this.rejections = m.rejections;
    this.invalid = m.invalid;
    this.staleFences = m.staleFences;
    this.fenceAdvances = m.fenceAdvances;
    this.lockLosses = m.lockLosses;
    this.busyDeferrals = m.busyDeferrals;
    this.retries = m.retries;
    this.givenUpJobs = m.givenUp;
    this.operations = m.operations;
    this.holdsExpired = m.holdsExpired;
    this.decisionDuration = m.decisionDuration;
    this.batchSize = m.batchSize;
    this.jobDuration = m.jobDuration;
    this.lockWait = m.lockWait;
    this.inProgress = m.inProgress;
    this.ready = m.ready;
    this.lockBackend = options.lockBackend ?? 'redis';
    this.lockEpochGauge = m.lockEpoch;
    m.info.set({ instance: options.instanceId, queue: options.queueName, lock_backend: this.lockBackend }, 1);
    this.lockEpochGauge.set({ backend: this.lockBackend }, 0);
    this.counters = [
      this.outcomes,
      this.rejections,
      this.invalid,
      this.staleFences,
      this.fenceAdvances,
      this.lockLosses,
      this.busyDeferrals,
      this.retries,
      this.givenUpJobs,
      this.operations,
      this.holdsExpired,
    ] as Counter<string>[];
    // Every known series starts at 0, so a rate() over it works from the first scrape.
    for (const outcome of TERMINAL_OUTCOMES) this.outcomes.inc({ outcome }, 0);
    for (const reason of REJECTION_REASONS) this.rejections.inc({ reason }, 0);
    for (const when of LOCK_LOSS_MOMENTS) this.lockLosses.inc({ when }, 0);
    for (const kind of RETRY_KINDS) this.retries.inc({ kind }, 0);
    for (const feed of GIVE_UP_FEED_RESULTS) this.givenUpJobs.inc({ feed }, 0);
    for (const kind of OPERATION_KINDS) this.operations.inc({ kind }, 0);
    this.holdsExpired.inc(0);
    if (options.defaultMetrics === true) collectDefaultMetrics({ register: this.registry });
  }

  /** A terminal answer: applied, rejected (with its reason), duplicate or conflict. */
  decided(outcome: TransferOutcome, kind: OperationKind = 'transfer'): void {
    this.outcomes.inc({ outcome: outcome.outcome });
    this.operations.inc({ kind });
    if (outcome.outcome === 'rejected') this.rejections.inc({ reason: outcome.reason });
  }

  /** Holds released by one call of this worker's expiry sweep. */
  holdsReleased(count: number): void {
    if (count > 0) this.holdsExpired.inc(count);
  }

  invalidMessage(): void {
    this.invalid.inc();
  }

  staleFenceRefused(): void {
    this.staleFences.inc();
  }

  fenceAdvanced(): void {
    this.fenceAdvances.inc();
  }

  lockLost(when: LockLossMoment): void {
    this.lockLosses.inc({ when });
  }

  lockBusyDeferred(): void {
    this.busyDeferrals.inc();
  }

  retry(kind: RetryKind): void {
    this.retries.inc({ kind });
  }

  /** A job that failed for good, by what the outcome feed got of it. */
  givenUp(feed: GiveUpFeedResult): void {
    this.givenUpJobs.inc({ feed });
  }

  /** Call right before the decision is sent; call the returned function when its answer (or error) is back. */
  startDecisionTimer(): () => void {
    const startedMs = performance.now();
    return () => this.decisionDuration.observe((performance.now() - startedMs) / 1000);
  }

  /** One batched decision call: its duration and the transfers it decided. */
  observeBatch(seconds: number, size: number): void {
    this.decisionDuration.observe(seconds);
    this.batchSize.observe(size);
  }

  /** From the first acquire attempt until the lock is held, or until the bounded retries gave up. */
  observeLockWait(seconds: number, result: LockWaitResult): void {
    this.lockWait.observe({ result }, seconds);
  }

  jobStarted(): void {
    this.jobsInHand += 1;
    this.inProgress.set(this.jobsInHand);
  }

  /** `seconds`: how long the job held its slot. */
  jobFinished(seconds: number): void {
    this.jobDuration.observe(seconds);
    this.jobsInHand -= 1;
    this.inProgress.set(this.jobsInHand);
  }

  /** Jobs this process holds right now (for the shutdown log). */
  get jobsInProgress(): number {
    return this.jobsInHand;
  }

  /** The lock epoch entered (at start, and when the database opens a new one for this backend). */
  setLockEpoch(epoch: number): void {
    this.lockEpochGauge.set({ backend: this.lockBackend }, epoch);
  }

  setReady(ready: boolean): void {
    this.ready.set(ready ? 1 : 0);
  }

  setQueueDepthSource(source: QueueDepthSource): void {
    this.queueDepthSource = source;
  }

  setPoolUseSource(source: PoolUseSource): void {
    this.poolUseSource = source;
  }

  /** Every counter series of ours with its current value (zeros included). */
  async counterSamples(): Promise<CounterSample[]> {
    const out: CounterSample[] = [];
    for (const counter of this.counters) {
      const { name, values } = await counter.get();
      for (const v of values) {
        const labels = Object.fromEntries(Object.entries(v.labels).map(([k, l]) => [k, String(l)]));
        out.push({ name, labels, value: v.value });
      }
    }
    return out;
  }

  /** The Prometheus text exposition of the whole registry. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

/** The series name /metrics prints: `name{a="x",b="y"}` with labels sorted, or `name` without labels. */
export function seriesId(name: string, labels: Readonly<Record<string, string>>): string {
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return name;
  const escapeLabel = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
  return `${name}{${keys.map((k) => `${k}="${escapeLabel(labels[k] as string)}"`).join(',')}}`;
}
