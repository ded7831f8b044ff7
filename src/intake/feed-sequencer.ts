// Keeps the outcome feed moving from every worker: every OUTCOME_SEQUENCE_INTERVAL_MS, one call of
// outcome_feed_sequence() in a statement of its own, which gives the next positions to the events
// decided since (src/intake/outcome-feed.ts says why reading no longer does it). Of all the
// workers and relays one sequences at a time (the others' calls return 0 at once), so the cost is
// one short round trip per interval per process, on a timer, never on a job's path. A failure is
// logged at most once a minute and the timer goes on: the next call, or another process, moves
// the same events.
import type { PrismaClient } from '../db/prisma.ts';
import type { Logger } from '../log/logger.ts';
import { sequenceOutcomeFeed } from './outcome-feed.ts';

/** Failures are logged at most once per this long. */
const FAILURE_LOG_INTERVAL_MS = 60_000;

export class FeedSequencer {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private lastFailureLogMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      // One call at a time: a slow database does not pile calls up.
      this.running ??= this.tick().finally(() => {
        this.running = null;
      });
    }, this.intervalMs);
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
      await sequenceOutcomeFeed(this.prisma);
    } catch (err) {
      const nowMs = performance.now();
      if (nowMs - this.lastFailureLogMs < FAILURE_LOG_INTERVAL_MS) return;
      this.lastFailureLogMs = nowMs;
      this.logger.warn({ event: 'feed_sequence_failed', err }, 'could not sequence the outcome feed; retrying');
    }
  }
}
