// The queue's checks on hand-made histories: each holds on a consistent one and fails, naming
// the job, when its property is switched off.
import { describe, expect, it } from 'vitest';
import { drainedCheck, finalStateCheck } from '../../../harness/chaos/queue-checks.ts';
import { factsOf, job, judge, message, transfer } from './check-facts.ts';

const t1 = transfer('t1', 'w1', 'w2', 10n);

describe('the queue drained', () => {
  it('holds when the drain ended in time, and fails with its detail when not', () => {
    expect(judge(drainedCheck, factsOf({ ops: [] }))).toEqual([]);
    const stuck = factsOf({ ops: [], drained: { ok: false, detail: '3 jobs active' } });
    expect(judge(drainedCheck, stuck)).toEqual([{ detail: '3 jobs active' }]);
  });
});

describe('every message reached a final state', () => {
  const sent: [string, ReturnType<typeof message>][] = [['j1', message(0, t1)]];

  it('holds when every job completed or failed with a reason', () => {
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [job('j1', 'completed')] }))).toEqual([]);
    const failed = job('j1', 'failed', null, { failedReason: 'attempts exhausted' });
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [failed] }))).toEqual([]);
  });

  it('fails on a job still waiting, failed without a reason, or missing', () => {
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [job('j1', 'waiting')] }))).toEqual([
      { jobId: 'j1', operationId: 't1', state: 'waiting' },
    ]);
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [job('j1', 'failed')] }))).toEqual([
      { jobId: 'j1', operationId: 't1', state: 'failed without a reason' },
    ]);
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [] }))).toEqual([
      { jobId: 'j1', operationId: 't1', kind: 'original', state: 'missing' },
    ]);
  });

  it("leaves an intake run's missing valid job to the intake checks", () => {
    expect(judge(finalStateCheck, factsOf({ ops: [t1], sent, jobs: [], intakeRun: true }))).toEqual([]);
  });
});
