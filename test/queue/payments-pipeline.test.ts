// Payments end to end on real Redis and PostgreSQL: jobs of every kind sent to BullMQ straight
// and requested through the intake (relayed), decided by workers logged in as the worker role,
// their events in the outcome feed, and a hold left alone released by the workers' sweep.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { requestOperations } from '../../src/intake/intake.ts';
import { Relay } from '../../src/intake/relay-runtime.ts';
import type { OperationWire } from '../../src/ledger/transfer-request.ts';
import { settledRead } from '../support/feed.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';

const newPipeline = pipelinePerTest();
const silent = pino({ level: 'silent' });

async function send(p: Pipeline, wire: OperationWire): Promise<unknown> {
  return p.result(await p.addRaw(wire), 20_000);
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One operation requested through the intake and relayed until its record is there. */
async function decidedThroughIntake(p: Pipeline, wire: OperationWire): Promise<void> {
  const config = loadConfig({ ...process.env, ...p.workerEnv, DATABASE_URL: p.db.url });
  const relay = new Relay({ config, logger: silent, publishOutcomes: false });
  expect(await requestOperations(p.db.pg, [wire], config.transferAmountMax, config.holdExpiryMaxMs)).toEqual([
    'requested',
  ]);
  try {
    await waitFor(`${wire.operationId} decided through the intake`, async () => {
      await relay.round();
      const { rows } = await p.db.pg.query('SELECT 1 FROM transfers WHERE operation_id = $1', [wire.operationId]);
      return rows.length === 1;
    });
  } finally {
    await relay.stop();
  }
}

async function hold(p: Pipeline, id: string) {
  const { rows } = await p.db.pg.query<{ state: string; captured: string; released: string }>(
    'SELECT state, captured::text, released::text FROM holds WHERE hold_id = $1',
    [id],
  );
  return rows[0];
}

describe('payments through BullMQ straight', () => {
  it('a hold, its partial capture, a refund of the capture and a split decide once each, duplicates answered', async () => {
    const p = await newPipeline({ HOLD_SWEEP_INTERVAL_MS: '100' });
    await p.seed(4, 1_000n);
    await p.startWorker();

    expect(
      await send(p, { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: '300', expiresInMs: 60_000 }),
    ).toMatchObject({ outcome: 'applied' });
    // Held money has left the wallet: a transfer of more than what is left is refused.
    expect(await send(p, { operationId: 't1', from: 'w1', to: 'w3', amount: '701' })).toMatchObject({
      outcome: 'rejected',
      reason: 'insufficient_funds',
    });
    expect(await send(p, { kind: 'capture', operationId: 'c1', from: 'w1', hold: 'h1', amount: '200' })).toMatchObject({
      outcome: 'applied',
    });
    expect(await send(p, { kind: 'void', operationId: 'v1', from: 'w1', hold: 'h1' })).toMatchObject({
      outcome: 'rejected',
      reason: 'hold_already_captured',
    });
    // The capture delivered again: answered from the record, nothing moves.
    expect(await send(p, { kind: 'capture', operationId: 'c1', from: 'w1', hold: 'h1', amount: '200' })).toMatchObject({
      outcome: 'duplicate',
    });
    expect(await send(p, { kind: 'capture', operationId: 'c1', from: 'w1', hold: 'h1', amount: '100' })).toMatchObject({
      outcome: 'conflict',
    });
    expect(
      await send(p, { kind: 'refund', operationId: 'r1', from: 'w2', original: 'h1', amount: '50' }),
    ).toMatchObject({ outcome: 'applied' });
    expect(await send(p, { kind: 'refund', operationId: 'r2', from: 'w2', original: 'h1' })).toMatchObject({
      outcome: 'applied',
    });
    expect(await send(p, { kind: 'refund', operationId: 'r3', from: 'w2', original: 'h1', amount: '1' })).toMatchObject(
      { outcome: 'rejected', reason: 'refund_exceeds_original' },
    );
    expect(
      await send(p, {
        kind: 'split',
        operationId: 's1',
        from: 'w3',
        legs: [
          { to: 'w1', amount: '97' },
          { to: 'w4', amount: '3' },
        ],
      }),
    ).toMatchObject({ outcome: 'applied' });

    expect(await hold(p, 'h1')).toEqual({ state: 'captured', captured: '200', released: '100' });
    const balances = await p.balances();
    // w1: 1000 - 300 held + 100 released + 200 refunded + 97 from the split.
    expect(balances.w1).toBe(1_097n);
    expect(balances.w2).toBe(1_000n);
    expect(balances.w3).toBe(900n);
    expect(balances.w4).toBe(1_003n);
    // Nothing left held: an empty holding account is not listed.
    expect(balances['$held:w1']).toBeUndefined();
  });

  it("a hold nobody decides is released by the workers' sweep, with an expired event, and a late capture is refused", async () => {
    const p = await newPipeline({ HOLD_SWEEP_INTERVAL_MS: '100' });
    await p.seed(2, 1_000n);
    await p.startWorker();
    expect(
      await send(p, { kind: 'hold', operationId: 'h-exp', from: 'w1', to: 'w2', amount: '400', expiresInMs: 1_000 }),
    ).toMatchObject({ outcome: 'applied' });
    expect((await p.balances()).w1).toBe(600n);
    await waitFor('the sweep to release the hold', async () => (await hold(p, 'h-exp'))?.state === 'expired', 10_000);
    expect(await hold(p, 'h-exp')).toEqual({ state: 'expired', captured: '0', released: '400' });
    expect((await p.balances()).w1).toBe(1_000n);
    expect(await send(p, { kind: 'capture', operationId: 'c-late', from: 'w1', hold: 'h-exp' })).toMatchObject({
      outcome: 'rejected',
      reason: 'hold_expired',
    });
    await waitFor('the feed to show the expiry', async () =>
      (await settledRead(p.db.pg, 0n, 100)).some((e) => e.kind === 'expired' && e.operationId === 'h-exp'),
    );
    const events = (await settledRead(p.db.pg, 0n, 100)).filter((e) => e.operationId === 'h-exp');
    expect(events.map((e) => [e.kind, e.operation, e.amountMinor])).toEqual([
      ['applied', 'hold', 400n],
      ['expired', 'hold', 400n],
    ]);
    expect((await p.metrics()).holds_expired).toBeGreaterThan(0);
  });
});

describe('payments through the intake', () => {
  it('every kind requested in one producer transaction is relayed, decided once and in the feed with its body', async () => {
    const p = await newPipeline({ HOLD_SWEEP_INTERVAL_MS: '100' });
    await p.seed(4, 1_000n);
    await p.startWorker();
    const config = loadConfig({ ...process.env, ...p.workerEnv, DATABASE_URL: p.db.url });
    const relay = new Relay({ config, logger: silent, publishOutcomes: false });
    const first: OperationWire[] = [
      { kind: 'hold', operationId: 'ih1', from: 'w1', to: 'w2', amount: '100', expiresInMs: 60_000 },
      { kind: 'hold', operationId: 'ih2', from: 'w1', to: 'w3', amount: '50', expiresInMs: 60_000 },
      { operationId: 'it1', from: 'w4', to: 'w3', amount: '10' },
      {
        kind: 'split',
        operationId: 'is1',
        from: 'w4',
        legs: [
          { to: 'w1', amount: '5' },
          { to: 'w2', amount: '5' },
        ],
      },
    ];
    const client = await p.db.pg.connect();
    try {
      await client.query('BEGIN');
      expect(await requestOperations(client, first, config.transferAmountMax, config.holdExpiryMaxMs)).toEqual([
        'requested',
        'requested',
        'requested',
        'requested',
      ]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const decided = async (ops: string[]) => {
      const { rows } = await p.db.pg.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM transfers WHERE operation_id = ANY($1)',
        [ops],
      );
      return rows[0]?.n === ops.length;
    };
    try {
      await waitFor('the first requests decided', async () => {
        await relay.round();
        return decided(['ih1', 'ih2', 'it1', 'is1']);
      });
      const second: OperationWire[] = [
        { kind: 'capture', operationId: 'ic1', from: 'w1', hold: 'ih1' },
        { kind: 'void', operationId: 'iv1', from: 'w1', hold: 'ih2' },
        { kind: 'refund', operationId: 'ir1', from: 'w3', original: 'it1', amount: '4' },
      ];
      expect(await requestOperations(p.db.pg, second, config.transferAmountMax, config.holdExpiryMaxMs)).toEqual([
        'requested',
        'requested',
        'requested',
      ]);
      // The same request again is a duplicate; another body under a used id is a conflict.
      expect(
        await requestOperations(p.db.pg, second.slice(0, 1), config.transferAmountMax, config.holdExpiryMaxMs),
      ).toEqual(['duplicate']);
      await expect(
        requestOperations(
          p.db.pg,
          [{ kind: 'capture', operationId: 'ic1', from: 'w1', hold: 'ih1', amount: '1' }],
          config.transferAmountMax,
          config.holdExpiryMaxMs,
        ),
      ).rejects.toThrow(/conflict/);
      await waitFor('the second requests decided', async () => {
        await relay.round();
        return decided(['ic1', 'iv1', 'ir1']);
      });
    } finally {
      await relay.stop();
    }
    const { rows } = await p.db.pg.query<{ operation_id: string; kind: string; status: string; amount: string }>(
      "SELECT operation_id, kind, status, amount::text FROM transfers WHERE operation_id LIKE 'i%' ORDER BY operation_id",
    );
    expect(rows).toEqual([
      { operation_id: 'ic1', kind: 'capture', status: 'applied', amount: '100' },
      { operation_id: 'ih1', kind: 'hold', status: 'applied', amount: '100' },
      { operation_id: 'ih2', kind: 'hold', status: 'applied', amount: '50' },
      { operation_id: 'ir1', kind: 'refund', status: 'applied', amount: '4' },
      { operation_id: 'is1', kind: 'split', status: 'applied', amount: '10' },
      { operation_id: 'it1', kind: 'transfer', status: 'applied', amount: '10' },
      { operation_id: 'iv1', kind: 'void', status: 'applied', amount: '50' },
    ]);
    const balances = await p.balances();
    expect(balances).toMatchObject({ w1: 905n, w2: 1_105n, w3: 1_006n, w4: 984n });
    expect(balances['$held:w1']).toBeUndefined();
    await waitFor('every decision in the feed', async () => (await settledRead(p.db.pg, 0n, 100)).length >= 7);
    const events = await settledRead(p.db.pg, 0n, 100);
    const split = events.find((e) => e.operationId === 'is1');
    expect(split).toMatchObject({ kind: 'applied', operation: 'split', to: null, amountMinor: 10n });
    expect(split?.detail).toEqual({
      legs: [
        { to: 'w1', amount: '5' },
        { to: 'w2', amount: '5' },
      ],
    });
    expect(events.find((e) => e.operationId === 'ic1')).toMatchObject({
      operation: 'capture',
      originalId: 'ih1',
      to: 'w2',
      amountMinor: 100n,
      detail: { released: '0' },
    });
  });
});

describe('credit limits through both doors', () => {
  it('a credit_limit sent straight and one requested through the intake set the limit the next debit is held to', async () => {
    const p = await newPipeline();
    await p.seed(2, 100n);
    await p.startWorker();
    expect(await send(p, { kind: 'credit_limit', operationId: 'l1', from: 'w1', limit: '400' })).toMatchObject({
      outcome: 'applied',
    });
    expect(await send(p, { operationId: 't1', from: 'w1', to: 'w2', amount: '450' })).toMatchObject({
      outcome: 'applied',
    });
    expect(await send(p, { kind: 'credit_limit', operationId: 'l2', from: 'w1', limit: '349' })).toMatchObject({
      outcome: 'rejected',
      reason: 'limit_below_used',
    });
    expect(await send(p, { kind: 'credit_limit', operationId: 'l1', from: 'w1', limit: '400' })).toMatchObject({
      outcome: 'duplicate',
    });
    await decidedThroughIntake(p, { kind: 'credit_limit', operationId: 'il1', from: 'w1', limit: '350' });
    // At its new limit, w1 (at -350) can spend nothing more.
    expect(await send(p, { operationId: 't2', from: 'w1', to: 'w2', amount: '1' })).toMatchObject({
      outcome: 'rejected',
      reason: 'insufficient_funds',
    });
    const { rows } = await p.db.pg.query<{ credit_limit: string; balance: string }>(
      "SELECT credit_limit::text, balance::text FROM wallets WHERE id = 'w1'",
    );
    expect(rows).toEqual([{ credit_limit: '350', balance: '-350' }]);
    await waitFor('the credit limits in the feed', async () =>
      (await settledRead(p.db.pg, 0n, 100)).some((e) => e.operationId === 'il1'),
    );
    const events = (await settledRead(p.db.pg, 0n, 100)).filter((e) => e.operation === 'credit_limit');
    expect(events.map((e) => [e.operationId, e.kind, e.reason, e.amountMinor, e.detail])).toEqual([
      ['l1', 'applied', null, 400n, { creditLimit: '400', previousCreditLimit: '0', used: '0' }],
      ['l2', 'rejected', 'limit_below_used', 349n, { creditLimit: '349', previousCreditLimit: '400', used: '350' }],
      ['il1', 'applied', null, 350n, { creditLimit: '350', previousCreditLimit: '400', used: '350' }],
    ]);
  });
});

describe('deposits and withdrawals through both doors', () => {
  it('a deposit sent straight and a withdrawal requested through the intake post against the settlement account', async () => {
    const p = await newPipeline();
    await p.seed(2, 100n);
    await p.startWorker();
    expect(
      await send(p, {
        kind: 'deposit',
        operationId: 'd1',
        to: 'w1',
        amount: '250',
        currency: 'EUR',
        reference: 'ch_1',
      }),
    ).toMatchObject({ outcome: 'applied' });
    expect(
      await send(p, {
        kind: 'deposit',
        operationId: 'd1',
        to: 'w1',
        amount: '250',
        currency: 'EUR',
        reference: 'ch_2',
      }),
    ).toMatchObject({ outcome: 'conflict' });
    await decidedThroughIntake(p, {
      kind: 'withdrawal',
      operationId: 'iw1',
      from: 'w1',
      amount: '300',
      currency: 'EUR',
      reference: 'SEPA-1',
    });
    expect((await p.balances()).w1).toBe(50n);
    const { rows } = await p.db.pg.query(
      "SELECT operation_id, amount::text, balance_after::text FROM ledger_entries WHERE wallet_id = '$settlement:EUR' ORDER BY id",
    );
    expect(rows).toEqual([
      { operation_id: 'd1', amount: '-250', balance_after: '-250' },
      { operation_id: 'iw1', amount: '300', balance_after: '50' },
    ]);
    await waitFor('both in the feed', async () =>
      (await settledRead(p.db.pg, 0n, 100)).some((e) => e.operationId === 'iw1'),
    );
    const events = (await settledRead(p.db.pg, 0n, 100)).filter((e) => e.operation !== 'transfer');
    expect(events.map((e) => [e.operationId, e.operation, e.kind, e.from, e.to, e.amountMinor, e.detail])).toEqual([
      ['d1', 'deposit', 'applied', 'w1', 'w1', 250n, { reference: 'ch_1', settlement: '$settlement:EUR' }],
      ['iw1', 'withdrawal', 'applied', 'w1', null, 300n, { reference: 'SEPA-1', settlement: '$settlement:EUR' }],
    ]);
  });
});

describe('wallets through both doors', () => {
  it('a wallet opened, funded, frozen through the intake, unfrozen, emptied and closed: each decided once', async () => {
    const p = await newPipeline();
    await p.seed(1, 100n);
    await p.startWorker();
    const open: OperationWire = { kind: 'open_wallet', operationId: 'o1', wallet: 'n1', currency: 'EUR' };
    expect(await send(p, open)).toMatchObject({ outcome: 'applied' });
    expect(await send(p, open)).toMatchObject({ outcome: 'duplicate' });
    expect(await send(p, { ...open, currency: 'USD' })).toMatchObject({ outcome: 'conflict' });
    expect(
      await send(p, { kind: 'deposit', operationId: 'd1', to: 'n1', amount: '70', currency: 'EUR', reference: 'ch_1' }),
    ).toMatchObject({ outcome: 'applied' });
    await decidedThroughIntake(p, { kind: 'freeze_wallet', operationId: 'if1', wallet: 'n1' });
    expect(await send(p, { operationId: 't1', from: 'n1', to: 'w1', amount: '1' })).toMatchObject({
      outcome: 'rejected',
      reason: 'wallet_frozen',
    });
    // Frozen for debits only: money still comes in.
    expect(await send(p, { operationId: 't2', from: 'w1', to: 'n1', amount: '30' })).toMatchObject({
      outcome: 'applied',
    });
    expect(await send(p, { kind: 'close_wallet', operationId: 'c1', wallet: 'n1' })).toMatchObject({
      outcome: 'rejected',
      reason: 'wallet_not_empty',
    });
    await decidedThroughIntake(p, { kind: 'unfreeze_wallet', operationId: 'iu1', wallet: 'n1' });
    const payout: OperationWire = {
      kind: 'withdrawal',
      operationId: 'w2',
      from: 'n1',
      amount: '100',
      currency: 'EUR',
      reference: 'SEPA-2',
    };
    expect(await send(p, payout)).toMatchObject({ outcome: 'applied' });
    await decidedThroughIntake(p, { kind: 'close_wallet', operationId: 'ic2', wallet: 'n1' });
    expect(await send(p, { operationId: 't3', from: 'w1', to: 'n1', amount: '1' })).toMatchObject({
      outcome: 'rejected',
      reason: 'wallet_closed',
    });
    const { rows } = await p.db.pg.query(
      "SELECT status, balance::text, held::text, credit_limit::text FROM wallets WHERE id = 'n1'",
    );
    expect(rows).toEqual([{ status: 'closed', balance: '0', held: '0', credit_limit: '0' }]);
    await waitFor('the close in the feed', async () =>
      (await settledRead(p.db.pg, 0n, 100)).some((e) => e.operationId === 'ic2'),
    );
    const events = (await settledRead(p.db.pg, 0n, 100)).filter((e) => e.operation.endsWith('_wallet'));
    expect(events.map((e) => [e.operationId, e.operation, e.kind, e.reason, e.from, e.detail])).toEqual([
      ['o1', 'open_wallet', 'applied', null, 'n1', { status: 'open', currency: 'EUR', creditLimit: '0' }],
      ['if1', 'freeze_wallet', 'applied', null, 'n1', { status: 'debits_frozen', previousStatus: 'open' }],
      ['c1', 'close_wallet', 'rejected', 'wallet_not_empty', 'n1', { balance: '100', held: '0' }],
      ['iu1', 'unfreeze_wallet', 'applied', null, 'n1', { status: 'open', previousStatus: 'debits_frozen' }],
      ['ic2', 'close_wallet', 'applied', null, 'n1', { status: 'closed', previousStatus: 'open' }],
    ]);
  });
});

describe('metadata through both doors', () => {
  it('a transfer sent straight and a transfer and a hold requested through the intake keep their metadata', async () => {
    const p = await newPipeline();
    await p.seed(2, 100n);
    await p.startWorker();
    const straight: OperationWire = {
      operationId: 'm1',
      from: 'w1',
      to: 'w2',
      amount: '5',
      metadata: { order: '8812', note: 'Café ☕' },
    };
    expect(await send(p, straight)).toMatchObject({ outcome: 'applied' });
    // The same metadata in another key order is the same request; other metadata is another.
    expect(await send(p, { ...straight, metadata: { note: 'Café ☕', order: '8812' } })).toMatchObject({
      outcome: 'duplicate',
    });
    expect(await send(p, { ...straight, metadata: { order: '8813', note: 'Café ☕' } })).toMatchObject({
      outcome: 'conflict',
    });
    await decidedThroughIntake(p, {
      operationId: 'im1',
      from: 'w2',
      to: 'w1',
      amount: '3',
      metadata: { order: '8813' },
    });
    await decidedThroughIntake(p, {
      kind: 'hold',
      operationId: 'ih1',
      from: 'w1',
      to: 'w2',
      amount: '7',
      expiresInMs: 60_000,
      metadata: { order: '8814' },
    });
    // A transfer without metadata still goes through apply_transfers(), and keeps none.
    expect(await send(p, { operationId: 'plain', from: 'w1', to: 'w2', amount: '1' })).toMatchObject({
      outcome: 'applied',
    });
    const { rows } = await p.db.pg.query(
      'SELECT operation_id, kind, status, metadata FROM transfers ORDER BY operation_id',
    );
    expect(rows).toEqual([
      { operation_id: 'ih1', kind: 'hold', status: 'applied', metadata: { order: '8814' } },
      { operation_id: 'im1', kind: 'transfer', status: 'applied', metadata: { order: '8813' } },
      { operation_id: 'm1', kind: 'transfer', status: 'applied', metadata: { order: '8812', note: 'Café ☕' } },
      { operation_id: 'plain', kind: 'transfer', status: 'applied', metadata: null },
    ]);
    expect((await p.balances()).w1).toBe(100n - 5n + 3n - 7n - 1n);
    await waitFor('the hold in the feed', async () =>
      (await settledRead(p.db.pg, 0n, 100)).some((e) => e.operationId === 'ih1'),
    );
    const events = await settledRead(p.db.pg, 0n, 100);
    expect(events.map((e) => [e.operationId, e.kind, e.metadata])).toEqual([
      ['m1', 'applied', { order: '8812', note: 'Café ☕' }],
      ['im1', 'applied', { order: '8813' }],
      ['ih1', 'applied', { order: '8814' }],
      ['plain', 'applied', null],
    ]);
  });
});
