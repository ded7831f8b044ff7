// The bench's ratios from case medians (src/harness/bench/summary.ts): e2eToFasterCeilingRatio
// holds the pipeline to the faster of the two single-decision ceilings, so a slow run of
// today's function cannot flatter it, and it stays null unless all three cases ran.
import { describe, expect, it } from 'vitest';
import type { CaseName } from '../../../src/harness/bench/bench-options.ts';
import type { CaseRunResult } from '../../../src/harness/bench/case-result.ts';
import { type CaseSummary, ratios } from '../../../src/harness/bench/summary.ts';

function summary(name: CaseName, perS: number): CaseSummary {
  return { case: name, throughputPerS: { median: perS, min: perS, max: perS } } as unknown as CaseSummary;
}

function paired(ratio: number): CaseRunResult {
  return { case: 'db-ceiling-paired', notes: { todayToFirstRatio: ratio } } as unknown as CaseRunResult;
}

describe('ratios', () => {
  it('holds e2e to the faster of the two single-decision ceilings', () => {
    const r = ratios([summary('e2e', 3_000), summary('db-ceiling', 1_500), summary('db-ceiling-first', 2_000)]);
    expect(r.e2eToDbCeilingRatio).toBe(2);
    expect(r.e2eToFasterCeilingRatio).toBe(1.5);
    const todayFaster = ratios([
      summary('e2e', 3_000),
      summary('db-ceiling', 2_400),
      summary('db-ceiling-first', 2_000),
    ]);
    expect(todayFaster.e2eToFasterCeilingRatio).toBe(1.25);
  });

  it('has no faster-ceiling ratio unless e2e and both ceilings ran', () => {
    expect(ratios([summary('e2e', 3_000), summary('db-ceiling', 1_500)]).e2eToFasterCeilingRatio).toBeNull();
    expect(
      ratios([summary('db-ceiling', 1_500), summary('db-ceiling-first', 2_000)]).e2eToFasterCeilingRatio,
    ).toBeNull();
  });

  it('rounds the median of an even number of paired runs to three places', () => {
    expect(ratios([], [paired(0.997), paired(1.0)]).singleToFirstPairedRatio).toBe(0.999);
    expect(ratios([], [paired(0.949), paired(0.95)]).singleToFirstPairedRatio).toBe(0.95);
  });
});
