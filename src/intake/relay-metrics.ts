// The metrics of one relay process (`npm run relay`), in a prom-client registry of its own,
// declared once in RELAY_METRICS (the registry is built from that list, and `npm run docs`
// renders docs/reference/relay-metrics.md from it). The counters count what this process did;
// the gauges read the intake and the publisher's cursor from PostgreSQL at scrape time, so every
// relay reports the same backlog.
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { METRIC_PREFIX, type MetricDefinition } from '../metrics/worker-metrics.ts';
import type { IntakeBacklog } from './relay.ts';

const p = METRIC_PREFIX;

/** Every metric of a relay process, in the order /metrics and the reference document list them. */
export const RELAY_METRICS = {
  lag: {
    name: `${p}relay_lag_seconds`,
    type: 'gauge',
    help: 'Age of the oldest request never sent yet (0 when every request was sent): how far the relays are behind',
    labelNames: [],
  },
  waiting: {
    name: `${p}intake_open_requests`,
    type: 'gauge',
    help: 'Requests not decided yet (sent or not, given-up ones included)',
    labelNames: [],
  },
  givenUp: {
    name: `${p}intake_given_up_requests`,
    type: 'gauge',
    help: 'Requests given up (attempts exhausted) and still open: waiting for `npm run redrive`',
    labelNames: [],
  },
  sent: {
    name: `${p}relay_sent_total`,
    type: 'counter',
    help: 'Requests this relay added to the queue, first sends and re-sends',
    labelNames: [],
  },
  resent: {
    name: `${p}relay_resent_total`,
    type: 'counter',
    help: 'Of those, sends after the first (the request was still undecided after INTAKE_RESEND_AFTER_MS)',
    labelNames: [],
  },
  lost: {
    name: `${p}relay_lost_adds_total`,
    type: 'counter',
    help: 'Re-sends that found no job in the queue: adds the queue had lost, added again',
    labelNames: [],
  },
  undone: {
    name: `${p}relay_decisions_lost_total`,
    type: 'counter',
    help: 'Re-sends that found the job completed while its request is undecided (asked after the job was seen completed): decisions the database lost (it went back in time), sent again',
    labelNames: [],
  },
  givenUpFound: {
    name: `${p}relay_given_up_found_total`,
    type: 'counter',
    help: 'Re-sends that found the job failed for good: recorded as given up instead of sent',
    labelNames: [],
  },
  published: {
    name: `${p}relay_outcomes_published_total`,
    type: 'counter',
    help: 'Outcome events this relay added to the outcomes queue',
    labelNames: [],
  },
  cursor: {
    name: `${p}relay_outcomes_cursor_position`,
    type: 'gauge',
    help: "The outcome publisher's cursor: the last feed position published",
    labelNames: [],
  },
  errors: {
    name: `${p}relay_errors_total`,
    type: 'counter',
    help: 'Rounds that failed (Redis or PostgreSQL did not answer) and were retried after a back-off',
    labelNames: [],
  },
} as const satisfies Readonly<Record<string, MetricDefinition>>;

/** What the gauges read at scrape time: the intake's backlog and the cursor's position. */
export interface RelayGaugeSource {
  backlog(): Promise<IntakeBacklog>;
  cursorPosition(): Promise<bigint>;
}

export class RelayMetrics {
  readonly registry = new Registry();
  readonly sent: Counter;
  readonly resent: Counter;
  readonly lost: Counter;
  readonly givenUpFound: Counter;
  readonly undone: Counter;
  readonly published: Counter;
  readonly errors: Counter;
  private source: RelayGaugeSource | null = null;
  /** One read of the backlog per scrape, shared by its three gauges. */
  private backlogRead: Promise<IntakeBacklog> | null = null;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    const counter = (d: MetricDefinition) => new Counter({ name: d.name, help: d.help, registers });
    this.sent = counter(RELAY_METRICS.sent);
    this.resent = counter(RELAY_METRICS.resent);
    this.lost = counter(RELAY_METRICS.lost);
    this.givenUpFound = counter(RELAY_METRICS.givenUpFound);
    this.undone = counter(RELAY_METRICS.undone);
    this.published = counter(RELAY_METRICS.published);
    this.errors = counter(RELAY_METRICS.errors);
    const metrics = this;
    const backlogGauge = (d: MetricDefinition, pick: (b: IntakeBacklog) => number) =>
      new Gauge({
        name: d.name,
        help: d.help,
        registers,
        async collect() {
          const backlog = await metrics.readBacklog();
          if (backlog !== null) this.set(pick(backlog));
        },
      });
    backlogGauge(RELAY_METRICS.lag, (b) => b.lagSeconds);
    backlogGauge(RELAY_METRICS.waiting, (b) => b.open);
    backlogGauge(RELAY_METRICS.givenUp, (b) => b.givenUp);
    new Gauge({
      name: RELAY_METRICS.cursor.name,
      help: RELAY_METRICS.cursor.help,
      registers,
      async collect() {
        if (metrics.source !== null) this.set(Number(await metrics.source.cursorPosition()));
      },
    });
    if (options.defaultMetrics === true) collectDefaultMetrics({ register: this.registry });
  }

  setGaugeSource(source: RelayGaugeSource): void {
    this.source = source;
  }

  private async readBacklog(): Promise<IntakeBacklog | null> {
    const source = this.source;
    if (source === null) return null;
    this.backlogRead ??= source.backlog().finally(() => {
      this.backlogRead = null;
    });
    return await this.backlogRead;
  }

  /** The Prometheus text exposition of the whole registry. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
