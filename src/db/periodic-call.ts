// One short database call on a timer, off every job's path: what each worker runs to keep the
// outcome feed moving (src/intake/feed-sequencer.ts) and to release expired holds
// (src/ledger/hold-sweeper.ts). One call at a time, so a slow database does not pile calls up;
// a failure is logged at most once a minute and the timer goes on (the next call, or another
// process, does the same work). stop() waits for a call in flight.
import type { Logger } from '../log/logger.ts';

/** Failures are logged at most once per this long. */
const FAILURE_LOG_INTERVAL_MS = 60_000;

export interface PeriodicCallOptions {
  readonly intervalMs: number;
  readonly logger: Logger;
  /** The log line of a failure: its `event` and message. */
  readonly failure: { readonly event: string; readonly message: string };
  readonly call: () => Promise<void>;
}

export class PeriodicCall {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastFailureLogMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: PeriodicCallOptions) {}

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      this.running ??= this.tick().finally(() => {
        this.running = null;
      });
    }, this.options.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a call in flight. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  private async tick(): Promise<void> {
    try {
      await this.options.call();
    } catch (err) {
      const nowMs = performance.now();
      if (nowMs - this.lastFailureLogMs < FAILURE_LOG_INTERVAL_MS) return;
      this.lastFailureLogMs = nowMs;
      this.options.logger.warn({ event: this.options.failure.event, err }, this.options.failure.message);
    }
  }
}
