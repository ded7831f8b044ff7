// The life of every long-running process of the product (the worker, the relay), in one place:
// the signals, the crash handlers, the readiness it reports, the wait for its servers at start,
// the ordered close of what it owns at the end, and its exit codes. A process declares what is
// its own (a ProcessLife); this module runs it through the three phases:
//
//   starting  the HTTP server listens (/readyz 503 with what does not answer yet); the health
//             monitor probes until every probe passes or STARTUP_TIMEOUT_MS is up (then a
//             StartupError naming the variables and what was found, after closing what is open).
//   running   the process works; the monitor probes on its interval; /readyz asks the process.
//   stopping  the first SIGTERM/SIGINT: the monitor stops, then the process's closing steps run
//             one after the other, in the order it declared them; exit 0 (1 if a step failed).
//             A second signal (a repeat within SIGNAL_REPEAT_WINDOW_MS is the same request), or
//             SHUTDOWN_TIMEOUT_MS passing, exits 1 at once.
//
// An unhandled rejection or an uncaught exception leaves the process in an unknown state: it is
// logged (fatal) and the process exits 1. This module loads neither BullMQ nor ioredis.
import { StartupError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';
import type { HealthMonitor, HealthState } from './health-monitor.ts';
import { OpsServer, type OpsServerOptions, type Readiness, reportListeningPort } from './ops-server.ts';

/**
 * A repeated signal this soon after the first is the same request, not a second one: Ctrl-C on
 * `npm run worker` reaches the process twice at once (from the terminal and forwarded by npm).
 */
export const SIGNAL_REPEAT_WINDOW_MS = 1_000;

/** The exit codes of a long-running process. */
export const EXIT_CODE = {
  /** Stopped as asked, everything it owned closed (or stopped before it was ready). */
  stopped: 0,
  /** A second signal, SHUTDOWN_TIMEOUT_MS passing, a crash, or a closing step that failed. */
  failed: 1,
} as const;

export type ProcessPhase = 'starting' | 'running' | 'stopping';

/** What the runtime needs of `process`: its events and its exit (tests pass an EventEmitter). */
export type ProcessHost = Pick<NodeJS.EventEmitter, 'on'> & { exit(code: number): void };

/** One thing a process owns, closed at the stop (and when the start fails) in the declared order. */
export interface ClosingStep {
  readonly name: string;
  /**
   * Closes it; does nothing when it was never opened. Bound its own waits: SHUTDOWN_TIMEOUT_MS
   * bounds the stop as a whole. A throw is logged and the next step still runs.
   */
  close(): Promise<unknown> | undefined;
}

/** What a process declares to the runtime: what it opens, what it owns and how it reports. */
export interface ProcessLife {
  /** Opens what answers during the start (the HTTP server) and logs the start. */
  listen(): Promise<void>;
  /** Opens what the process works with, once its servers answer; it is still `starting`. */
  open(): Promise<void> | undefined;
  /** Starts the work: called once the phase is `running`, before the monitor's rounds start. */
  begin(): void;
  /** /readyz while running: the runtime itself answers while starting and stopping. */
  readiness(health: HealthState): Readiness;
  /** Logs the stop; 'abandon' exits 0 at once, closing nothing (TRANSFERS_UNSAFE=no-graceful-shutdown). */
  stopping(signal: string): 'graceful' | 'abandon';
  /** What the process owns, in the order it must close: a later step may rely on an earlier one being done. */
  readonly closing: readonly ClosingStep[];
  /** Logs the end of a graceful stop. */
  stopped(): void;
}

export interface ProcessRuntimeOptions {
  readonly logger: Logger;
  /** Probes the servers: waited on at start, run on its interval while running. */
  readonly monitor: HealthMonitor;
  readonly startupTimeoutMs: number;
  readonly shutdownTimeoutMs: number;
  /** False: start working without waiting for the servers (TRANSFERS_UNSAFE=no-readiness). Default true. */
  readonly waitForHealth?: boolean;
  /** Fields added to the lines of a forced exit (e.g. the jobs in hand). */
  readonly inHand?: () => Record<string, unknown>;
  /** Default `process`. */
  readonly host?: ProcessHost;
  /** Default SIGNAL_REPEAT_WINDOW_MS. */
  readonly signalRepeatWindowMs?: number;
}

/** The failed probes' details, on one line. */
export function describeFailures(state: HealthState): string {
  return state.failures.map((f) => f.detail).join('; ');
}

/**
 * One process's life. The constructor installs the signal and crash handlers; run() takes a
 * ProcessLife from start to stop and resolves with the exit code.
 */
export class ProcessRuntime {
  private currentPhase: ProcessPhase = 'starting';
  private readonly host: ProcessHost;
  /** Set when the start reaches open(): what /readyz asks while running. */
  private life: ProcessLife | null = null;
  private readonly stop = new AbortController();
  private readonly stopRequested: Promise<void>;
  private stopSignal = '';
  private firstSignalAtMs = 0;

  constructor(private readonly options: ProcessRuntimeOptions) {
    this.host = options.host ?? process;
    this.stopRequested = new Promise<void>((resolve) =>
      this.stop.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    this.host.on('SIGTERM', this.onSignal);
    this.host.on('SIGINT', this.onSignal);
    this.host.on('unhandledRejection', (reason: unknown) => this.crash('unhandled_rejection', reason));
    this.host.on('uncaughtException', (err: unknown) => this.crash('uncaught_exception', err));
  }

  get phase(): ProcessPhase {
    return this.currentPhase;
  }

  /** The life of the process, in order; resolves with the exit code, throws a StartupError. */
  async run(life: ProcessLife): Promise<number> {
    await life.listen();
    if (this.options.waitForHealth !== false && !(await this.waitForHealth(life))) return EXIT_CODE.stopped;
    await this.open(life);
    this.currentPhase = 'running';
    life.begin();
    this.options.monitor.start();
    await this.stopRequested;
    return await this.shutDown(life);
  }

  /** Starts the HTTP server (/healthz, /readyz from this runtime, /metrics) and tells a parent its port. */
  async serve(options: Omit<OpsServerOptions, 'readiness' | 'logger'>): Promise<OpsServer> {
    const server = await OpsServer.start({
      ...options,
      readiness: () => this.readiness(),
      logger: this.options.logger,
    });
    reportListeningPort(server.port);
    return server;
  }

  /** What /readyz answers. */
  readiness(): Readiness {
    const health = this.options.monitor.state;
    if (this.currentPhase === 'stopping') return { ready: false, reason: 'shutting down' };
    if (this.currentPhase === 'starting')
      return { ready: false, reason: `starting${health.failures.length > 0 ? `: ${describeFailures(health)}` : ''}` };
    return this.life?.readiness(health) ?? { ready: false, reason: 'starting' };
  }

  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.stop.signal.aborted) {
      if (performance.now() - this.firstSignalAtMs < (this.options.signalRepeatWindowMs ?? SIGNAL_REPEAT_WINDOW_MS))
        return;
      this.options.logger.error(
        { event: 'shutdown_forced', signal, ...this.options.inHand?.() },
        'second signal; exiting without waiting',
      );
      this.host.exit(EXIT_CODE.failed);
      return;
    }
    this.stopSignal = signal;
    this.firstSignalAtMs = performance.now();
    this.stop.abort();
  };

  private crash(event: 'unhandled_rejection' | 'uncaught_exception', err: unknown): void {
    const what = event === 'unhandled_rejection' ? 'unhandled rejection' : 'uncaught exception';
    this.options.logger.fatal({ event, err }, `${what}; exiting`);
    this.host.exit(EXIT_CODE.failed);
  }

  /**
   * Probes until every probe passes. False when a signal came first; throws a StartupError when
   * STARTUP_TIMEOUT_MS passes. Either way what is open is closed first.
   */
  private async waitForHealth(life: ProcessLife): Promise<boolean> {
    const { monitor, startupTimeoutMs, logger } = this.options;
    const state = await monitor.waitUntilHealthy(startupTimeoutMs, this.stop.signal);
    if (this.stop.signal.aborted) {
      logger.info({ signal: this.stopSignal }, 'stopped before it was ready');
      await this.close(life.closing);
      return false;
    }
    if (!state.healthy) {
      await this.close(life.closing);
      throw new StartupError(
        [...new Set(state.failures.map((f) => f.variable))],
        `${describeFailures(state)}; still not ready after STARTUP_TIMEOUT_MS=${startupTimeoutMs} ms`,
      );
    }
    return true;
  }

  /** life.open(); when it throws, what it opened so far is closed before the error goes on. */
  private async open(life: ProcessLife): Promise<void> {
    this.life = life;
    try {
      await life.open();
    } catch (err) {
      await this.close(life.closing);
      throw err;
    }
  }

  /** The graceful stop, bounded by SHUTDOWN_TIMEOUT_MS. */
  private async shutDown(life: ProcessLife): Promise<number> {
    this.currentPhase = 'stopping';
    if (life.stopping(this.stopSignal) === 'abandon') return EXIT_CODE.stopped;
    const force = this.exitAfterShutdownTimeout();
    const failed = await this.close(life.closing);
    clearTimeout(force);
    if (failed > 0) return EXIT_CODE.failed;
    life.stopped();
    return EXIT_CODE.stopped;
  }

  /** SHUTDOWN_TIMEOUT_MS bounds the graceful stop: past it the process exits 1 at once. */
  private exitAfterShutdownTimeout(): NodeJS.Timeout {
    const { logger, shutdownTimeoutMs } = this.options;
    const force = setTimeout(() => {
      logger.error(
        { event: 'shutdown_timed_out', shutdownTimeoutMs, ...this.options.inHand?.() },
        'did not stop within SHUTDOWN_TIMEOUT_MS; exiting',
      );
      this.host.exit(EXIT_CODE.failed);
    }, shutdownTimeoutMs);
    force.unref();
    return force;
  }

  /** Stops the monitor, then runs the closing steps one after the other; returns how many failed. */
  private async close(steps: readonly ClosingStep[]): Promise<number> {
    await this.options.monitor.stop();
    let failed = 0;
    for (const step of steps) {
      try {
        await step.close();
      } catch (err) {
        failed += 1;
        this.options.logger.error({ event: 'closing_step_failed', step: step.name, err }, 'a closing step failed');
      }
    }
    return failed;
  }
}
