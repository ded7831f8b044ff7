// The acceptance test of the give-up (issue 19): a transfer whose attempts run out is recorded by
// the worker as given up ('given_up' in the outcome feed), stays open in the intake after BullMQ's
// failed set is trimmed, is listed by `npm run status`, is not sent again by the relay, and
// `npm run redrive` brings it to exactly one decision. Shown to fail with the worker's give-up
// switched off (the recordGiveUp() call removed from the 'failed' handler): no 'given_up' event
// comes, and after the trim nothing says the transfer was ever requested but not decided.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { jobIdOf } from '../../src/intake/relay.ts';
import { Relay } from '../../src/intake/relay-runtime.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { type TransferWire, validateTransferRequest } from '../../src/ledger/transfer-request.ts';
import { recordGiveUp } from '../../src/queue/transfer-worker.ts';
import { describeRun, lastJsonLine, runCommand } from '../support/cli-process.ts';
import { settledRead } from '../support/feed.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';

const RESEND_MS = 500;
const newPipeline = pipelinePerTest();

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function cliEnv(p: Pipeline): Record<string, string> {
  return { ...p.workerEnv, DATABASE_URL: p.db.url, JOB_ATTEMPTS_MAX: '1', LOG_LEVEL: 'silent' };
}

async function feedOf(p: Pipeline, op: string) {
  return (await settledRead(p.db.pg, 0n, 10_000)).filter((e) => e.operationId === op).map((e) => e.kind);
}

describe('a transfer that fails for good', () => {
  it('is given up in the feed, stays open and listed after the failed set is trimmed, and npm run redrive decides it once', async () => {
    const p = await newPipeline();
    await p.seed(2, 1_000n);
    const config = loadConfig({ ...process.env, ...cliEnv(p), INTAKE_RESEND_AFTER_MS: String(RESEND_MS) });
    const relay = new Relay({ config, logger: pino({ level: 'silent' }), publishOutcomes: false });
    let failing = true;
    try {
      await p.startWorker({
        beforeApply: () => {
          if (failing) throw new Error('injected: the attempt fails');
        },
      });
      const w: TransferWire = { operationId: 'give-up-1', from: 'w1', to: 'w2', amount: '5' };
      await requestTransfers(p.db.pg, [w], p.config.transferAmountMax);
      expect((await relay.round()).batch.sent).toBe(1);

      await waitFor('the give-up', async () => (await feedOf(p, w.operationId)).includes('given_up'));
      const job = await p.queue.getJob(jobIdOf(w.operationId));
      expect(await job?.getState()).toBe('failed');
      await p.queue.clean(0, 1000, 'failed');
      expect(await p.queue.getJob(jobIdOf(w.operationId))).toBeFalsy();

      // Given up: the relay leaves it alone, however long it waits.
      await new Promise((r) => setTimeout(r, RESEND_MS + 100));
      expect((await relay.round()).batch.sent).toBe(0);

      const status = await runCommand('npm', ['run', '--silent', 'status'], cliEnv(p));
      expect(status.code, describeRun(status)).toBe(0);
      const intake = (lastJsonLine(status) as { intake: Record<string, unknown> }).intake;
      expect(intake).toMatchObject({ open: 1, neverSent: 0, givenUp: 1 });
      expect(intake.givenUpOperations).toEqual([
        expect.objectContaining({ operationId: w.operationId, reason: expect.stringContaining('injected') }),
      ]);

      failing = false;
      const run = await runCommand(
        'npm',
        ['run', '--silent', 'redrive', '--', '--operation-id', w.operationId],
        cliEnv(p),
      );
      expect(run.code, describeRun(run)).toBe(0);
      expect(lastJsonLine(run)).toMatchObject({ sent: [w.operationId] });

      await waitFor('the decision', async () => (await feedOf(p, w.operationId)).includes('applied'));
      const transfers = await p.db.pg.query('SELECT 1 FROM transfers WHERE operation_id = $1', [w.operationId]);
      expect(transfers.rowCount).toBe(1);
      expect(await feedOf(p, w.operationId)).toEqual(['given_up', 'applied']);
      const request = await p.db.pg.query<{ decided: boolean; given_up: boolean }>(
        'SELECT decided_at IS NOT NULL AS decided, given_up_at IS NOT NULL AS given_up FROM transfer_requests WHERE operation_id = $1',
        [w.operationId],
      );
      expect(request.rows[0]).toEqual({ decided: true, given_up: false });
      expect(await p.balances()).toMatchObject({ w1: 995n, w2: 1005n });

      // A second redrive finds nothing to send.
      const again = await runCommand('npm', ['run', '--silent', 'redrive', '--', '--all'], cliEnv(p));
      expect(lastJsonLine(again)).toMatchObject({ sent: [] });
    } finally {
      await relay.stop();
    }
  });

  it('without a valid transfer in the job, or without the database, is logged and not recorded; nothing throws', async () => {
    const p = await newPipeline();
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => lines.push(s) });
    const prisma = createPrisma(p.config);
    const job = (data: unknown, name = 'transfer') =>
      ({ id: 'j1', name, data }) as unknown as Parameters<typeof recordGiveUp>[0];
    const valid = { operationId: 'give-up-2', from: 'w1', to: 'w2', amount: '1' };
    const other = { operationId: 'give-up-3', from: 'w1', to: 'w2', amount: '1' };
    // Requested through the intake: a give-up of either would be recorded, and seen in the feed.
    await requestTransfers(p.db.pg, [valid, other], p.config.transferAmountMax);
    try {
      expect(await recordGiveUp(job({ nonsense: true }), 'x', { prisma, logger, config: p.config })).toBe(false);
      expect(lines.join('')).toContain('transfer_give_up_not_recorded');
      const down = createPrisma({ ...p.config, databaseUrl: 'postgresql://postgres@127.0.0.1:1/none' });
      try {
        expect(await recordGiveUp(job(valid), 'x', { prisma: down, logger, config: p.config })).toBe(false);
      } finally {
        await closePrisma(down);
      }
      // A job under another name is not a transfer job, whatever its data.
      expect(await recordGiveUp(job(other, 'transfer-v2'), 'x', { prisma, logger, config: p.config })).toBe(false);
      expect(await settledRead(p.db.pg, 0n, 10)).toEqual([]);
      expect(lines.filter((l) => l.includes('transfer_give_up_not_recorded'))).toHaveLength(3);
    } finally {
      await closePrisma(prisma);
    }
  });

  it('records one give-up per give-up: a second report of the same one (worker and relay both) adds no event', async () => {
    const p = await newPipeline();
    const wire: TransferWire = { operationId: 'give-up-twice', from: 'w1', to: 'w2', amount: '1' };
    await requestTransfers(p.db.pg, [wire], p.config.transferAmountMax);
    const validated = validateTransferRequest(wire, p.config.transferAmountMax);
    if (!validated.ok) throw new Error(validated.reason);
    // The hash of the failed job's body, and the send: the one the worker read (never sent: 0),
    // or the one the relay claimed.
    const giveUp = async (sendCount = 0) =>
      (
        await p.db.pg.query<{ added: boolean }>(
          "SELECT record_transfer_given_up($1, $2, 'attempts exhausted', $3::integer) AS added",
          [wire.operationId, requestHash(validated.request), sendCount],
        )
      ).rows[0]?.added;
    const { rows } = await p.db.pg.query<{ send_count: number }>(
      'SELECT send_count FROM transfer_requests WHERE operation_id = $1',
      [wire.operationId],
    );
    expect(await giveUp()).toBe(true);
    // Shown to fail without the given_up_at guard in record_transfer_given_up(): true, two events.
    expect(await giveUp()).toBe(false);
    // The relay's report of the same give-up, at the request's send, neither.
    expect(await giveUp(rows[0]?.send_count)).toBe(false);
    expect(await feedOf(p, wire.operationId)).toEqual(['given_up']);
    // A redrive opens it again; its next give-up is a new one.
    await p.db.pg.query('UPDATE transfer_requests SET given_up_at = NULL WHERE operation_id = $1', [wire.operationId]);
    expect(await giveUp()).toBe(true);
    expect(await feedOf(p, wire.operationId)).toEqual(['given_up', 'given_up']);
  });
});
