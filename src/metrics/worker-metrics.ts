// The counters, histograms and gauges of one worker process, in a prom-client registry of its
// own. They live in memory and cost nothing on the hot path; /metrics renders them, and the
// counter aggregate (counter-aggregate.ts) copies the counters to Redis off the hot path for the
// demo and the chaos harness. There is no other set of counters.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { TransferOutcome } from '../ledger/outcome.ts';
import { REJECTION_REASONS, RETRY_KINDS, type RetryKind, TERMINAL_OUTCOMES } from '../ledger/vocabulary.ts';

/** Every metric of ours starts with this (Prometheus naming: a common prefix, units and `_total` last). */
export const METRIC_PREFIX = 'fenced_transfers_';

/** before_commit: the watchdog or assertHeld() stopped the decision; in_flight: the lease ended while it was sent. */
export const LOCK_LOSS_MOMENTS = ['before_commit', 'in_flight'] as const;
export type LockLossMoment = (typeof LOCK_LOSS_MOMENTS)[number];
export type LockWaitResult = 'acquired' | 'busy';
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

export const DECISION_DURATION_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
export const LOCK_WAIT_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
export const JOB_DURATION_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
export const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000];

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
}

export class WorkerMetrics {
  readonly registry = new Registry();
  readonly instanceId: string;
  private readonly outcomes: Counter<'outcome'>;
  private readonly rejections: Counter<'reason'>;
  private readonly invalid: Counter;
  private readonly staleFences: Counter;
  private readonly fenceAdvances: Counter;
  private readonly lockLosses: Counter<'when'>;
  private readonly busyDeferrals: Counter;
  private readonly retries: Counter<'kind'>;
  private readonly decisionDuration: Histogram;
  private readonly lockWait: Histogram<'result'>;
  private readonly jobDuration: Histogram;
  private readonly batchSize: Histogram;
  private readonly inProgress: Gauge;
  private readonly ready: Gauge;
  private readonly counters: readonly Counter<string>[];
  private queueDepthSource: QueueDepthSource | null = null;
  private jobsInHand = 0;

  constructor(options: WorkerMetricsOptions) {
    this.instanceId = options.instanceId;
    const registers = [this.registry];
    const p = METRIC_PREFIX;
    this.outcomes = new Counter({
      name: `${p}outcomes_total`,
      help: 'Transfers answered, by outcome (duplicate and conflict are answered from the idempotency record)',
      labelNames: ['outcome'],
      registers,
    });
    this.rejections = new Counter({
      name: `${p}rejections_total`,
      help: 'Transfers rejected, by reason (a subset of outcome="rejected")',
      labelNames: ['reason'],
      registers,
    });
    this.invalid = new Counter({
      name: `${p}invalid_messages_total`,
      help: 'Messages outside the wire format, failed at once without retry',
      registers,
    });
    this.staleFences = new Counter({
      name: `${p}stale_fence_refusals_total`,
      help: 'Decisions the database refused because the token was below the wallet fence',
      registers,
    });
    this.fenceAdvances = new Counter({
      name: `${p}fence_advances_total`,
      help: 'Redis fence counters raised past the database fence after a refusal',
      registers,
    });
    this.lockLosses = new Counter({
      name: `${p}lock_losses_total`,
      help: 'Leases lost while a job held them: before the commit (decision not sent) or with the decision in flight (the fence decided)',
      labelNames: ['when'],
      registers,
    });
    this.busyDeferrals = new Counter({
      name: `${p}lock_busy_deferrals_total`,
      help: 'Jobs handed back to the queue, delayed, because their wallet was locked by another holder',
      registers,
    });
    this.retries = new Counter({
      name: `${p}retries_total`,
      help: 'Attempts that failed and went back to BullMQ for a retry, by kind',
      labelNames: ['kind'],
      registers,
    });
    this.decisionDuration = new Histogram({
      name: `${p}decision_duration_seconds`,
      help: 'Time of one decision call to PostgreSQL (one batch of transfers, one round trip and one commit)',
      buckets: DECISION_DURATION_BUCKETS_S,
      registers,
    });
    this.batchSize = new Histogram({
      name: `${p}decision_batch_size`,
      help: 'Transfers decided by one decision call',
      buckets: BATCH_SIZE_BUCKETS,
      registers,
    });
    this.jobDuration = new Histogram({
      name: `${p}job_duration_seconds`,
      help: 'Time a job held a worker slot, per attempt (lock_wait_seconds_sum over this sum is the share of slot time spent waiting for locks)',
      buckets: JOB_DURATION_BUCKETS_S,
      registers,
    });
    this.lockWait = new Histogram({
      name: `${p}lock_wait_seconds`,
      help: 'Time a job waited for its wallet lease: a ride on the one this process holds, an acquisition, or polling a wallet held elsewhere until it was ours (result="acquired") or the wait gave up and the job was deferred (result="busy")',
      labelNames: ['result'],
      buckets: LOCK_WAIT_BUCKETS_S,
      registers,
    });
    this.inProgress = new Gauge({ name: `${p}jobs_in_progress`, help: 'Jobs this process holds right now', registers });
    this.ready = new Gauge({
      name: `${p}worker_ready`,
      help: '1 while this worker takes jobs (what /readyz answers), 0 while gated or stopping',
      registers,
    });
    const info = new Gauge({
      name: `${p}worker_info`,
      help: 'Always 1; labels identify the process (instance is the prefix of its lock owner ids)',
      labelNames: ['instance', 'queue'],
      registers,
    });
    info.set({ instance: options.instanceId, queue: options.queueName }, 1);
    const source = () => this.queueDepthSource;
    new Gauge({
      name: `${p}queue_jobs`,
      help: 'Jobs in the queue by state, read from Redis at scrape time',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        this.reset();
        const read = source();
        if (read === null) return;
        try {
          for (const d of await read()) this.set({ queue: d.queue, state: d.state }, d.jobs);
        } catch {
          // Redis did not answer: the gauge stays empty and the rest of the scrape still works.
        }
      },
    });
    this.counters = [
      this.outcomes,
      this.rejections,
      this.invalid,
      this.staleFences,
      this.fenceAdvances,
      this.lockLosses,
      this.busyDeferrals,
      this.retries,
    ] as Counter<string>[];
    // Every known series starts at 0, so a rate() over it works from the first scrape.
    for (const outcome of TERMINAL_OUTCOMES) this.outcomes.inc({ outcome }, 0);
    for (const reason of REJECTION_REASONS) this.rejections.inc({ reason }, 0);
    for (const when of LOCK_LOSS_MOMENTS) this.lockLosses.inc({ when }, 0);
    for (const kind of RETRY_KINDS) this.retries.inc({ kind }, 0);
    if (options.defaultMetrics === true) collectDefaultMetrics({ register: this.registry });
  }

  /** A terminal answer: applied, rejected (with its reason), duplicate or conflict. */
  decided(outcome: TransferOutcome): void {
    this.outcomes.inc({ outcome: outcome.outcome });
    if (outcome.outcome === 'rejected') this.rejections.inc({ reason: outcome.reason });
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

  setReady(ready: boolean): void {
    this.ready.set(ready ? 1 : 0);
  }

  setQueueDepthSource(source: QueueDepthSource): void {
    this.queueDepthSource = source;
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
