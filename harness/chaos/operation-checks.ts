// The end-to-end checks of each operation, which need the harness's record of what was sent:
// one terminal outcome each, the stored record one of the requests sent, no valid transfer
// rejected, every job's answer agreeing with the record, at most one delivery applied, conflicts
// moving money once, and invalid messages refused without moving money.
import { classifyFailure } from '../../src/ledger/vocabulary.ts';
import type { ChaosMessage } from './chaos-workload.ts';
import { type Invariant, short } from './check-result.ts';
import type { DebitRow, RecordRow } from './database-state.ts';
import type { CheckFacts } from './expected-model.ts';
import { type FinalJob, type JobAnswer, outcomeOf } from './final-job.ts';
import { judgedByWalletChecks } from './wallet-checks.ts';

export const TERMINAL_OUTCOME_CHECK =
  'every operation has exactly one terminal outcome, or all its messages are failed with a reason';

export const terminalOutcomeCheck: Invariant<Pick<CheckFacts, 'workload' | 'records' | 'deliveries' | 'intakeRun'>> = {
  name: TERMINAL_OUTCOME_CHECK,
  group: 'queue',
  find: ({ workload, records, deliveries, intakeRun }, fail) => {
    for (const op of workload.operations.values()) {
      if (records.has(op.operationId) || intakeRun) continue;
      const opJobs = deliveries.get(op.operationId) ?? [];
      const unanswered = opJobs.filter(({ job }) => !(job.state === 'failed' && (job.failedReason ?? '') !== ''));
      if (unanswered.length > 0 || opJobs.length === 0) {
        const jobs = opJobs.map(({ job }) => `${job.jobId}:${job.state}`).join(' ');
        fail({ operationId: op.operationId, record: 'none', jobs });
      }
    }
  },
};

export const storedRequestCheck: Invariant<Pick<CheckFacts, 'workload' | 'records'>> = {
  name: 'every stored outcome is one of the requests sent under its id',
  group: 'exactly-once',
  find: ({ workload, records }, fail) => {
    for (const op of workload.operations.values()) {
      const record = records.get(op.operationId);
      if (record === undefined) continue;
      const sent = op.variants.has(record.request_hash);
      if (op.kind !== 'transfer') {
        if (!sent || record.from_wallet !== op.from || record.kind !== op.kind) {
          const storedHash = record.request_hash.slice(0, 12);
          fail({
            operationId: op.operationId,
            storedHash,
            storedKind: record.kind,
            sentKind: op.kind,
            from: record.from_wallet,
          });
        }
      } else if (!sent || record.from_wallet !== op.from || record.to_wallet !== op.to) {
        const storedHash = record.request_hash.slice(0, 12);
        const { from_wallet: from, to_wallet: to } = record;
        fail({ operationId: op.operationId, storedHash, from, to, amount: String(record.amount) });
      } else if (op.variants.get(record.request_hash) !== record.amount) {
        const sentAmount = String(op.variants.get(record.request_hash));
        fail({ operationId: op.operationId, storedAmount: String(record.amount), sentAmount });
      }
    }
    for (const record of records.values()) {
      if (workload.operations.has(record.operation_id)) continue;
      fail({
        operationId: short(record.operation_id),
        problem: 'record of an operation never sent as a valid message',
      });
    }
  },
};

/** Metadata as one canonical text (keys sorted), '' for none or `{}`. */
function metadataText(metadata: Readonly<Record<string, string>> | null | undefined): string {
  const keys = Object.keys(metadata ?? {}).sort();
  return keys.length === 0 ? '' : JSON.stringify(keys.map((k) => [k, metadata?.[k]]));
}

export const metadataKeptCheck: Invariant<Pick<CheckFacts, 'workload' | 'records'>> = {
  name: 'every record keeps the metadata of the request it answers',
  group: 'exactly-once',
  find: ({ workload, records }, fail) => {
    for (const op of workload.operations.values()) {
      const record = records.get(op.operationId);
      const wire = record === undefined ? undefined : op.wires.get(record.request_hash);
      if (record === undefined || wire === undefined) continue;
      const sent = metadataText(wire.metadata);
      const kept = metadataText(record.metadata);
      if (sent !== kept) fail({ operationId: op.operationId, sent: sent || 'none', kept: kept || 'none' });
    }
  },
};

export const noRejectionCheck: Invariant<Pick<CheckFacts, 'workload' | 'records'>> = {
  name: 'no valid transfer was rejected (opening balances cover every sender but the credit ones)',
  group: 'money',
  find: ({ workload, records }, fail) => {
    for (const op of workload.operations.values()) {
      const record = records.get(op.operationId);
      if (op.kind !== 'transfer' || record === undefined || record.status === 'applied') continue;
      // A wallet opened at 0 with a credit limit is meant to meet it (credit-checks.ts).
      if (workload.credit.openingLimits.has(op.from)) continue;
      // The wallets' stream, and a wallet frozen or closed: wallet-checks.ts judges the refusal.
      if (judgedByWalletChecks(workload, record)) continue;
      fail({ operationId: op.operationId, status: record.status, reason: record.reason });
    }
  },
};

/** Whether a job's answer agrees with the record, given the job's request is the record's (`same`). */
function answerAgrees(answer: JobAnswer, record: RecordRow, same: boolean): boolean {
  switch (answer.outcome) {
    case 'applied':
      return same && record.status === 'applied';
    case 'duplicate':
      return same && answer.stored?.status === record.status;
    case 'conflict':
      return !same;
    case 'rejected':
      return same && record.status === 'rejected' && answer.reason === record.reason;
    default:
      return false;
  }
}

export const jobAnswersCheck: Invariant<Pick<CheckFacts, 'records' | 'deliveries'>> = {
  name: "every job's answer agrees with the stored record (applied / duplicate / conflict)",
  group: 'exactly-once',
  find: ({ records, deliveries }, fail) => {
    for (const [operationId, entries] of deliveries) {
      const record = records.get(operationId);
      for (const { job, message } of entries) {
        if (job.state !== 'completed') continue;
        const answer = outcomeOf(job.returnvalue);
        const same = record === undefined ? null : record.request_hash === message.hash;
        if (answer !== null && record !== undefined && answerAgrees(answer, record, same === true)) continue;
        const answerText = answer?.outcome ?? String(job.returnvalue);
        fail({
          operationId,
          jobId: job.jobId,
          answer: answerText,
          recordStatus: record?.status ?? null,
          sameRequest: same,
        });
      }
    }
  },
};

export const appliedOnceCheck: Invariant<Pick<CheckFacts, 'records' | 'deliveries'>> = {
  name: 'each operation was applied by at most one delivery',
  group: 'exactly-once',
  find: ({ records, deliveries }, fail) => {
    for (const [operationId, entries] of deliveries) {
      // An answer with no record is the answers check's counterexample, not counted here.
      if (!records.has(operationId)) continue;
      const applied = entries.filter(
        ({ job }) => job.state === 'completed' && outcomeOf(job.returnvalue)?.outcome === 'applied',
      ).length;
      if (applied > 1)
        fail({ operationId, appliedAnswers: applied, jobs: entries.map(({ job }) => job.jobId).join(' ') });
    }
  },
};

export const conflictsOnceCheck: Invariant<Pick<CheckFacts, 'workload' | 'records' | 'debits'>> = {
  name: 'conflicts never moved money twice (one debit, of the stored amount)',
  group: 'exactly-once',
  find: ({ workload, records, debits }, fail) => {
    const debitsByOp = new Map<string, DebitRow[]>();
    for (const d of debits) debitsByOp.set(d.operation_id, [...(debitsByOp.get(d.operation_id) ?? []), d]);
    for (const op of workload.operations.values()) {
      if (op.variants.size < 2) continue;
      const opDebits = debitsByOp.get(op.operationId) ?? [];
      const record = records.get(op.operationId);
      const first = opDebits[0];
      const wrongAmount = first !== undefined && (record === undefined || -first.amount !== record.amount);
      if (opDebits.length > 1 || (opDebits.length === 1 && wrongAmount)) {
        fail({
          operationId: op.operationId,
          debits: opDebits.length,
          debitAmounts: opDebits.map((d) => (-d.amount).toString()).join(' '),
          storedAmount: record?.amount == null ? null : String(record.amount),
        });
      }
    }
  },
};

/** Whether an invalid message's job is not as it must be: failed as invalid_request, on its first attempt. */
function invalidJobProblem(job: FinalJob | undefined): boolean {
  return (
    job === undefined ||
    job.state !== 'failed' ||
    classifyFailure(job.failedReason ?? '').kind !== 'invalid_request' ||
    job.attemptsMade > 1
  );
}

export const invalidMessagesCheck: Invariant<Pick<CheckFacts, 'sent' | 'jobById' | 'records' | 'debits'>> = {
  name: 'invalid messages are in the failed set as invalid_request and moved no money',
  group: 'input',
  find: ({ sent, jobById, records, debits }, fail) => {
    const entryOps = new Set(debits.map((d) => d.operation_id));
    for (const [jobId, message] of sent) {
      if (message.kind !== 'invalid') continue;
      const job = jobById.get(jobId);
      const example = {
        jobId,
        defect: message.defect,
        state: job?.state ?? 'missing',
        reason: short(job?.failedReason ?? '', 80),
        attemptsMade: job?.attemptsMade ?? 0,
      };
      if (invalidJobProblem(job)) fail(example);
      else if (movedUnder(message, records, entryOps))
        fail({ ...example, problem: 'money moved or a record was written under its id' });
    }
  },
};

/** Whether a record or a ledger entry exists under the message's operation id. */
function movedUnder(
  message: ChaosMessage,
  records: ReadonlyMap<string, RecordRow>,
  entryOps: ReadonlySet<string>,
): boolean {
  return message.operationId !== null && (records.has(message.operationId) || entryOps.has(message.operationId));
}
