// Reading the outcome feed in a test once what has been decided is in it: reading never sequences,
// and the workers and relays that do (src/intake/feed-sequencer.ts, the publisher) may not be
// running, or may be in the middle of it. So the test sequences too, in statements of its own.
import type pg from 'pg';
import { type OutcomeEvent, readOutcomes, sequenceOutcomeFeed } from '../../src/intake/outcome-feed.ts';

/**
 * Reads after `after` once every event pending at the call has its position, sequencing here or
 * waiting for the sequencer that holds the lock: beside running workers and relays (which
 * sequence on their own, and make a call here return 0 while they do) one sequencing call can
 * return before their positions commit. Events a transaction commits during the call may or may
 * not be in the answer.
 */
export async function settledRead(
  pool: pg.Pool,
  after: bigint,
  limit?: number,
  timeoutMs = 10_000,
): Promise<OutcomeEvent[]> {
  const { rows } = await pool.query<{ last: string | null }>('SELECT max(id)::text AS last FROM outcome_pending');
  const last = rows[0]?.last ?? null;
  const deadline = Date.now() + timeoutMs;
  while (last !== null) {
    await sequenceOutcomeFeed(pool);
    const left = await pool.query('SELECT 1 FROM outcome_pending WHERE id <= $1::bigint LIMIT 1', [last]);
    if (left.rowCount === 0) break;
    if (Date.now() > deadline)
      throw new Error(`outcome feed: events up to pending id ${last} not sequenced in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return readOutcomes(pool, after, limit);
}
