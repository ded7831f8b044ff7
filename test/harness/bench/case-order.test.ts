// The bench alternates the order of its cases between runs (src/harness/bench/run-bench.ts), so
// no case always runs first or always follows the same one.
import { describe, expect, it } from 'vitest';
import { caseOrder } from '../../../src/harness/bench/run-bench.ts';

describe('caseOrder', () => {
  const cases = ['db-ceiling', 'db-ceiling-first', 'e2e', 'low-rate', 'low-rate-unbatched'];

  it('keeps the listed order in odd runs and reverses it in even ones', () => {
    expect(caseOrder(cases, 1)).toEqual(cases);
    expect(caseOrder(cases, 2)).toEqual([...cases].reverse());
    expect(caseOrder(cases, 3)).toEqual(cases);
    expect(cases[0]).toBe('db-ceiling');
  });

  it('puts the first case last in every other run', () => {
    const firsts = [1, 2, 3, 4].map((run) => caseOrder(cases, run)[0]);
    expect(firsts).toEqual(['db-ceiling', 'low-rate-unbatched', 'db-ceiling', 'low-rate-unbatched']);
  });

  it('refuses a run number below 1', () => {
    expect(() => caseOrder(cases, 0)).toThrow(RangeError);
  });
});
