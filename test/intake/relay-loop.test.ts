// The relay's rounds (src/intake/relay-runtime.ts over relayBatch()) on real Redis and PostgreSQL:
// each open request is sent once, to its shard, under jobIdOf(op); an add the queue lost, and a
// relay that died between claiming rows and adding their jobs, are recovered by a re-send after
// INTAKE_RESEND_AFTER_MS and decided exactly once; a decided request is never sent again.
// Controls: with re-sends switched off (INTAKE_RESEND_AFTER_MS at its maximum) the lost add and
// the dead relay's rows stay undecided.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { jobIdOf } from '../../src/intake/relay.ts';
import { Relay } from '../../src/intake/relay-runtime.ts';
import type { TransferWire } from '../../src/ledger/transfer-request.ts';
import { queueShardsOf, shardIndexOf } from '../../src/queue/queue-shards.ts';
import { settledRead } from '../support/feed.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';

const RESEND_MS = 500;
const newPipeline = pipelinePerTest();
const silent = pino({ level: 'silent' });

function relayOf(p: Pipeline, env: Record<string, string> = {}): Relay {
  const config = loadConfig({ ...process.env, ...p.workerEnv, DATABASE_URL: p.db.url, ...env });
  return new Relay({ config, logger: silent, publishOutcomes: false });
}

function wire(i: number, from = `w${1 + (i % 4)}`): TransferWire {
  return { operationId: `relay-op-${i}`, from, to: from === 'w5' ? 'w6' : 'w5', amount: '1' };
}

async function request(p: Pipeline, wires: TransferWire[]): Promise<void> {
  await requestTransfers(p.db.pg, wires, p.config.transferAmountMax);
}

async function row(p: Pipeline, op: string) {
  const { rows } = await p.db.pg.query<{ send_count: number; lost_count: number; decided: boolean }>(
    'SELECT send_count, lost_count, decided_at IS NOT NULL AS decided FROM transfer_requests WHERE operation_id = $1',
    [op],
  );
  return rows[0];
}

async function decisions(p: Pipeline, op: string): Promise<{ transfers: number; events: number }> {
  const t = await p.db.pg.query<{ n: string }>('SELECT count(*)::text AS n FROM transfers WHERE operation_id = $1', [
    op,
  ]);
  const events = (await settledRead(p.db.pg, 0n, 10_000)).filter((e) => e.operationId === op && e.kind !== 'given_up');
  return { transfers: Number(t.rows[0]?.n), events: events.length };
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the relay', () => {
  it('sends each open request once, with jobIdOf(op), to the shard of its source wallet; a second round sends nothing', async () => {
    const p = await newPipeline({ QUEUE_SHARDS: '3' });
    const relay = relayOf(p);
    try {
      const wires = Array.from({ length: 12 }, (_, i) => wire(i));
      await request(p, wires);
      const first = await relay.round();
      expect(first.batch).toEqual({ sent: 12, resent: 0, lost: 0, givenUp: 0, undone: 0 });
      const shards = queueShardsOf(p.config);
      for (const w of wires) {
        const home = shardIndexOf(w.from, 3);
        for (const s of shards) {
          const job = await relay.queues.queues[s.index]?.getJob(jobIdOf(w.operationId));
          if (s.index === home) expect(job?.data, w.operationId).toEqual(w);
          else expect(job ?? null, `${w.operationId} on shard ${s.index}`).toBeNull();
        }
      }
      expect((await relay.round()).batch.sent).toBe(0);
      for (const w of wires) expect(await row(p, w.operationId)).toMatchObject({ send_count: 1, lost_count: 0 });
    } finally {
      await Promise.all(relay.queues.queues.map((q) => q.obliterate({ force: true }).catch(() => undefined)));
      await relay.stop();
    }
  });

  it('sends a job lost from Redis again only after INTAKE_RESEND_AFTER_MS, counts it lost, and it is decided once; a decided request is never sent again', async () => {
    const p = await newPipeline();
    await p.seed(6, 1_000n);
    const relay = relayOf(p, { INTAKE_RESEND_AFTER_MS: String(RESEND_MS) });
    try {
      const w = wire(1);
      await request(p, [w]);
      expect((await relay.round()).batch.sent).toBe(1);
      await (await p.queue.getJob(jobIdOf(w.operationId)))?.remove();
      expect((await relay.round()).batch.sent, 'not due yet').toBe(0);
      await sleep(RESEND_MS + 100);
      expect((await relay.round()).batch).toEqual({ sent: 1, resent: 1, lost: 1, givenUp: 0, undone: 0 });
      expect(await row(p, w.operationId)).toMatchObject({ send_count: 2, lost_count: 1 });

      await p.startWorker();
      await waitFor('the decision', async () => (await row(p, w.operationId))?.decided === true);
      await sleep(RESEND_MS + 100);
      expect((await relay.round()).batch.sent, 'a decided request is not sent again').toBe(0);
      expect(await decisions(p, w.operationId)).toEqual({ transfers: 1, events: 1 });
      expect(await row(p, w.operationId)).toMatchObject({ send_count: 2, decided: true });
    } finally {
      await relay.stop();
    }
  });

  it('recovers the rows of a relay killed between claiming them and adding their jobs', async () => {
    const p = await newPipeline();
    await p.seed(6, 1_000n);
    const relay = relayOf(p, { INTAKE_RESEND_AFTER_MS: String(RESEND_MS) });
    try {
      const wires = [wire(1), wire(2), wire(3)];
      await request(p, wires);
      // The claim step alone, as relayBatch() runs it, committed; the process dies before addBulk().
      await p.db.pg.query(
        `UPDATE transfer_requests SET sent_at = clock_timestamp(), send_count = send_count + 1
          WHERE operation_id = ANY($1::text[])`,
        [wires.map((w) => w.operationId)],
      );
      await p.startWorker();
      expect((await relay.round()).batch.sent).toBe(0);
      await sleep(RESEND_MS + 100);
      expect((await relay.round()).batch).toEqual({ sent: 3, resent: 3, lost: 3, givenUp: 0, undone: 0 });
      for (const w of wires) {
        await waitFor(`the decision of ${w.operationId}`, async () => (await row(p, w.operationId))?.decided === true);
        expect(await decisions(p, w.operationId)).toEqual({ transfers: 1, events: 1 });
      }
    } finally {
      await relay.stop();
    }
  });

  it('control: without re-sends (INTAKE_RESEND_AFTER_MS at its maximum) a lost add and a dead relay’s rows stay undecided', async () => {
    const p = await newPipeline();
    await p.seed(6, 1_000n);
    const relay = relayOf(p, { INTAKE_RESEND_AFTER_MS: '86400000' });
    try {
      const lost = wire(1);
      const claimed = wire(2);
      await request(p, [lost, claimed]);
      await p.db.pg.query(
        'UPDATE transfer_requests SET sent_at = clock_timestamp(), send_count = 1 WHERE operation_id = $1',
        [claimed.operationId],
      );
      expect((await relay.round()).batch.sent).toBe(1);
      await (await p.queue.getJob(jobIdOf(lost.operationId)))?.remove();
      await p.startWorker();
      await sleep(RESEND_MS + 500);
      expect((await relay.round()).batch.sent).toBe(0);
      await sleep(500);
      expect(await row(p, lost.operationId)).toMatchObject({ decided: false, lost_count: 0 });
      expect(await row(p, claimed.operationId)).toMatchObject({ decided: false });
    } finally {
      await relay.stop();
    }
  });

  it('runs as a loop: a request made while it runs is sent and decided without a call', async () => {
    const p = await newPipeline();
    await p.seed(6, 1_000n);
    const relay = relayOf(p, { RELAY_IDLE_MS: '20' });
    relay.start();
    try {
      await p.startWorker();
      const w = wire(7);
      await request(p, [w]);
      await waitFor('the decision', async () => (await row(p, w.operationId))?.decided === true);
      expect(await decisions(p, w.operationId)).toEqual({ transfers: 1, events: 1 });
    } finally {
      await relay.stop();
    }
  });
});
