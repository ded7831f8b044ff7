// The load a fault met, from the jobs' submit and answer times: a pure function, checked on
// hand-made jobs (the chaos runs check that no fault met an idle system).
import { describe, expect, it } from 'vitest';
import type { ChaosMessage } from '../../../harness/chaos/chaos-workload.ts';
import { compareSnapshots } from '../../../harness/chaos/cluster-faults.ts';
import { attachFaultLoads } from '../../../harness/chaos/fault-load.ts';
import type { FaultRecord } from '../../../harness/chaos/faults.ts';
import type { FinalJob } from '../../../harness/chaos/final-job.ts';

const T0 = 1_000_000;

function job(jobId: string, enqueuedAtMs: number, finishedAtMs: number | null): FinalJob {
  return {
    jobId,
    name: 'transfer',
    state: finishedAtMs === null ? 'waiting' : 'completed',
    returnvalue: null,
    failedReason: null,
    attemptsMade: 1,
    attemptsStarted: 1,
    timestamp: T0 + enqueuedAtMs,
    processedOn: null,
    finishedOn: finishedAtMs === null ? null : T0 + finishedAtMs,
    data: {},
  };
}

function message(kind: ChaosMessage['kind']): ChaosMessage {
  return { seq: 0, kind, jobName: 'transfer', data: {}, operationId: 'op', hash: null, defect: null };
}

function fault(id: number, startMs: number, endMs: number): FaultRecord {
  return { id, kind: 'link-cut', startMs, endMs, worker: 1, link: 'redis', detail: '', error: null };
}

describe('attachFaultLoads', () => {
  it('counts transfers in flight during a window and answered inside it; invalid messages and unsent jobs do not count', () => {
    const jobs = [
      job('a', 0, 500), // done before the fault
      job('b', 900, 1_200), // spans its start
      job('c', 1_100, 1_400), // inside
      job('d', 1_900, 3_000), // spans its end
      job('e', 2_500, 2_600), // after
      job('f', 1_500, null), // never answered
      job('bad', 1_000, 1_500), // an invalid message
      job('ghost', 1_000, 1_500), // in the queue, never recorded as sent
    ];
    const sent = new Map<string, ChaosMessage>([
      ['a', message('original')],
      ['b', message('original')],
      ['c', message('duplicate')],
      ['d', message('conflict')],
      ['e', message('original')],
      ['f', message('original')],
      ['bad', message('invalid')],
    ]);
    const records = [fault(1, 1_000, 2_000), fault(2, 2_550, 2_550)];
    attachFaultLoads(records, jobs, sent, { offsetOfWallMs: (ms) => ms - T0 });
    expect(records[0]?.load).toEqual({ inFlight: 4, answeredDuring: 2 });
    // An instantaneous fault at 2.55 s is measured up to 3.55 s: d, e and f in flight, d and e answered.
    expect(records[1]?.load).toEqual({ inFlight: 3, answeredDuring: 2 });
  });

  it("counts a transfer from the producer's first try, so one the fault kept from being enqueued was in flight", () => {
    const jobs = [job('late', 2_500, 2_600)];
    const sent = new Map([['late', message('original')]]);
    const records = [fault(1, 1_000, 2_000)];
    attachFaultLoads(records, jobs, sent, { offsetOfWallMs: (ms) => ms - T0 });
    expect(records[0]?.load).toEqual({ inFlight: 0, answeredDuring: 0 });
    attachFaultLoads(records, jobs, sent, { offsetOfWallMs: (ms) => ms - T0 }, new Map([['late', 1_500]]));
    expect(records[0]?.load).toEqual({ inFlight: 1, answeredDuring: 0 });
  });
});

describe('compareSnapshots', () => {
  it('counts increments lost per counter, lock keys lost unless their lease had run out anyway', () => {
    const before = {
      fences: new Map([
        ['p:{wallet:w1}:fence', 10n],
        ['p:{wallet:w2}:fence', 4n],
        ['p:{wallet:w3}:fence', 3n],
      ]),
      locks: new Map([
        ['p:{wallet:w1}:lock', { owner: 'o1', pttlMs: 900 }], // gone on the new master: lost
        ['p:{wallet:w2}:lock', { owner: 'o2', pttlMs: 900 }], // another owner there: lost
        ['p:{wallet:w3}:lock', { owner: 'o3', pttlMs: 900 }], // the same: kept
        ['p:{wallet:w4}:lock', { owner: 'o4', pttlMs: 20 }], // would have expired by the read anyway
      ]),
    };
    const after = new Map<string, string | null>([
      ['p:{wallet:w1}:fence', '3'],
      ['p:{wallet:w2}:fence', '5'],
      ['p:{wallet:w3}:fence', null],
      ['p:{wallet:w1}:lock', null],
      ['p:{wallet:w2}:lock', 'other'],
      ['p:{wallet:w3}:lock', 'o3'],
      ['p:{wallet:w4}:lock', null],
    ]);
    expect(compareSnapshots(before, after, 50)).toEqual({
      fenceKeysBehind: 2,
      fenceIncrementsLost: 7 + 3,
      lockKeysLost: 2,
      walletsBehind: { w1: '10', w3: '3' },
    });
  });
});
