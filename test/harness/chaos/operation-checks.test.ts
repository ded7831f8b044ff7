// The checks of each operation on hand-made histories: each holds on a consistent history and
// fails, naming the operation, when its property is switched off (a record of another request, a
// rejection, a double apply, an answer that disagrees, a conflict that moved money twice, an
// invalid message that moved money).
import { describe, expect, it } from 'vitest';
import {
  appliedOnceCheck,
  conflictsOnceCheck,
  invalidMessagesCheck,
  jobAnswersCheck,
  metadataKeptCheck,
  noRejectionCheck,
  storedRequestCheck,
  terminalOutcomeCheck,
} from '../../../harness/chaos/operation-checks.ts';
import { factsOf, job, judge, message, operation, recordOf, transfer } from './check-facts.ts';

const t1 = transfer('t1', 'w1', 'w2', 10n);
const applied = { outcome: 'applied' };

describe('every operation has one terminal outcome', () => {
  const sent: [string, ReturnType<typeof message>][] = [['j1', message(0, t1)]];

  it('holds with a record, or with every message failed with a reason', () => {
    expect(judge(terminalOutcomeCheck, factsOf({ ops: [t1], sent, records: [recordOf(t1)] }))).toEqual([]);
    const failed = job('j1', 'failed', null, { failedReason: 'attempts exhausted' });
    expect(judge(terminalOutcomeCheck, factsOf({ ops: [t1], sent, jobs: [failed] }))).toEqual([]);
  });

  it('fails on an operation with no record and a job that completed, or with no job at all', () => {
    expect(judge(terminalOutcomeCheck, factsOf({ ops: [t1], sent, jobs: [job('j1', 'completed')] }))).toEqual([
      { operationId: 't1', record: 'none', jobs: 'j1:completed' },
    ]);
    expect(judge(terminalOutcomeCheck, factsOf({ ops: [t1] }))).toEqual([
      { operationId: 't1', record: 'none', jobs: '' },
    ]);
  });
});

describe('every record keeps the metadata of the request it answers', () => {
  const tagged = operation('t2', 'transfer', { from: 'w1', to: 'w2', amount: '5', metadata: { order: '1', b: 'x' } });

  it('holds when the record keeps it, in any key order, and when neither has any', () => {
    const reordered = { ...recordOf(tagged), metadata: { b: 'x', order: '1' } };
    expect(judge(metadataKeptCheck, factsOf({ ops: [t1, tagged], records: [recordOf(t1), reordered] }))).toEqual([]);
  });

  it('fails on metadata lost or changed', () => {
    const lost = { ...recordOf(tagged), metadata: null };
    const changed = { ...recordOf(t1), metadata: { order: '2' } };
    expect(judge(metadataKeptCheck, factsOf({ ops: [t1, tagged], records: [changed, lost] }))).toEqual([
      { operationId: 't1', sent: 'none', kept: '[["order","2"]]' },
      { operationId: 't2', sent: '[["b","x"],["order","1"]]', kept: 'none' },
    ]);
  });
});

describe('every stored outcome is one of the requests sent', () => {
  it('holds when the record is the request sent', () => {
    expect(judge(storedRequestCheck, factsOf({ ops: [t1], records: [recordOf(t1)] }))).toEqual([]);
  });

  it('fails on a record of another body, of another amount, or of an operation never sent', () => {
    const other = { ...recordOf(t1), request_hash: 'h:forged', to_wallet: 'w3' };
    expect(judge(storedRequestCheck, factsOf({ ops: [t1], records: [other] }))).toEqual([
      { operationId: 't1', storedHash: 'h:forged', from: 'w1', to: 'w3', amount: '10' },
    ]);
    const more = { ...recordOf(t1), amount: 11n };
    expect(judge(storedRequestCheck, factsOf({ ops: [t1], records: [more] }))).toEqual([
      { operationId: 't1', storedAmount: '11', sentAmount: '10' },
    ]);
    const stray = recordOf(transfer('t9', 'w1', 'w2', 1n));
    expect(judge(storedRequestCheck, factsOf({ ops: [t1], records: [recordOf(t1), stray] }))).toEqual([
      { operationId: 't9', problem: 'record of an operation never sent as a valid message' },
    ]);
  });
});

describe('no valid transfer was rejected', () => {
  it('holds when every transfer applied, and fails on a rejection', () => {
    expect(judge(noRejectionCheck, factsOf({ ops: [t1], records: [recordOf(t1)] }))).toEqual([]);
    const rejected = recordOf(t1, 'rejected', 'insufficient_funds');
    expect(judge(noRejectionCheck, factsOf({ ops: [t1], records: [rejected] }))).toEqual([
      { operationId: 't1', status: 'rejected', reason: 'insufficient_funds' },
    ]);
  });
});

describe("every job's answer agrees with the record, and one delivery applied", () => {
  const sent: [string, ReturnType<typeof message>][] = [
    ['j1', message(0, t1)],
    ['j2', message(1, t1, { kind: 'duplicate' })],
  ];
  const duplicate = { outcome: 'duplicate', stored: { status: 'applied' } };

  it('hold on one applied answer and one duplicate', () => {
    const facts = factsOf({
      ops: [t1],
      sent,
      records: [recordOf(t1)],
      jobs: [job('j1', 'completed', applied), job('j2', 'completed', duplicate)],
    });
    expect(judge(jobAnswersCheck, facts)).toEqual([]);
    expect(judge(appliedOnceCheck, facts)).toEqual([]);
  });

  it('fail when both deliveries answered applied (idempotency off)', () => {
    const facts = factsOf({
      ops: [t1],
      sent,
      records: [recordOf(t1)],
      jobs: [job('j1', 'completed', applied), job('j2', 'completed', applied)],
    });
    expect(judge(appliedOnceCheck, facts)).toEqual([{ operationId: 't1', appliedAnswers: 2, jobs: 'j1 j2' }]);
  });

  it('the answers check fails on an applied answer the record contradicts, and on one with no record', () => {
    const rejected = recordOf(t1, 'rejected', 'insufficient_funds');
    const jobs = [job('j1', 'completed', applied)];
    expect(judge(jobAnswersCheck, factsOf({ ops: [t1], sent, records: [rejected], jobs }))).toEqual([
      { operationId: 't1', jobId: 'j1', answer: 'applied', recordStatus: 'rejected', sameRequest: true },
    ]);
    expect(judge(jobAnswersCheck, factsOf({ ops: [t1], sent, jobs }))).toEqual([
      { operationId: 't1', jobId: 'j1', answer: 'applied', recordStatus: null, sameRequest: null },
    ]);
  });
});

describe('conflicts never moved money twice', () => {
  const conflicted = { ...t1, variants: new Map([...t1.variants, ['h:t1-other', 11n]]) };
  const debit = (amount: bigint) => ({ operation_id: 't1', wallet_id: 'w1', amount: -amount, fence: 1n });

  it('holds with one debit of the stored amount, and fails with two', () => {
    const records = [recordOf(t1)];
    expect(judge(conflictsOnceCheck, factsOf({ ops: [conflicted], records, debits: [debit(10n)] }))).toEqual([]);
    expect(
      judge(conflictsOnceCheck, factsOf({ ops: [conflicted], records, debits: [debit(10n), debit(11n)] })),
    ).toEqual([{ operationId: 't1', debits: 2, debitAmounts: '10 11', storedAmount: '10' }]);
  });
});

describe('invalid messages moved no money', () => {
  const invalid = message(0, null, { operationId: 'bad-1' });
  const refused = job('j1', 'failed', null, { failedReason: 'invalid_request: amount must be positive' });

  it('holds when the message failed as invalid_request on its first attempt, nothing under its id', () => {
    expect(judge(invalidMessagesCheck, factsOf({ ops: [], sent: [['j1', invalid]], jobs: [refused] }))).toEqual([]);
  });

  it('fails when it was retried, or when a record was written under its id', () => {
    const retried = { ...refused, attemptsMade: 3 };
    expect(judge(invalidMessagesCheck, factsOf({ ops: [], sent: [['j1', invalid]], jobs: [retried] }))).toMatchObject([
      { jobId: 'j1', attemptsMade: 3 },
    ]);
    const record = { ...recordOf(t1), operation_id: 'bad-1' };
    const facts = factsOf({ ops: [], sent: [['j1', invalid]], jobs: [refused], records: [record] });
    expect(judge(invalidMessagesCheck, facts)).toMatchObject([
      { jobId: 'j1', problem: 'money moved or a record was written under its id' },
    ]);
  });
});
