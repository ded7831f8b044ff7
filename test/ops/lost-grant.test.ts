// A worker whose database role loses EXECUTE on the decision function (a REVOKE by the owner, as
// a migration that replaces the function would do) meets a permanent failure with a reason that
// names the fix, and stops taking jobs: /readyz answers 503 and says what to run, and the
// job waits, put back without spending any of its JOB_ATTEMPTS_MAX attempts, its progress naming
// the failure. With the grant back the worker is ready again by itself and the transfer ends
// applied exactly once, in the one attempt BullMQ counts.
import type { Job } from 'bullmq';
import { afterEach, expect, it } from 'vitest';
import type { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { DECISION_FUNCTIONS } from '../../src/db/worker-role-grants.ts';
import type { JobProgress } from '../../src/queue/transfer-worker.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { httpStatus, logEvents, waitFor } from '../support/worker-ops.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

/** Longer than the shortest fault hold (FAULT_HOLD_MIN_MS) and than several retry back-offs. */
const WATCH_MS = 8_000;
const SETTLE_TIMEOUT_MS = 60_000;
/** Above the waits of the test, each bounded by SETTLE_TIMEOUT_MS: a slow wait fails with its own message. */
const TEST_TIMEOUT_MS = 240_000;
const DECISION_FUNCTION = DECISION_FUNCTIONS[0] as string;

/** Revokes tried before the job's attempt, not the probe, meets the lost grant first. */
const REVOKE_TRIES_MAX = 5;
/** The worker paused this long, naming the grant, with the job never attempted: the probe saw it first. */
const PROBE_FIRST_MS = 3_000;

const openPipeline = pipelinePerTest();

/** Which of the job's attempt and the worker's probe met the lost grant first. */
async function firstToSee(
  p: Pipeline,
  w: WorkerProcess,
  jobId: string,
): Promise<{ kind: 'attempt'; job: Job } | { kind: 'probe' }> {
  let pausedSince: number | null = null;
  return waitFor('the first permanent failure, or the worker paused by its probe', SETTLE_TIMEOUT_MS, async () => {
    const j = await p.queue.getJob(jobId);
    if (j === undefined) return undefined;
    if (((j.progress as Partial<JobProgress> | undefined)?.permanentFailures ?? 0) >= 1)
      return { kind: 'attempt', job: j };
    const r = await httpStatus(w.url('/readyz'));
    if (j.attemptsMade !== 0 || r.status !== 503 || !r.body.includes(`may not execute ${DECISION_FUNCTION}`)) {
      pausedSince = null;
      return undefined;
    }
    pausedSince ??= performance.now();
    return performance.now() - pausedSince >= PROBE_FIRST_MS ? { kind: 'probe' } : undefined;
  });
}

let worker: WorkerProcess | null = null;
afterEach(async () => {
  await worker?.stop();
  worker = null;
});

it('a lost EXECUTE grant puts the job back with the fix, spending no attempt, makes the worker not ready, and the job completes once granted again', {
  timeout: TEST_TIMEOUT_MS,
}, async () => {
  const p = await openPipeline({ WORKER_CONCURRENCY: '2', JOB_ATTEMPTS_MAX: '20' });
  await p.seed(2, 100n);
  const { role } = await p.db.workerRole();
  worker = await spawnWorkerProcess(p);
  const w = worker;
  expect(await p.result(await p.addRaw({ operationId: 'before', from: 'w1', to: 'w2', amount: '1' }))).toMatchObject({
    outcome: 'applied',
  });

  // The worker meets the lost grant one of two ways: the job's attempt fails (what this test is
  // about), or its readiness probe (every second) finds it first and pauses the worker before the
  // job is taken; the job then waits, never attempted. On a loaded machine the attempt can come
  // after a probe round: then the grant goes back, that job completes, and the revoke is tried
  // again with a new job.
  let tries = 0;
  let attempted: { job: Job; failed: Job } | undefined;
  while (attempted === undefined) {
    tries += 1;
    expect(tries, 'revokes before an attempt met the lost grant first').toBeLessThanOrEqual(REVOKE_TRIES_MAX);
    await p.db.pg.query(`REVOKE EXECUTE ON FUNCTION ${DECISION_FUNCTION} FROM ${role}`);
    const job = await p.addRaw({ operationId: `after-revoke-${tries}`, from: 'w1', to: 'w2', amount: '5' });
    const seen = await firstToSee(p, w, job.id as string);
    if (seen.kind === 'attempt') {
      attempted = { job, failed: seen.job };
    } else {
      await p.db.pg.query(`GRANT EXECUTE ON FUNCTION ${DECISION_FUNCTION} TO ${role}`);
      expect(await p.result(job, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
      await w.waitUntilReady(SETTLE_TIMEOUT_MS);
    }
  }
  const { job, failed } = attempted;
  const jobId = job.id as string;
  const reason = (failed.progress as Partial<JobProgress>).lastPermanentFailure;
  expect(reason).toMatch(/^permission_denied: 42501 permission denied for function apply_transfers/);
  expect(reason).toContain(`run npm run db:worker-role -- --role ${role} as the database owner`);
  expect(failed.attemptsMade).toBe(0);

  // The probe sees it too (within a probe round): not ready, naming the function and the fix.
  const notReady = await waitFor('/readyz to name the missing grant', 10_000, async () => {
    const r = await httpStatus(w.url('/readyz'));
    return r.body.includes(`may not execute ${DECISION_FUNCTION}`) ? r : undefined;
  });
  expect(notReady.status).toBe(503);
  expect(notReady.body).toContain(`run npm run db:worker-role -- --role ${role} as the database owner`);

  // No hot loop: the job waits with no attempt spent, the worker stays not ready.
  const deadline = performance.now() + WATCH_MS;
  const seen = new Set<string>();
  while (performance.now() < deadline) {
    const j = await p.queue.getJob(jobId);
    seen.add(
      `${await j?.getState()}/attempts=${j?.attemptsMade}/readyz=${(await httpStatus(w.url('/readyz'))).status}`,
    );
    await new Promise((r) => setTimeout(r, 250));
  }
  expect(
    [...seen].every((s) => /^(delayed|waiting|active)\/attempts=0\/readyz=503$/.test(s)),
    [...seen].join(', '),
  ).toBe(true);
  expect(await p.debitsOf(`after-revoke-${tries}`)).toBe(0);

  await p.db.pg.query(`GRANT EXECUTE ON FUNCTION ${DECISION_FUNCTION} TO ${role}`);
  expect(await p.result(job, SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
  await w.waitUntilReady(SETTLE_TIMEOUT_MS);
  // BullMQ counts the completing attempt: the only one made (the permanent failure spent none).
  expect((await p.queue.getJob(jobId))?.attemptsMade).toBe(1);
  expect(await p.debitsOf(`after-revoke-${tries}`)).toBe(1);
  // Every job applied once: 'before' (1), each try's (5).
  expect(await p.balances()).toEqual({ w1: 99n - 5n * BigInt(tries), w2: 101n + 5n * BigInt(tries) });
  const faults = logEvents(w.logFile).filter((e) => e.event === 'worker_fault');
  expect(faults).toHaveLength(1);
  expect(faults[0]).toMatchObject({ kind: 'permission_denied' });
});
