// A worked example of the transactional intake and the outcome feed (README.md next to this
// file): a refund service that records a refund in its own table and requests it in the same
// transaction, as a `refund` operation tied to the payment it refunds (so two refunds of one
// payment can never return more than was paid), then learns the outcome from the feed, reading
// on from a cursor it stores itself, and marks the refund settled or refused. Killed at any
// point, it is simply started again.
//
//   DATABASE_URL=… node --import tsx examples/refund-service/refund-service.ts \
//     --refund R1 --original PAYMENT-OP --from wallet-2 [--amount 500] [--wait-ms 30000]
//
// --from is the wallet the refund debits: the original's destination (a transfer's `to`, a
// captured hold's payee, or a split's leg). Without --amount, what is left of the original.
//
// REFUND_SERVICE_CRASH_AFTER_COMMIT=1 makes it SIGKILL itself right after the commit of the
// refund and its request, before it has seen any outcome: the crash the intake exists for.
import { parseArgs } from 'node:util';
import pg from 'pg';
// The package's intake entry, by path in this repository; a service that installed the package
// writes `from 'fenced-transfers/intake'`. It loads neither BullMQ nor ioredis.
import { loadConfig, type OutcomeEvent, readOutcomes, requestOperation } from '../../src/intake-entry.ts';

/** The service's own tables: in the same database, so the refund and its request commit together. */
const SCHEMA_SQL = `
  CREATE TABLE IF NOT EXISTS refund_service_refunds (
    refund_id    TEXT PRIMARY KEY,
    operation_id TEXT NOT NULL UNIQUE,
    original_id  TEXT NOT NULL,
    from_wallet  TEXT NOT NULL,
    -- Asked for, or (absent: what is left of the original) what the decision refunded.
    amount       BIGINT,
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
    original: { type: 'string' },
    from: { type: 'string' },
    amount: { type: 'string' },
    'wait-ms': { type: 'string', default: '30000' },
  },
});
if (!values.refund || !values.original || !values.from) {
  process.stderr.write('usage: refund-service.ts --refund ID --original OP --from W [--amount N] [--wait-ms MS]\n');
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

/** The refund and its request, in one transaction; nothing when the refund is recorded already. */
async function recordRefund(): Promise<'requested' | 'duplicate' | 'recorded before'> {
  return transaction(async (client) => {
    const inserted = await client.query(
      `INSERT INTO refund_service_refunds (refund_id, operation_id, original_id, from_wallet, amount)
       VALUES ($1, $2, $3, $4, $5::bigint) ON CONFLICT (refund_id) DO NOTHING`,
      [refundId, operationId, values.original, values.from, values.amount ?? null],
    );
    if (inserted.rowCount === 0) return 'recorded before';
    await client.query("INSERT INTO refund_service_log (refund_id, what) VALUES ($1, 'requested')", [refundId]);
    return requestOperation(
      client,
      {
        kind: 'refund',
        operationId,
        from: values.from ?? '',
        original: values.original ?? '',
        ...(values.amount === undefined ? {} : { amount: values.amount }),
      },
      config.transferAmountMax,
      config.holdExpiryMaxMs,
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
    // A refused refund (refund_exceeds_original: the payment was refunded already; or
    // insufficient_funds: the payee cannot cover it now) can be asked again under a new refund id.
    if (event.kind !== 'given_up' && event.operation === 'refund') {
      const settled = await client.query(
        `UPDATE refund_service_refunds
            SET state = $2, outcome = $3, feed_position = $4::bigint, settled_at = now(),
                amount = CASE WHEN $3 = 'applied' THEN coalesce(amount, $7::bigint) ELSE amount END
          WHERE operation_id = $1 AND state = 'requested'
            AND original_id = $5 AND from_wallet = $6 AND (amount IS NULL OR amount = $7::bigint)
          RETURNING refund_id`,
        [
          event.operationId,
          event.kind === 'applied' ? 'settled' : 'refused',
          event.kind,
          event.position.toString(),
          event.originalId,
          event.from,
          event.amountMinor?.toString() ?? null,
        ],
      );
      for (const r of settled.rows as { refund_id: string }[]) {
        await client.query('INSERT INTO refund_service_log (refund_id, what) VALUES ($1, $2)', [
          r.refund_id,
          `${event.kind === 'applied' ? 'settled' : 'refused'}: ${event.kind}${event.reason === null ? '' : ` ${event.reason}`}`,
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
