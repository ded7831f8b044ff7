// Waiting until a session waits on a heavyweight lock (a row lock, an advisory lock, another
// transaction's uncommitted index entry): how the race tests know the second party has reached
// the point where it must wait, before they let the first one go.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';

/** Resolves once backend `pid` waits on a lock; throws after `timeoutMs` without. */
export async function waitUntilBlocked(sql: Pick<pg.Pool, 'query'>, pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const { rows } = await sql.query<{ waiting: boolean }>(
      "SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1",
      [pid],
    );
    if (rows[0]?.waiting === true) return;
    await sleep(5);
  }
  throw new Error(`session ${pid} never waited on a lock within ${timeoutMs} ms`);
}
