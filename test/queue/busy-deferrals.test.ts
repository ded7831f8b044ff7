// Busy-wallet deferrals are counted for what they are: the times a job went back to the queue
// because its wallet was busy since its last real attempt (src/queue/transfer-worker.ts,
// busyDeferralsOf). A job bounced by the readiness gate a hundred times and more is still
// deferred normally; one deferred LOCK_BUSY_DEFERRALS_MAX times fails its attempt as lock_busy,
// and after that failed attempt the count starts again.
import { type Job, Queue } from 'bullmq';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { lockKeysOf } from '../../src/lock/lock-keys.ts';
import { defaultJobOptions, TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { LOCK_BUSY_DEFERRALS_MAX } from '../../src/queue/transfer-worker.ts';
import { startInProcessWorker } from '../support/in-process-worker.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { waitFor } from '../support/worker-ops.ts';

const GATE_BOUNCES = 150;
const SETTLE_TIMEOUT_MS = 60_000;
const openPipeline = pipelinePerTest();

/** An in-process worker of the pipeline behind a readiness gate that `admit` opens and closes. */
async function gatedWorker(p: Pipeline, admit: () => boolean): Promise<() => Promise<void>> {
  const config = loadConfig({ ...process.env, ...p.workerEnv });
  const logger = pino({ level: 'silent' });
  const worker = startInProcessWorker(config, logger, 'gated', { admission: { admit } });
  worker.running.run();
  return () => worker.close();
}

/** Another process's lease on the wallet, for as long as the test keeps it. */
async function holdWallet(p: Pipeline, walletId: string): Promise<() => Promise<void>> {
  const key = lockKeysOf(p.config.lockKeyPrefix, walletId).lockKey;
  await p.redis.set(key, 'someone-else', 'PX', 120_000);
  return async () => {
    await p.redis.del(key);
  };
}

async function stateOf(p: Pipeline, job: Job): Promise<{ state: string; job: Job }> {
  const current = (await p.queue.getJob(job.id as string)) as Job;
  return { state: await current.getState(), job: current };
}

describe('busy-wallet deferrals', () => {
  it(`a job bounced ${GATE_BOUNCES} times by the readiness gate is deferred normally, not failed as lock_busy`, async () => {
    const p = await openPipeline();
    await p.seed(2, 100n);
    const release = await holdWallet(p, 'w1');
    let admitted = 0;
    const job = await p.addRaw({ operationId: 'bounced', from: 'w1', to: 'w2', amount: '5' });
    const stop = await gatedWorker(p, () => ++admitted > GATE_BOUNCES);
    try {
      const deferred = await waitFor('the job deferred or failed', SETTLE_TIMEOUT_MS, async () => {
        const s = await stateOf(p, job);
        return s.job.attemptsMade > 0 || s.job.progress !== 0 ? s : undefined;
      });
      // The gate bounces are real: BullMQ counted each as a start.
      expect(deferred.job.attemptsStarted).toBeGreaterThan(GATE_BOUNCES);
      expect(deferred.job.failedReason ?? '').toBe('');
      expect(deferred.job.attemptsMade).toBe(0);
      expect(deferred.job.progress).toEqual({ busyDeferrals: 1, sinceAttemptsMade: 0 });
      await release();
      expect(await p.result(job, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
      expect((await stateOf(p, job)).job.failedReason ?? '').toBe('');
    } finally {
      await stop();
    }
  });

  it(`after LOCK_BUSY_DEFERRALS_MAX (${LOCK_BUSY_DEFERRALS_MAX}) deferrals the attempt fails as lock_busy, and the count starts again`, async () => {
    const p = await openPipeline();
    await p.seed(2, 100n);
    const release = await holdWallet(p, 'w1');
    // A job that has been deferred LOCK_BUSY_DEFERRALS_MAX times since its (no) last attempt.
    const queue = new Queue(p.config.queueName, {
      connection: p.redis,
      defaultJobOptions: defaultJobOptions(p.config.jobAttemptsMax),
    });
    const job = await queue.add(TRANSFER_JOB_NAME, { operationId: 'patient', from: 'w1', to: 'w2', amount: '5' });
    await job.updateProgress({ busyDeferrals: LOCK_BUSY_DEFERRALS_MAX, sinceAttemptsMade: 0 });
    await queue.close();
    const stop = await gatedWorker(p, () => true);
    try {
      const failedOnce = await waitFor('one failed attempt', SETTLE_TIMEOUT_MS, async () => {
        const s = await stateOf(p, job);
        return s.job.attemptsMade >= 1 ? s : undefined;
      });
      expect(failedOnce.job.failedReason).toBe(`lock_busy: wallet busy after ${LOCK_BUSY_DEFERRALS_MAX} deferrals`);
      // The next busy encounter is a first deferral again, not another failed attempt at once.
      const again = await waitFor('a deferral counted from the failed attempt', SETTLE_TIMEOUT_MS, async () => {
        const s = await stateOf(p, job);
        const progress = s.job.progress as { sinceAttemptsMade?: number };
        return s.job.attemptsMade > 1 || progress.sinceAttemptsMade === 1 ? s : undefined;
      });
      expect(again.job.attemptsMade).toBe(1);
      expect(again.job.progress).toEqual({ busyDeferrals: 1, sinceAttemptsMade: 1 });
      await release();
      expect(await p.result(job, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
      expect(await p.debitsOf('patient')).toBe(1);
    } finally {
      await stop();
    }
  });
});
