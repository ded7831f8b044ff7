// The bench's ratios from case medians (harness/bench/summary.ts): e2eToFasterCeilingRatio
// holds the pipeline to the faster of the two single-decision ceilings, so a slow run of
// today's function cannot flatter it, and it stays null unless all three cases ran. The
// payments' ratios pair each run with the same run's e2e before taking the median.
import { describe, expect, it } from 'vitest';
import type { CaseName } from '../../../harness/bench/bench-options.ts';
import type { CaseRunResult } from '../../../harness/bench/case-result.ts';
import { paymentMachineMs, paymentsPerS } from '../../../harness/bench/payments-case.ts';
import { type CaseSummary, paymentRatios, ratios } from '../../../harness/bench/summary.ts';

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

  describe('of e2e-payments', () => {
    const result = (
      name: CaseName,
      run: number,
      perS: number,
      machineMs: number | null,
      notes: Record<string, number> = {},
    ): CaseRunResult =>
      ({
        case: name,
        run,
        throughputPerS: perS,
        cpu: machineMs === null ? null : { msPerTransfer: { machine: machineMs } },
        notes,
      }) as unknown as CaseRunResult;
    // Run 1 on a fast machine, run 2 on one twice as slow: e2e and the payments slow down together.
    const runs = [
      result('e2e', 1, 4_000, 0.5),
      result('e2e-payments-hold', 1, 3_000, 0.4),
      result('e2e-payments-capture', 1, 3_000, 0.6, { paymentsPerS: 1_500, machineMsPerPayment: 1.0 }),
      result('e2e-payments-split', 1, 2_000, 0.8),
      result('e2e', 2, 2_000, 1.0),
      result('e2e-payments-hold', 2, 1_500, 0.8),
      result('e2e-payments-capture', 2, 1_500, 1.2, { paymentsPerS: 750, machineMsPerPayment: 2.0 }),
      result('e2e-payments-split', 2, 1_000, 1.7),
    ];

    it('prices a payment as its hold and its capture, against the same run’s transfer', () => {
      expect(paymentMachineMs(runs[1], runs[2])).toBe(1);
      expect(paymentsPerS(20_000, 10_000, 10_000)).toBe(1_000);
      expect(paymentsPerS(20_000, null, 10_000)).toBeNull();
      const r = paymentRatios(runs);
      // Both runs give 2.0 against their own e2e; against the other run's they would not.
      expect(r.paymentCostToTransferRatio).toBe(2);
      expect(r.splitCostToTransferRatio).toBe(1.65);
      expect(r.paymentsToE2eRatio).toBe(0.375);
      expect(r.splitsToE2eRatio).toBe(0.5);
      expect(r.paymentsPerS).toBe(1_125);
      expect(r.machineMsPerPayment).toBe(1.5);
      expect(ratios([], runs).paymentCostToTransferRatio).toBe(2);
    });

    it('has no ratio to e2e without an e2e run, or without a CPU account', () => {
      const alone = paymentRatios(runs.filter((r) => r.case !== 'e2e'));
      expect(alone.paymentCostToTransferRatio).toBeNull();
      expect(alone.splitsToE2eRatio).toBeNull();
      expect(alone.paymentsPerS).toBe(1_125);
      const unaccounted = paymentRatios([result('e2e', 1, 4_000, null), ...runs.slice(1, 4)]);
      expect(unaccounted.paymentCostToTransferRatio).toBeNull();
      expect(unaccounted.paymentsToE2eRatio).toBe(0.375);
      expect(paymentRatios([]).paymentsPerS).toBeNull();
    });
  });
});
