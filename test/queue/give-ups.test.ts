// Every give-up is recorded, once, and only for the job that gave up (src/queue/transfer-worker.ts,
// recordGiveUp() and the 'failed' handler): a record whose first call fails is tried again with
// back-off; a try made after the job was redriven (removed, and added fresh under the same id)
// parks nothing; a job failed by BullMQ's stall limit is recorded like any other; and a job sent
// to BullMQ straight, which no intake request vouches for, parks no request, even one of the same
// operation, and is counted and logged as a give-up the feed did not record.
import { Worker } from 'bullmq';
import { pino } from 'pino';
import { expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { jobIdOf, redrive } from '../../src/intake/relay.ts';
import { GIVE_UP_FUNCTION } from '../../src/ledger/apply-transfer.ts';
import type { TransferWire } from '../../src/ledger/transfer-request.ts';
import { METRIC_PREFIX } from '../../src/metrics/worker-metrics.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { JOB_STALLED_COUNT_MAX, recordGiveUp } from '../../src/queue/transfer-worker.ts';
import { settledRead } from '../support/feed.ts';
import { startObservedWorker } from '../support/observed-worker.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { waitFor } from '../support/worker-ops.ts';

const SETTLE_TIMEOUT_MS = 25_000;
const GIVEN_UP_JOBS = `${METRIC_PREFIX}given_up_jobs_total`;
/** The log events that end a give-up's record, whatever it came to (the old worker logged the first and the last). */
const GIVE_UP_SETTLED = [
  'transfer_given_up',
  'transfer_give_up_not_recorded',
  'transfer_given_up_unrecorded',
  'transfer_give_up_superseded',
];
const openPipeline = pipelinePerTest();

async function feedOf(p: Pipeline, operationId: string): Promise<string[]> {
  return (await settledRead(p.db.pg, 0n, 10_000)).filter((e) => e.operationId === operationId).map((e) => e.kind);
}

async function requestOf(p: Pipeline, operationId: string) {
  const r = await p.db.pg.query<{ given_up: boolean; decided: boolean; give_up_count: number; reason: string | null }>(
    `SELECT given_up_at IS NOT NULL AS given_up, decided_at IS NOT NULL AS decided, give_up_count,
            give_up_reason AS reason
       FROM transfer_requests WHERE operation_id = $1`,
    [operationId],
  );
  return r.rows[0];
}

/** Requested through the intake and sent as the relay sends it (job id from the operation). */
async function requestedAndSent(p: Pipeline, wire: TransferWire) {
  await requestTransfers(p.db.pg, [wire], p.config.transferAmountMax);
  return p.queue.add(TRANSFER_JOB_NAME, wire, { jobId: jobIdOf(wire.operationId) });
}

async function failedForGood(p: Pipeline, id: string): Promise<void> {
  await waitFor(`job ${id} failed for good`, SETTLE_TIMEOUT_MS, async () =>
    (await (await p.queue.getJob(id))?.getState()) === 'failed' ? true : undefined,
  );
}

const failEveryAttempt = {
  beforeApply: () => {
    throw new Error('injected: the attempt fails');
  },
};

it('a give-up whose record fails is tried again with back-off, and recorded once the database takes it', async () => {
  const p = await openPipeline({ JOB_ATTEMPTS_MAX: '1' });
  await p.seed(2, 100n);
  const { role } = await p.db.workerRole();
  await p.db.pg.query(`REVOKE EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} FROM ${role}`);
  const w = await startObservedWorker(p, { hooks: failEveryAttempt });
  try {
    const wire: TransferWire = { operationId: 'record-later', from: 'w1', to: 'w2', amount: '5' };
    const job = await requestedAndSent(p, wire);
    await failedForGood(p, job.id as string);
    await waitFor('a failed call of record_transfer_given_up()', SETTLE_TIMEOUT_MS, () =>
      w.events('transfer_give_up_retry').length + w.events('transfer_give_up_not_recorded').length > 0
        ? true
        : undefined,
    );
    expect((await requestOf(p, wire.operationId))?.given_up).toBe(false);

    await p.db.pg.query(`GRANT EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} TO ${role}`);
    await waitFor('the given_up event', SETTLE_TIMEOUT_MS, async () =>
      (await feedOf(p, wire.operationId)).includes('given_up') ? true : undefined,
    );
    expect(await feedOf(p, wire.operationId)).toEqual(['given_up']);
    expect(await requestOf(p, wire.operationId)).toMatchObject({
      given_up: true,
      decided: false,
      give_up_count: 1,
      reason: 'transient_error: injected: the attempt fails',
    });
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'recorded' })).toBe(1);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'error' })).toBe(0);
  } finally {
    await w.stop();
  }
});

it('a try made after the job was redriven parks nothing: the fresh job of the same id is not the one that failed', async () => {
  // The worker's reads wait for a lock as long as the test needs (below), not the default 2 s.
  const p = await openPipeline({
    JOB_ATTEMPTS_MAX: '1',
    DB_LOCK_TIMEOUT_MS: '60000',
    DB_STATEMENT_TIMEOUT_MS: '60000',
  });
  await p.seed(2, 100n);
  const { role } = await p.db.workerRole();
  await p.db.pg.query(`REVOKE EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} FROM ${role}`);
  const wire: TransferWire = { operationId: 'redriven', from: 'w1', to: 'w2', amount: '5' };
  // The fresh job waits in its attempt until the test lets it go, so it cannot fail in its turn.
  let firstTimestamp = 0;
  let letGo: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  const w = await startObservedWorker(p, {
    hooks: {
      beforeApply: async ({ job }) => {
        if (job.timestamp === firstTimestamp) throw new Error('injected: the attempt fails');
        await held;
      },
    },
  });
  try {
    const id = jobIdOf(wire.operationId);
    await requestTransfers(p.db.pg, [wire], p.config.transferAmountMax);
    const job = await p.queue.add(TRANSFER_JOB_NAME, wire, { jobId: id, delay: 500 });
    firstTimestamp = job.timestamp;
    await failedForGood(p, id);
    await waitFor('a failed call of record_transfer_given_up()', SETTLE_TIMEOUT_MS, () =>
      w.events('transfer_give_up_retry').length + w.events('transfer_give_up_not_recorded').length > 0
        ? true
        : undefined,
    );

    // Meanwhile a relay recorded the give-up, and an operator redrove it, as redrive() does: the
    // request open again, the failed job removed, a fresh one added under the same id. All of it
    // under a lock on the intake's requests: the worker's next try waits on it (its first read is
    // of that table) and is made after the redrive, whatever its random back-off; without the
    // lock, short back-offs could use up its tries before the redrive, and nothing would be left
    // to see the fresh job.
    const operator = await p.db.pg.connect();
    let fresh: Awaited<ReturnType<typeof p.queue.add>>;
    try {
      await operator.query('BEGIN');
      await operator.query('LOCK TABLE transfer_requests IN ACCESS EXCLUSIVE MODE');
      const byRelay = await operator.query<{ recorded: boolean }>(
        `SELECT record_transfer_given_up(operation_id, request_hash, $2, send_count) AS recorded
           FROM transfer_requests WHERE operation_id = $1`,
        [wire.operationId, 'job failed for good: seen by the relay'],
      );
      expect(byRelay.rows[0]?.recorded).toBe(true);
      await operator.query(
        'UPDATE transfer_requests SET given_up_at = NULL, sent_at = clock_timestamp(), send_count = send_count + 1 WHERE operation_id = $1',
        [wire.operationId],
      );
      await (await p.queue.getJob(id))?.remove();
      fresh = await p.queue.add(TRANSFER_JOB_NAME, wire, { jobId: id });
      await waitFor('the fresh job in its attempt', SETTLE_TIMEOUT_MS, async () =>
        (await fresh.getState()) === 'active' ? true : undefined,
      );
      await operator.query(`GRANT EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} TO ${role}`);
      await operator.query('COMMIT');
    } catch (err) {
      await operator.query('ROLLBACK');
      throw err;
    } finally {
      operator.release();
    }
    // No try ran out while the redrive went on: the give-up is still being recorded.
    expect(w.events('transfer_give_up_not_recorded')).toEqual([]);

    await waitFor("the worker's give-up settled", SETTLE_TIMEOUT_MS, () =>
      GIVE_UP_SETTLED.some((e) => w.events(e).length > 0) ? true : undefined,
    );
    expect(await requestOf(p, wire.operationId)).toMatchObject({ given_up: false, decided: false, give_up_count: 1 });
    expect(await feedOf(p, wire.operationId)).toEqual(['given_up']);
    expect(w.events('transfer_give_up_superseded')).toEqual([
      expect.objectContaining({ jobId: id, operationId: wire.operationId }),
    ]);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'superseded' })).toBe(1);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'recorded' })).toBe(0);

    letGo();
    expect(await p.result(fresh, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
    expect(await feedOf(p, wire.operationId)).toEqual(['given_up', 'applied']);
  } finally {
    letGo();
    await w.stop();
  }
});

it('a straight job of an operation whose intake request asked for another body gives that request nothing: counted and logged only', async () => {
  const p = await openPipeline({ JOB_ATTEMPTS_MAX: '1' });
  await p.seed(2, 100n);
  const w = await startObservedWorker(p, { hooks: failEveryAttempt });
  try {
    const requested: TransferWire = { operationId: 'shared-id', from: 'w1', to: 'w2', amount: '5' };
    await requestTransfers(p.db.pg, [requested], p.config.transferAmountMax);
    // Sent to BullMQ straight, not through the intake, with another body under the same operation.
    const straight = await p.addRaw({ ...requested, amount: '7' });
    await failedForGood(p, straight.id as string);
    await waitFor("the worker's give-up settled", SETTLE_TIMEOUT_MS, () =>
      GIVE_UP_SETTLED.some((e) => w.events(e).length > 0) ? true : undefined,
    );
    expect(await requestOf(p, requested.operationId)).toMatchObject({
      given_up: false,
      decided: false,
      give_up_count: 0,
    });
    expect(await feedOf(p, requested.operationId)).toEqual([]);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'no_open_request' })).toBe(1);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'recorded' })).toBe(0);
    expect(w.events('transfer_given_up_unrecorded')).toEqual([
      expect.objectContaining({ jobId: straight.id, operationId: requested.operationId }),
    ]);
    expect(w.events('transfer_given_up')).toEqual([]);
  } finally {
    await w.stop();
  }
});

it(`jobs failed by the stall limit (JOB_STALLED_COUNT_MAX = ${JOB_STALLED_COUNT_MAX}) are given up: the intake request parked, a straight job counted`, async () => {
  const p = await openPipeline();
  await p.seed(2, 100n);
  const requested: TransferWire = { operationId: 'stalled-requested', from: 'w1', to: 'w2', amount: '5' };
  const sent = await requestedAndSent(p, requested);
  const straight = await p.addRaw({ operationId: 'stalled-straight', from: 'w1', to: 'w2', amount: '6' });
  // Both have stalled JOB_STALLED_COUNT_MAX times already; a worker takes them and dies (a bare
  // BullMQ worker that never renews the job locks), so the next stall is one too many.
  for (const job of [sent, straight])
    await p.redis.hset(p.queue.toKey(job.id as string), 'stc', String(JOB_STALLED_COUNT_MAX));
  const dyingConnection = bullmqConnection(p.config);
  const dying = new Worker(p.config.queueName, null, {
    connection: dyingConnection,
    autorun: false,
    lockDuration: 1_000,
  });
  const taken = [await dying.getNextJob('dies-1'), await dying.getNextJob('dies-2')].map((j) => j?.id).sort();
  expect(taken).toEqual([sent.id, straight.id].sort());
  await dying.close();
  dyingConnection.disconnect();

  const w = await startObservedWorker(p, { env: { JOB_STALLED_INTERVAL_MS: '1000' } });
  try {
    for (const job of [sent, straight]) await failedForGood(p, job.id as string);
    expect((await p.queue.getJob(sent.id as string))?.failedReason).toBe('job stalled more than allowable limit');
    await waitFor('the given_up event', SETTLE_TIMEOUT_MS, async () =>
      (await feedOf(p, requested.operationId)).includes('given_up') ? true : undefined,
    );
    expect(await requestOf(p, requested.operationId)).toMatchObject({
      given_up: true,
      give_up_count: 1,
      reason: 'job stalled more than allowable limit',
    });
    await waitFor('the straight job counted', SETTLE_TIMEOUT_MS, async () =>
      (await w.counter(GIVEN_UP_JOBS, { feed: 'no_open_request' })) > 0 ? true : undefined,
    );
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'recorded' })).toBe(1);
    expect(await w.counter(GIVEN_UP_JOBS, { feed: 'no_open_request' })).toBe(1);
    expect(w.events('transfer_given_up_unrecorded')).toEqual([
      expect.objectContaining({ jobId: straight.id, operationId: 'stalled-straight' }),
    ]);
    expect(await feedOf(p, 'stalled-straight')).toEqual([]);
  } finally {
    await w.stop();
  }
});

// Issue 41, item 4.4: the worker checked "still the failed job" before its call and passed no
// send count, so a redrive landing between the check and the call was parked again: a second
// given_up event, and the fresh job's request given up under it. Shown to fail with the call that
// passed no send count (recorded: true, given up again, ['given_up', 'given_up']).
it("a redrive between the worker's check and its call parks nothing: the give-up is bound to the send the check saw", async () => {
  const p = await openPipeline({ JOB_ATTEMPTS_MAX: '1' });
  await p.seed(2, 100n);
  const { role } = await p.db.workerRole();
  const workerConfig = loadConfig({ ...process.env, ...p.workerEnv });
  const prisma = createPrisma(workerConfig);
  const wire: TransferWire = { operationId: 'redriven-between', from: 'w1', to: 'w2', amount: '5' };
  const id = jobIdOf(wire.operationId);
  const queues = { queueOf: () => p.queue };
  try {
    await requestTransfers(p.db.pg, [wire], p.config.transferAmountMax);
    await p.db.pg.query('SELECT * FROM relay_claim_first_sends(10)');
    const job = await p.queue.add(TRANSFER_JOB_NAME, wire, { jobId: id });
    // The worker's first call fails (its grant is gone for a moment), so the record is tried again.
    await p.db.pg.query(`REVOKE EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} FROM ${role}`);
    let checks = 0;
    const recorded = await recordGiveUp(
      job,
      'injected: attempts exhausted',
      { prisma, logger: pino({ level: 'silent' }), config: workerConfig },
      {
        triesMax: 2,
        // The job is still the failed one when the worker looks; right after, a relay records the
        // give-up and an operator redrives the request (a fresh job, the request open again).
        stillTheFailedJob: async () => {
          checks += 1;
          if (checks === 1) {
            await p.db.pg.query(`GRANT EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} TO ${role}`);
            const byRelay = await p.db.pg.query<{ recorded: boolean }>(
              `SELECT record_transfer_given_up(operation_id, request_hash, 'seen by the relay', send_count) AS recorded
                 FROM transfer_requests WHERE operation_id = $1`,
              [wire.operationId],
            );
            expect(byRelay.rows[0]?.recorded).toBe(true);
            expect((await redrive(p.db.pg, queues, [wire.operationId])).operationIds).toEqual([wire.operationId]);
          }
          return true;
        },
      },
    );
    expect(checks).toBe(1);
    expect({
      recorded,
      request: await requestOf(p, wire.operationId),
      feed: await feedOf(p, wire.operationId),
    }).toEqual({
      recorded: false,
      request: { given_up: false, decided: false, give_up_count: 1, reason: 'seen by the relay' },
      feed: ['given_up'],
    });
  } finally {
    await p.db.pg.query(`GRANT EXECUTE ON FUNCTION ${GIVE_UP_FUNCTION} TO ${role}`);
    await closePrisma(prisma);
  }
});
