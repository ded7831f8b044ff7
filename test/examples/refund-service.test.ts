// The worked example (examples/refund-service/): a service records a refund and requests it (a
// `refund` tied to the payment it refunds) in one transaction, and is killed right after the
// commit. The relay and a worker then decide it; the service, started again, learns the outcome
// from the feed (its own cursor) and settles the refund, once. Started a third time it changes
// nothing. A second refund takes what is left of the payment, and a third is refused: together
// they never return more than was paid.

import type pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { relayBatch } from '../../src/intake/relay.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { TransferQueues } from '../../src/queue/producer.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';

const EXAMPLE = 'examples/refund-service/refund-service.ts';
const PAYMENT = 'pay-17';
const ARGS = ['--refund', 'R-17', '--original', PAYMENT, '--from', 'w2', '--amount', '100', '--wait-ms', '20000'];
const OPERATION = 'refund:R-17';

let p: Pipeline;
beforeAll(async () => {
  p = await createPipeline();
  await p.seed(2, 1_000n, 'w');
  // The payment being refunded: 250 from w1 to w2.
  await applyTransfers(p.db.prisma, [
    {
      request: { operationId: PAYMENT, from: 'w1', to: 'w2', amountMinor: 250n, currency: null },
      fence: 1n,
      leaseId: leaseIdFor(1n),
    },
  ]);
});
afterAll(async () => {
  await p?.close();
});

async function count(pool: pg.Pool, sql: string): Promise<number> {
  return Number((await pool.query<{ n: string }>(sql, [OPERATION])).rows[0]?.n);
}

/** Everything the example and the pipeline wrote, to compare before and after a run. */
async function snapshot(pool: pg.Pool): Promise<unknown> {
  const q = async (sql: string) => (await pool.query(sql)).rows;
  return {
    refunds: await q('SELECT * FROM refund_service_refunds ORDER BY refund_id'),
    log: await q('SELECT refund_id, what FROM refund_service_log ORDER BY id'),
    cursor: await q('SELECT * FROM refund_service_cursor'),
    requests: await q('SELECT * FROM transfer_requests'),
    transfers: await q('SELECT * FROM transfers'),
    ledger: await q('SELECT * FROM ledger_entries ORDER BY id'),
    events: await q('SELECT * FROM outcome_events ORDER BY position'),
    balances: await q('SELECT id, balance FROM wallets ORDER BY id'),
  };
}

it('a refund committed with its request survives SIGKILL, is relayed, decided, and settled once on restart', async () => {
  const env = { DATABASE_URL: p.db.url, QUEUE_NAME: p.config.queueName };
  const crashed = await runSource(EXAMPLE, ARGS, { ...env, REFUND_SERVICE_CRASH_AFTER_COMMIT: '1' });
  expect(crashed.signal, describeRun(crashed)).toBe('SIGKILL');
  expect((await p.db.pg.query("SELECT state FROM refund_service_refunds WHERE refund_id = 'R-17'")).rows).toEqual([
    { state: 'requested' },
  ]);
  expect(
    await count(p.db.pg, 'SELECT count(*) AS n FROM transfer_requests WHERE operation_id = $1 AND decided_at IS NULL'),
  ).toBe(1);
  expect(await count(p.db.pg, 'SELECT count(*) AS n FROM transfers WHERE operation_id = $1')).toBe(0);

  // The relay (in this process) and a worker.
  await p.startWorker();
  await relayUntilDecided(OPERATION);

  const restarted = await runSource(EXAMPLE, ARGS, env);
  expect(restarted.code, describeRun(restarted)).toBe(0);
  expect(lastJsonLine(restarted)).toMatchObject({
    refund: 'R-17',
    intake: 'recorded before',
    state: 'settled',
    outcome: 'applied',
  });
  expect(await count(p.db.pg, 'SELECT count(*) AS n FROM transfers WHERE operation_id = $1')).toBe(1);
  expect(await count(p.db.pg, 'SELECT count(*) AS n FROM ledger_entries WHERE operation_id = $1')).toBe(2);
  expect(await count(p.db.pg, 'SELECT count(*) AS n FROM outcome_events WHERE operation_id = $1')).toBe(1);
  expect(
    (await p.db.pg.query("SELECT what FROM refund_service_log WHERE refund_id = 'R-17' ORDER BY id")).rows,
  ).toEqual([{ what: 'requested' }, { what: 'settled: applied' }]);
  expect(await p.balances()).toMatchObject({ w1: 850n, w2: 1_150n });
  expect(
    (await p.db.pg.query('SELECT kind, original_id, amount::text FROM transfers WHERE operation_id = $1', [OPERATION]))
      .rows,
  ).toEqual([{ kind: 'refund', original_id: PAYMENT, amount: '100' }]);

  const before = await snapshot(p.db.pg);
  const again = await runSource(EXAMPLE, ARGS, env);
  expect(again.code, describeRun(again)).toBe(0);
  expect(lastJsonLine(again)).toMatchObject({ intake: 'recorded before', state: 'settled', outcome: 'applied' });
  expect(await snapshot(p.db.pg)).toEqual(before);

  // What is left (no --amount), then one more: refused, the payment is refunded in full.
  const rest = ['--refund', 'R-18', '--original', PAYMENT, '--from', 'w2', '--wait-ms', '20000'];
  const over = ['--refund', 'R-19', '--original', PAYMENT, '--from', 'w2', '--amount', '1', '--wait-ms', '20000'];
  for (const [args, op] of [
    [rest, 'refund:R-18'],
    [over, 'refund:R-19'],
  ] as const) {
    const run = runSource(EXAMPLE, [...args], env);
    await relayUntilDecided(op);
    const done = await run;
    expect(done.code, describeRun(done)).toBe(0);
  }
  expect(
    (await p.db.pg.query('SELECT refund_id, state, amount::text FROM refund_service_refunds ORDER BY refund_id')).rows,
  ).toEqual([
    { refund_id: 'R-17', state: 'settled', amount: '100' },
    { refund_id: 'R-18', state: 'settled', amount: '150' },
    { refund_id: 'R-19', state: 'refused', amount: '1' },
  ]);
  expect(
    (await p.db.pg.query("SELECT what FROM refund_service_log WHERE refund_id = 'R-19' ORDER BY id")).rows,
  ).toEqual([{ what: 'requested' }, { what: 'refused: rejected refund_exceeds_original' }]);
  expect(await p.balances()).toMatchObject({ w1: 1_000n, w2: 1_000n });
});

/** Runs relay rounds (in this process) until the operation's request is decided. */
async function relayUntilDecided(operationId: string): Promise<void> {
  const connection = bullmqConnection(p.config);
  const queues = TransferQueues.open(connection, p.config, p.config.jobAttemptsMax);
  const open = async () =>
    Number(
      (
        await p.db.pg.query<{ n: string }>(
          'SELECT count(*) AS n FROM transfer_requests WHERE operation_id = $1 AND decided_at IS NULL',
          [operationId],
        )
      ).rows[0]?.n,
    );
  try {
    const deadline = Date.now() + 30_000;
    // A request not yet committed counts as open: its service is starting.
    while (
      (await open()) > 0 ||
      Number(
        (
          await p.db.pg.query<{ n: string }>('SELECT count(*) AS n FROM transfers WHERE operation_id = $1', [
            operationId,
          ])
        ).rows[0]?.n,
      ) === 0
    ) {
      if (Date.now() > deadline) throw new Error(`${operationId} was not decided within 30 s`);
      await relayBatch(p.db.pg, queues, { batchMax: 100, resendAfterMs: 10_000 });
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await queues.close();
    connection.disconnect();
  }
}
