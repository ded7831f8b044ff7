// A permanent failure (src/queue/attempt-failure.ts: permission_denied, ledger_contract,
// lock_protocol, internal_error) says the worker is wrong, not the job: the job goes back to the
// queue, delayed, without spending one of its JOB_ATTEMPTS_MAX attempts, however often it meets
// the fault, and is decided once the fault is gone. Each failure is still logged, counted as a
// retry of its kind and reported to the fault hold, as before. Shown to fail when a permanent
// failure fails the attempt instead: the job fails for good after its two attempts.
import type { Job } from 'bullmq';
import { expect, it } from 'vitest';
import { LedgerContractError } from '../../src/errors.ts';
import { METRIC_PREFIX } from '../../src/metrics/worker-metrics.ts';
import { startObservedWorker } from '../support/observed-worker.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { waitFor } from '../support/worker-ops.ts';

const ATTEMPTS = 2;
/** Three times the job's attempts: under the old rule it would have failed for good twice over. */
const FAILURES = 3 * ATTEMPTS;
const SETTLE_TIMEOUT_MS = 60_000;

const openPipeline = pipelinePerTest();

interface Seen {
  state: string;
  attemptsMade: number;
}

async function seenNow(p: Pipeline, id: string): Promise<Seen & { job: Job }> {
  const job = (await p.queue.getJob(id)) as Job;
  return { state: await job.getState(), attemptsMade: job.attemptsMade, job };
}

for (const fault of [
  { kind: 'internal_error', error: () => new RangeError('injected: a bound our code checks was broken') },
  { kind: 'ledger_contract', error: () => new LedgerContractError('batch_row_count', 'injected: 0 rows for 1') },
] as const) {
  it(`a job meeting ${fault.kind} ${FAILURES} times with ${ATTEMPTS} attempts is never failed, spends no attempt, and is decided once the fault is gone`, async () => {
    const p = await openPipeline({ JOB_ATTEMPTS_MAX: String(ATTEMPTS) });
    await p.seed(2, 100n);
    let failing = true;
    let thrown = 0;
    const w = await startObservedWorker(p, {
      hooks: {
        beforeApply: () => {
          if (!failing) return;
          thrown += 1;
          throw fault.error();
        },
      },
    });
    try {
      const job = await p.addRaw({ operationId: `held-${fault.kind}`, from: 'w1', to: 'w2', amount: '5' });
      const id = job.id as string;
      const seen: Seen[] = [];
      await waitFor(`${FAILURES} permanent failures, or the job failed`, SETTLE_TIMEOUT_MS, async () => {
        const now = await seenNow(p, id);
        seen.push({ state: now.state, attemptsMade: now.attemptsMade });
        return thrown >= FAILURES || now.state === 'failed' ? now : undefined;
      });
      const after = await seenNow(p, id);
      seen.push({ state: after.state, attemptsMade: after.attemptsMade });
      expect(seen.filter((s) => s.state === 'failed' || s.attemptsMade !== 0)).toEqual([]);
      expect(thrown).toBeGreaterThanOrEqual(FAILURES);
      // The job says why it waits: the reason of its last permanent failure, and how many it met.
      expect(after.job.progress).toMatchObject({
        permanentFailures: expect.any(Number),
        lastPermanentFailure: expect.stringMatching(new RegExp(`^${fault.kind}: .*injected`)),
      });
      expect((after.job.progress as { permanentFailures: number }).permanentFailures).toBeGreaterThanOrEqual(FAILURES);

      // As before: logged, counted as a retry of its kind, reported to the fault hold, each time.
      const failures = thrown;
      failing = false;
      expect(await p.result(job, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
      // BullMQ counts the completing attempt: the only one made.
      expect((await p.queue.getJob(id))?.attemptsMade).toBe(1);
      expect(await p.debitsOf(`held-${fault.kind}`)).toBe(1);
      expect(w.events('transfer_permanent_error')).toHaveLength(failures);
      expect(w.faults.map((f) => f.kind)).toEqual(Array.from({ length: failures }, () => fault.kind));
      expect(await w.counter(`${METRIC_PREFIX}retries_total`, { kind: fault.kind })).toBe(failures);
    } finally {
      await w.stop();
    }
  });
}
