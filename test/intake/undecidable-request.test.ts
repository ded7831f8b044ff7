// A stored request that no worker can decide (issue 41, 4.2): the intake's SQL once accepted
// bodies every worker refuses (an amount of 9e18, an expiresAt of 30 February, legs totalling
// 1.8e18). Such a request, inserted here the way the old SQL stored it, must end with a terminal
// `rejected: invalid_request` in the outcome feed and be decided in the intake, so the relay never
// sends it again and a redrive has nothing to park; not fail, be parked as given up, and come back
// after every redrive.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { requestTransfer } from '../../src/intake/intake.ts';
import { redrive } from '../../src/intake/relay.ts';
import { Relay } from '../../src/intake/relay-runtime.ts';
import { settledRead } from '../support/feed.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';

const RESEND_MS = 500;
const newPipeline = pipelinePerTest();

/** Stores a request as the old request_operation()/request_transfer() did, without their checks. */
async function storeAsTheOldSqlDid(p: Pipeline): Promise<string[]> {
  const hash = (c: string) => c.repeat(64);
  await p.db.pg.query(
    `INSERT INTO transfer_requests (operation_id, request_hash, kind, body, from_wallet, to_wallet, amount, currency)
     VALUES ('old-transfer-9e18', $1, 'transfer', NULL, 'w1', 'w2', 9000000000000000000, NULL),
            ('old-hold-feb-30', $2, 'hold', $3::jsonb, 'w1', 'w2', 5, NULL),
            ('old-split-1.8e18', $4, 'split', $5::jsonb, 'w1', NULL, 1800000000000000000, NULL)`,
    [
      hash('a'),
      hash('b'),
      JSON.stringify({
        operationId: 'old-hold-feb-30',
        kind: 'hold',
        from: 'w1',
        to: 'w2',
        amount: '5',
        expiresAt: '2026-02-30T00:00:00Z',
      }),
      hash('c'),
      JSON.stringify({
        operationId: 'old-split-1.8e18',
        kind: 'split',
        from: 'w1',
        legs: [
          { to: 'w2', amount: '900000000000000000' },
          { to: 'w3', amount: '900000000000000000' },
        ],
      }),
    ],
  );
  return ['old-transfer-9e18', 'old-hold-feb-30', 'old-split-1.8e18'];
}

describe('a stored request no worker can decide', () => {
  it('ends with a terminal invalid_request in the feed, decided, never sent again', async () => {
    const p = await newPipeline();
    await p.seed(3, 1_000n);
    const config = loadConfig({
      ...process.env,
      ...p.workerEnv,
      DATABASE_URL: p.db.url,
      JOB_ATTEMPTS_MAX: '1',
      INTAKE_RESEND_AFTER_MS: String(RESEND_MS),
    });
    const relay = new Relay({ config, logger: pino({ level: 'silent' }), publishOutcomes: false });
    await p.startWorker();
    const ops = await storeAsTheOldSqlDid(p);

    // Relay rounds until each has an event in the feed (a rejection, or, on the old code, the
    // relay's give-up after a re-send finds its job failed).
    const kindsOf = async () => {
      const events = await settledRead(p.db.pg, 0n, 10_000);
      return Object.fromEntries(
        ops.map((op) => [op, events.filter((e) => e.operationId === op).map((e) => `${e.kind}:${e.reason}`)]),
      );
    };
    const deadline = Date.now() + 20_000;
    for (;;) {
      await relay.round();
      const kinds = await kindsOf();
      if (Object.values(kinds).every((k) => k.length > 0) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await kindsOf()).toEqual(Object.fromEntries(ops.map((op) => [op, ['rejected:invalid_request']])));

    const { rows } = await p.db.pg.query<{ operation_id: string; decided: boolean; given_up: boolean }>(
      `SELECT operation_id, decided_at IS NOT NULL AS decided, given_up_at IS NOT NULL AS given_up
         FROM transfer_requests ORDER BY operation_id`,
    );
    expect(rows.map((r) => [r.operation_id, r.decided, r.given_up])).toEqual(
      [...ops].sort().map((op) => [op, true, false]),
    );
    const records = await p.db.pg.query<{ operation_id: string; status: string; reason: string }>(
      'SELECT operation_id, status, reason FROM transfers ORDER BY operation_id',
    );
    expect(records.rows).toEqual(
      [...ops].sort().map((op) => ({ operation_id: op, status: 'rejected', reason: 'invalid_request' })),
    );
    expect(await p.debitsOf('old-transfer-9e18')).toBe(0);

    // Decided: the relay has nothing to send however long it waits, and nothing is given up.
    await new Promise((r) => setTimeout(r, RESEND_MS + 100));
    expect((await relay.round()).batch).toMatchObject({ sent: 0, givenUp: 0 });
    expect(await kindsOf()).toEqual(Object.fromEntries(ops.map((op) => [op, ['rejected:invalid_request']])));

    // Once: asked again, the function records nothing more.
    const again = await p.db.pg.query<{ decided: boolean }>(
      "SELECT request_decide_invalid('old-hold-feb-30') AS decided",
    );
    expect(again.rows[0]?.decided).toBe(false);
    expect(await kindsOf()).toEqual(Object.fromEntries(ops.map((op) => [op, ['rejected:invalid_request']])));
  });

  it('only ends a request no worker can decide: asked of a valid one, it records nothing', async () => {
    const p = await newPipeline();
    await requestTransfer(p.db.pg, { operationId: 'valid-1', from: 'w1', to: 'w2', amount: '5' }, 10n ** 15n);
    const asked = await p.db.pg.query<{ decided: boolean }>("SELECT request_decide_invalid('valid-1') AS decided");
    expect(asked.rows[0]?.decided).toBe(false);
    const { rows } = await p.db.pg.query<{ open: boolean }>(
      "SELECT decided_at IS NULL AS open FROM transfer_requests WHERE operation_id = 'valid-1'",
    );
    expect(rows).toEqual([{ open: true }]);
    expect((await p.db.pg.query("SELECT 1 FROM transfers WHERE operation_id = 'valid-1'")).rowCount).toBe(0);
  });

  it('parked by the old code, is decided by its redrive and not parked again', async () => {
    const p = await newPipeline();
    await p.seed(3, 1_000n);
    const [op] = await storeAsTheOldSqlDid(p);
    await p.db.pg.query(
      `UPDATE transfer_requests SET sent_at = now(), send_count = 3, given_up_at = now(), give_up_count = 3,
              give_up_reason = 'job failed for good: invalid_request: amount exceeds the maximum'`,
    );
    await p.startWorker();
    const queues = { queueOf: () => p.queue };
    expect((await redrive(p.db.pg, queues, [op as string])).operationIds).toEqual([op]);

    const deadline = Date.now() + 20_000;
    let events: string[] = [];
    while (Date.now() < deadline) {
      events = (await settledRead(p.db.pg, 0n, 10_000)).filter((e) => e.operationId === op).map((e) => e.kind);
      if (events.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(events).toEqual(['rejected']);
    const { rows } = await p.db.pg.query<{ decided: boolean }>(
      'SELECT decided_at IS NOT NULL AS decided FROM transfer_requests WHERE operation_id = $1',
      [op],
    );
    expect(rows).toEqual([{ decided: true }]);
    // A second redrive finds it decided: nothing to send, nothing parked.
    expect((await redrive(p.db.pg, queues, [op as string])).operationIds).toEqual([]);
  });
});
