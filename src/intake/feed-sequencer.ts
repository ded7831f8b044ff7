// Keeps the outcome feed moving from every worker: every OUTCOME_SEQUENCE_INTERVAL_MS, one call of
// outcome_feed_sequence() in a statement of its own, which gives the next positions to the events
// decided since (src/intake/outcome-feed.ts says why reading no longer does it). Of all the
// workers and relays one sequences at a time (the others' calls return 0 at once), so the cost is
// one short round trip per interval per process, on a timer, never on a job's path. A failure is
// logged at most once a minute and the timer goes on: the next call, or another process, moves
// the same events.
import { PeriodicCall } from '../db/periodic-call.ts';
import type { PrismaClient } from '../db/prisma.ts';
import type { Logger } from '../log/logger.ts';
import { sequenceOutcomeFeed } from './outcome-feed.ts';

export class FeedSequencer {
  private readonly periodic: PeriodicCall;

  constructor(prisma: PrismaClient, intervalMs: number, logger: Logger) {
    this.periodic = new PeriodicCall({
      intervalMs,
      logger,
      failure: { event: 'feed_sequence_failed', message: 'could not sequence the outcome feed; retrying' },
      call: async () => {
        await sequenceOutcomeFeed(prisma);
      },
    });
  }

  start(): void {
    this.periodic.start();
  }

  /** Stops the timer and waits for a call in flight. */
  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
