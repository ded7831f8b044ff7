// Reading the outcome feed in a test the way a deployment sees it: the workers and relays that
// sequence it (src/intake/feed-sequencer.ts, the publisher) are not running in a test of the SQL,
// so the test sequences first, in statements of their own, then reads.
import type pg from 'pg';
import { type OutcomeEvent, readOutcomes, sequenceOutcomeFeed } from '../../src/intake/outcome-feed.ts';

/** Sequences every committed pending event (as a worker's timer would), then reads after `after`. */
export async function sequencedRead(pool: pg.Pool, after: bigint, limit?: number): Promise<OutcomeEvent[]> {
  while ((await sequenceOutcomeFeed(pool)) > 0) {}
  return readOutcomes(pool, after, limit);
}
