// `npm run outcomes -- --after N [--follow] [--limit L]`: prints the outcome feed
// (src/intake/outcome-feed.ts) as NDJSON, one event a line, oldest first, from the position after
// N, with the fields of the wire format (docs/reference/wire-format.md#the-outcome-feeds-events);
// amountMinor and positions as decimal strings (no precision lost). --follow keeps polling for new
// events until SIGINT or SIGTERM; --limit stops after L events. Works with the read role's URL
// in DATABASE_URL (`npm run db:read-role`).
// `npm run outcomes -- --prune-before N [--force]` (the owner only): deletes the events before
// position N, but never the newest event: the sequencer continues from the highest position kept,
// and an empty feed would start again at 1. It refuses to delete an event a named cursor
// (outcome_cursors: the relay's publisher) has not read yet, unless --force. A reader that asks
// for a pruned position gets an error naming the first kept one (OutcomeFeedPrunedError).
// Reading never sequences: a decision is in the feed once a worker or a relay has sequenced it
// (OUTCOME_SEQUENCE_INTERVAL_MS).
import type pg from 'pg';
import { loadConfig } from '../config/config.ts';
import { serverErrorOf } from '../db/database-errors.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { ConfigError, UsageError } from '../errors.ts';
import { followOutcomes, type OutcomeEvent, readOutcomes } from '../intake/outcome-feed.ts';
import { outcomeJobDataOf } from '../intake/outcome-publisher.ts';
import { integerFlag, parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = [
  'npm run outcomes -- --after N [--follow] [--limit L] [--poll-ms 500]',
  '       npm run outcomes -- --prune-before N [--force]',
].join('\n');
const PAGE = 1_000;

/**
 * One event as a JSON line: the outcomes queue's job data (bigints as decimal strings), so the
 * command and the queue name every field alike.
 */
const outcomeLine = (e: OutcomeEvent): string => JSON.stringify(outcomeJobDataOf(e));

function positionFlag(value: string, flag: string): bigint {
  if (!/^\d{1,19}$/.test(value) || BigInt(value) > 2n ** 63n - 1n)
    throw new UsageError(`${flag} must be a position (a whole number, 0 or more), got ${JSON.stringify(value)}`);
  return BigInt(value);
}

/** The sequencer's lock (the intake-and-outcome-feed migration): pruning waits for a running sequencer. */
const SEQUENCER_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('outcome_feed:sequencer', 0))";
/** The newest event always stays: the next position is computed from it. */
const PRUNE_SQL = `
  DELETE FROM outcome_events
   WHERE position < $1::bigint
     AND position < (SELECT max(position) FROM outcome_events)`;

/** Cursors still behind the events a prune before `before` would delete, lowest first. */
const UNREAD_CURSORS_SQL = `
  SELECT name, position::text AS position FROM outcome_cursors
   WHERE position < $1::bigint - 1 ORDER BY position, name`;

async function refusePruningUnread(client: pg.ClientBase, before: bigint): Promise<void> {
  const { rows } = await client.query<{ name: string; position: string }>(UNREAD_CURSORS_SQL, [before.toString()]);
  const behind = rows[0];
  if (behind === undefined) return;
  throw new UsageError(
    `--prune-before ${before} would delete events cursor ${JSON.stringify(behind.name)} has not read (it is at ${behind.position}${rows.length > 1 ? `, ${rows.length - 1} more cursors behind too` : ''}): prune before ${BigInt(behind.position) + 1n} at most, or add --force`,
  );
}

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      after: { type: 'string' },
      follow: { type: 'boolean', default: false },
      limit: { type: 'string' },
      'poll-ms': { type: 'string', default: '500' },
      'prune-before': { type: 'string' },
      force: { type: 'boolean', default: false },
    },
    USAGE,
  );
  if ((values.after === undefined) === (values['prune-before'] === undefined))
    throw new UsageError(`choose one of --after, --prune-before\nusage: ${USAGE}`);
  const config = loadConfig();
  const pool = createPool({ ...config, dbPoolMax: 1 });
  try {
    if (values['prune-before'] !== undefined) {
      const before = positionFlag(values['prune-before'], '--prune-before');
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(SEQUENCER_LOCK_SQL);
        if (values.force !== true) await refusePruningUnread(client, before);
        const result = await client.query(PRUNE_SQL, [before.toString()]);
        const { rows } = await client.query<{ first: string | null; last: string | null }>(
          'SELECT min(position)::text AS first, max(position)::text AS last FROM outcome_events',
        );
        await client.query('COMMIT');
        process.stdout.write(
          `${JSON.stringify({ pruned: result.rowCount ?? 0, firstKept: rows[0]?.first ?? null, last: rows[0]?.last ?? null })}\n`,
        );
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        if (serverErrorOf(err)?.sqlState === '42501')
          throw new ConfigError(
            'DATABASE_URL',
            "--prune-before needs the owner (the read role may only read the feed and wallets' history)",
          );
        throw err;
      } finally {
        client.release();
      }
      return;
    }
    const after = positionFlag(values.after ?? '', '--after');
    const limit = values.limit === undefined ? Number.POSITIVE_INFINITY : integerFlag(values.limit, '--limit', 1);
    let printed = 0;
    if (values.follow === true) {
      const stop = new AbortController();
      for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort());
      const pollMs = integerFlag(values['poll-ms'] ?? '500', '--poll-ms', 10, 60_000);
      for await (const event of followOutcomes(pool, after, { pollMs, signal: stop.signal, limit: PAGE })) {
        process.stdout.write(`${outcomeLine(event)}\n`);
        printed += 1;
        if (printed >= limit) break;
      }
      return;
    }
    let position = after;
    while (printed < limit) {
      const events = await readOutcomes(pool, position, Math.min(PAGE, limit - printed));
      for (const event of events) {
        process.stdout.write(`${outcomeLine(event)}\n`);
        position = event.position;
      }
      printed += events.length;
      if (events.length === 0) break;
    }
  } finally {
    await endPool(pool);
  }
});
