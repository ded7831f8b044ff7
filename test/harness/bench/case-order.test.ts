// The bench alternates the order of its cases between runs (harness/bench/run-bench.ts), so
// no case always runs first or always follows the same one; e2e-payments' parts move as one
// group, holds before their captures, in every run.
import { describe, expect, it } from 'vitest';
import { type CaseName, caseGroupsOf, casesOf, PAYMENT_PARTS } from '../../../harness/bench/bench-options.ts';
import { caseOrder } from '../../../harness/bench/run-bench.ts';

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

  it('keeps the payment parts together and in their order, and every other case on its own', () => {
    const all = casesOf(['e2e', 'e2e-payments', 'low-rate']);
    const groups = caseGroupsOf(all);
    expect(groups).toEqual([['e2e'], [...PAYMENT_PARTS], ['low-rate'], ['low-rate-unbatched']]);
    const flat = (run: number): CaseName[] => caseOrder(groups, run).flat();
    expect(flat(1)).toEqual(all);
    expect(flat(2)).toEqual(['low-rate-unbatched', 'low-rate', ...PAYMENT_PARTS, 'e2e']);
    // Without payments the groups are the cases, so the order is exactly caseOrder's of the cases.
    const others = casesOf(['db-ceiling', 'e2e', 'low-rate']);
    expect(caseOrder(caseGroupsOf(others), 2).flat()).toEqual(caseOrder(others, 2));
  });
});
