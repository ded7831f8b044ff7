// A worked example of the transactional intake and the outcome feed (README.md next to this
// file): a refund service that records a refund in its own table and requests its transfer in
// the same transaction, then learns the outcome from the feed, reading on from a cursor it
// stores itself, and marks the refund settled. Killed at any point, it is simply started again.
//
//   DATABASE_URL=… node --import tsx examples/refund-service/refund-service.ts \
//     --refund R1 --from wallet-1 --to wallet-2 --amount 500 [--wait-ms 30000]
//
// REFUND_SERVICE_CRASH_AFTER_COMMIT=1 makes it SIGKILL itself right after the commit of the
// refund and its request, before it has seen any outcome: the crash the intake exists for.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.ts';
import { requestTransfer } from '../../src/intake/intake.ts';
import { type OutcomeEvent, readOutcomes } from '../../src/intake/outcome-feed.ts';

/** The service's own tables: in the same database, so the refund and its request commit together. */
const SCHEMA_SQL = `
  CREATE TABLE IF NOT EXISTS refund_service_refunds (
    refund_id    TEXT PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE,
    from_wallet  TEXT NOT NULL,
    to_wallet    TEXT NOT NULL,
    amount       BIGINT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'requested' CHECK (state IN ('requested', 'settled', 'refused')),
    outcome      TEXT,
    feed_position BIGINT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at   TIMESTAMPTZ
  );
  CREATE TABLE IF NOT EXISTS refund_service_log (
    id        BIGSERIAL PRIMARY KEY,
    refund_id TEXT NOT NULL,
    what      TEXT NOT NULL,
    at        TIMESTAMPTZ NOT NULL DEFAULT now()
  );
  CREATE TABLE IF NOT EXISTS refund_service_cursor (
    name     TEXT PRIMARY KEY,
    position BIGINT NOT NULL
  );
  INSERT INTO refund_service_cursor (name, position) VALUES ('outcomes', 0) ON CONFLICT (name) DO NOTHING`;

const { values } = parseArgs({
  options: {
    refund: { type: 'string' },
    from: { type: 'string' },
    to: { type: 'string' },
    amount: { type: 'string' },
    currency: { type: 'string' },
    'wait-ms': { type: 'string', default: '30000' },
  },
});
if (!values.refund || !values.from || !values.to || !values.amount) {
  process.stderr.write(
    'usage: refund-service.ts --refund ID --from W --to W --amount N [--currency EUR] [--wait-ms MS]\n',
  );
  process.exit(2);
}
const refundId = values.refund;
const operationId = `refund:${refundId}`;
const config = loadConfig();
const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 2 });
pool.on('error', () => undefined);

async function transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** The refund and its transfer's request, in one transaction; nothing when the refund is recorded already. */
async function recordRefund(): Promise<'requested' | 'duplicate' | 'recorded before'> {
  return transaction(async (client) => {
    const inserted = await client.query(
      `INSERT INTO refund_service_refunds (refund_id, operation_id, from_wallet, to_wallet, amount)
       VALUES ($1, $2, $3, $4, $5::bigint) ON CONFLICT (refund_id) DO NOTHING`,
      [refundId, operationId, values.from, values.to, values.amount],
    );
    if (inserted.rowCount === 0) return 'recorded before';
    await client.query("INSERT INTO refund_service_log (refund_id, what) VALUES ($1, 'requested')", [refundId]);
    return requestTransfer(
      client,
      {
        operationId,
        from: values.from ?? '',
        to: values.to ?? '',
        amount: values.amount ?? '',
        ...(values.currency === undefined ? {} : { currency: values.currency }),
      },
      config.transferAmountMax,
    );
  });
}

/** One event, with the cursor moved past it in the same transaction: applied once, whatever crashes. */
async function apply(event: OutcomeEvent): Promise<void> {
  await transaction(async (client) => {
    const { rows } = await client.query<{ position: string }>(
      "SELECT position::text AS position FROM refund_service_cursor WHERE name = 'outcomes' FOR UPDATE",
    );
    if (BigInt(rows[0]?.position ?? '0') >= event.position) return; // another instance got here first
    // given_up: still open (npm run redrive). The body must be the refund's own: should another
    // producer reuse the operation id through BullMQ straight, its decision is not this refund's,
    // and the feed follows it with a `conflict` event that carries this refund's body.
    if (event.kind !== 'given_up') {
      const settled = await client.query(
        `UPDATE refund_service_refunds
            SET state = $2, outcome = $3, feed_position = $4::bigint, settled_at = now()
          WHERE operation_id = $1 AND state = 'requested'
            AND from_wallet = $5 AND to_wallet = $6 AND amount = $7::bigint
          RETURNING refund_id`,
        [
          event.operationId,
          event.kind === 'applied' ? 'settled' : 'refused',
          event.kind,
          event.position.toString(),
          event.from,
          event.to,
          event.amountMinor?.toString() ?? null,
        ],
      );
      for (const r of settled.rows as { refund_id: string }[]) {
        await client.query('INSERT INTO refund_service_log (refund_id, what) VALUES ($1, $2)', [
          r.refund_id,
          `${event.kind === 'applied' ? 'settled' : 'refused'}: ${event.kind}`,
        ]);
      }
    }
    await client.query("UPDATE refund_service_cursor SET position = $1::bigint WHERE name = 'outcomes'", [
      event.position.toString(),
    ]);
  });
}

async function cursor(): Promise<bigint> {
  const { rows } = await pool.query<{ position: string }>(
    "SELECT position::text AS position FROM refund_service_cursor WHERE name = 'outcomes'",
  );
  return BigInt(rows[0]?.position ?? '0');
}

async function refund(): Promise<{ state: string; outcome: string | null }> {
  const { rows } = await pool.query<{ state: string; outcome: string | null }>(
    'SELECT state, outcome FROM refund_service_refunds WHERE refund_id = $1',
    [refundId],
  );
  if (rows[0] === undefined) throw new Error(`refund ${refundId} is not recorded`);
  return rows[0];
}

try {
  await pool.query(SCHEMA_SQL);
  const intake = await recordRefund();
  if (process.env.REFUND_SERVICE_CRASH_AFTER_COMMIT === '1') process.kill(process.pid, 'SIGKILL');

  const deadline = Date.now() + Number(values['wait-ms']);
  // Read on from the stored cursor until this refund is no longer waiting (or the wait is over).
  while ((await refund()).state === 'requested') {
    const events = await readOutcomes(pool, await cursor(), 1_000);
    for (const event of events) await apply(event);
    if (events.length > 0) continue;
    if (Date.now() > deadline) {
      process.stderr.write(`refund ${refundId}: no outcome within ${values['wait-ms']} ms; run again later\n`);
      process.exitCode = 3;
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const now = await refund();
  process.stdout.write(
    `${JSON.stringify({ refund: refundId, operationId, intake, state: now.state, outcome: now.outcome, cursor: (await cursor()).toString() })}\n`,
  );
} finally {
  await pool.end();
}
