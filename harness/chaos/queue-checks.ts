// The checks of the queue itself: it drained within the bound, and every message sent reached a
// final state (completed, or failed with a reason).
import type { Invariant } from './check-result.ts';
import type { CheckFacts } from './expected-model.ts';

export const drainedCheck: Invariant<Pick<CheckFacts, 'drained'>> = {
  name: 'the queue drained within the bound (nothing stuck)',
  group: 'queue',
  find: ({ drained }, fail) => {
    if (!drained.ok) fail({ detail: drained.detail });
  },
};

export const finalStateCheck: Invariant<Pick<CheckFacts, 'sent' | 'jobById' | 'intakeRun'>> = {
  name: 'every enqueued message reached a final state (completed, or failed with a reason)',
  group: 'queue',
  find: ({ sent, jobById, intakeRun }, fail) => {
    for (const [jobId, message] of sent) {
      const job = jobById.get(jobId);
      // An intake run's lossy failover may lose a valid job: the intake checks judge that.
      if (job === undefined && intakeRun && message.kind !== 'invalid') continue;
      if (job === undefined) fail({ jobId, operationId: message.operationId, kind: message.kind, state: 'missing' });
      else if (job.state !== 'completed' && job.state !== 'failed')
        fail({ jobId, operationId: message.operationId, state: job.state });
      else if (job.state === 'failed' && (job.failedReason ?? '') === '')
        fail({ jobId, operationId: message.operationId, state: 'failed without a reason' });
    }
  },
};
