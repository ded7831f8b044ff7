// Probes Redis and PostgreSQL on a fixed interval, one round at a time, and tells the worker
// after every round; logs only the changes (an outage begins, the servers answer again). At
// start, waitUntilHealthy() runs the same probes until they pass or the start-up time is up.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../log/logger.ts';
import type { ProbeResult, ProbeVariable } from './probes.ts';

/** Time between two probe rounds, at start and at run time. */
export const HEALTH_PROBE_INTERVAL_MS = 1_000;
/** One probe that has not answered in this long has failed. */
export const HEALTH_PROBE_TIMEOUT_MS = 2_000;

export interface ProbeFailure {
  readonly variable: ProbeVariable;
  readonly detail: string;
}

export interface HealthState {
  readonly healthy: boolean;
  readonly failures: readonly ProbeFailure[];
}

export type Probe = (timeoutMs: number) => Promise<ProbeResult>;

export class HealthMonitor {
  private current: HealthState | null = null;
  private loop: Promise<void> | null = null;
  private readonly stopping = new AbortController();

  constructor(
    private readonly options: {
      readonly probes: readonly Probe[];
      readonly logger: Logger;
      /** Called after every round (the worker pauses or resumes taking jobs). */
      readonly onCheck?: (state: HealthState) => void | Promise<void>;
      readonly intervalMs?: number;
      readonly timeoutMs?: number;
    },
  ) {}

  /** The last round's result; unhealthy before the first round. */
  get state(): HealthState {
    return this.current ?? { healthy: false, failures: [] };
  }

  /** One round: every probe at once, each bounded by the probe timeout. */
  async check(): Promise<HealthState> {
    const timeoutMs = this.options.timeoutMs ?? HEALTH_PROBE_TIMEOUT_MS;
    const results = await Promise.all(this.options.probes.map((probe) => probe(timeoutMs)));
    const failures = results.flatMap((r) => (r.ok ? [] : [{ variable: r.variable, detail: r.detail }]));
    const state: HealthState = { healthy: failures.length === 0, failures };
    const before = this.current;
    this.current = state;
    if (before === null || before.healthy !== state.healthy) {
      if (state.healthy) this.options.logger.info({ event: 'dependencies_available' }, 'Redis and PostgreSQL answer');
      else
        this.options.logger.warn(
          { event: 'dependencies_unavailable', failures },
          'a dependency does not answer; not taking jobs',
        );
    }
    return state;
  }

  /** Rounds until one passes, at most until timeoutMs has passed or `signal` fires; returns the last round. */
  async waitUntilHealthy(timeoutMs: number, signal: AbortSignal): Promise<HealthState> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const state = await this.check();
      const leftMs = deadline - performance.now();
      if (state.healthy || signal.aborted || leftMs <= 0) return state;
      await sleep(Math.min(this.options.intervalMs ?? HEALTH_PROBE_INTERVAL_MS, leftMs), undefined, { signal }).catch(
        () => undefined,
      );
    }
  }

  /** Probes on the interval until stop(). */
  start(): void {
    if (this.loop !== null) return;
    const signal = this.stopping.signal;
    this.loop = (async () => {
      while (!signal.aborted) {
        await sleep(this.options.intervalMs ?? HEALTH_PROBE_INTERVAL_MS, undefined, { signal }).catch(() => undefined);
        if (signal.aborted) break;
        const state = await this.check();
        if (signal.aborted) break;
        try {
          await this.options.onCheck?.(state);
        } catch (err) {
          this.options.logger.error({ err }, 'health check handler failed');
        }
      }
    })();
  }

  /** Ends the loop; resolves once the round in progress (if any) is over. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
  }
}
