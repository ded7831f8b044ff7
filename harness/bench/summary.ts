// From the runs to what the acceptance reads: per case the median over the runs (and
// the spread), the peak memory of its processes, and the ratios between cases. A ratio is null
// when one of its cases was not run (a --modes subset) or gave no figure.

import type { CaseName } from './bench-options.ts';
import type { CaseRunResult, LatencyFigures } from './case-result.ts';
import { CPU_PARTS, type CpuAccount, type CpuPart } from './cpu-account.ts';
import { median, type Percentiles } from './measure.ts';

export interface MedianPercentiles {
  readonly p50: number | null;
  readonly p95: number | null;
  readonly p99: number | null;
}

export interface CaseSummary {
  readonly case: CaseName;
  readonly runs: number;
  readonly throughputPerS: { readonly median: number | null; readonly min: number | null; readonly max: number | null };
  /** Medians over the runs of each run's percentile. */
  readonly latencyMs: Readonly<Record<keyof LatencyFigures, MedianPercentiles | null>>;
  /** The largest VmHWM of any of the case's processes over all runs, MiB; null when it has none. */
  readonly peakRssMbMax: number | null;
  /** Medians over the runs of each part's CPU ms per transfer (cpu-account.ts); null when no run had an account. */
  readonly cpuMsPerTransfer: Readonly<Record<CpuPart | 'other', number | null>> | null;
  /** Median over the runs of the machine's busy cores during the account's window. */
  readonly machineCores: number | null;
  /** The intake cases: medians of the producer phase's CPU ms per request (see CaseRunResult.producerCpu). */
  readonly producerCpuMsPerTransfer: Readonly<Record<CpuPart | 'other', number | null>> | null;
  readonly verified: boolean;
}

export interface Ratios {
  /** e2e / db-ceiling (median transfers/s). */
  readonly e2eToDbCeilingRatio: number | null;
  /**
   * e2e over the faster of db-ceiling and db-ceiling-first (median transfers/s): the per-commit
   * ceiling of the leanest single decision this run measured. Run as separate cases, the first
   * migration's function has been the faster one (singleToFirstDecisionRatio below 1), so
   * e2eToDbCeilingRatio alone flatters the pipeline. Null unless both ran.
   */
  readonly e2eToFasterCeilingRatio: number | null;
  /** db-ceiling / db-ceiling-first: today's single-transfer decision over the first migration's, same run. */
  readonly singleToFirstDecisionRatio: number | null;
  /**
   * db-ceiling-paired: the same two functions alternating in blocks inside one run, so the
   * machine's drift falls on both alike; today's calls/s over the first's (median over the runs).
   */
  readonly singleToFirstPairedRatio: number | null;
  readonly e2eUnbatchedToDbCeilingRatio: number | null;
  readonly e2eToSeedDesignRatio: number | null;
  readonly e2eToPeerRatio: number | null;
  /** hot / e2e. */
  readonly hotToUniformRatio: number | null;
  readonly e2eToQueueCeilingRatio: number | null;
  /** low-rate p50 − low-rate-unbatched p50, enqueue→commit, ms (medians over the runs). */
  readonly lowRateBatchingAddedP50Ms: number | null;
  readonly lowRateBatchingAddedP95Ms: number | null;
  /** Of the slot time of the hot case's workers, the share spent waiting for wallet leases (median over the runs). */
  readonly hotLockWaitShareOfSlotTime: number | null;
  readonly e2eLockWaitShareOfSlotTime: number | null;
  /** e2e-intake-1 / e2e and e2e-intake-100 / e2e (median transfers/s). */
  readonly e2eIntake1ToE2eRatio: number | null;
  readonly e2eIntake100ToE2eRatio: number | null;
  /** e2e-traced / e2e (median transfers/s): what tracing every transfer costs. */
  readonly e2eTracedToE2eRatio: number | null;
  /**
   * PostgreSQL CPU ms per transfer an intake case costs more than e2e: its pipeline's account plus
   * its producer phase's, minus e2e's (whose enqueue touches no database). Medians over the runs.
   */
  readonly intake1ExtraPostgresMsPerTransfer: number | null;
  readonly intake100ExtraPostgresMsPerTransfer: number | null;
  /** e2e-payments: payments (a hold and its capture) per second, median over the runs. */
  readonly paymentsPerS: number | null;
  /** e2e-payments: machine CPU ms of one payment (its hold's and its capture's), median over the runs. */
  readonly machineMsPerPayment: number | null;
  /**
   * Machine CPU ms per payment over e2e's machine CPU ms per transfer of the same run; median
   * over the runs. The payments' acceptance reads it (at most 2.2).
   */
  readonly paymentCostToTransferRatio: number | null;
  /** Machine CPU ms per split (SPLIT_LEGS legs) over e2e's per transfer, the same way. */
  readonly splitCostToTransferRatio: number | null;
  /** Payments/s over e2e's transfers/s of the same run; median over the runs. */
  readonly paymentsToE2eRatio: number | null;
  /** Splits/s over e2e's transfers/s of the same run; median over the runs. */
  readonly splitsToE2eRatio: number | null;
}

const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;

function medianOf(values: readonly (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null);
  return present.length === 0 ? null : median(present);
}

function medianPercentiles(all: readonly (Percentiles | null)[]): MedianPercentiles | null {
  const present = all.filter((p): p is Percentiles => p !== null);
  if (present.length === 0) return null;
  const pick = (key: 'p50' | 'p95' | 'p99') => {
    const m = median(present.map((p) => p[key]));
    return m === null ? null : round(m, 2);
  };
  return { p50: pick('p50'), p95: pick('p95'), p99: pick('p99') };
}

export function summarize(results: readonly CaseRunResult[], cases: readonly CaseName[]): CaseSummary[] {
  return cases.flatMap((caseName): CaseSummary[] => {
    const runs = results.filter((r) => r.case === caseName);
    if (runs.length === 0) return [];
    const throughputs = runs.map((r) => r.throughputPerS).filter((t): t is number => t !== null);
    const peaks = runs.flatMap((r) => r.processes.map((p) => p.peakRssMb)).filter((p): p is number => p !== null);
    const latency = (key: keyof LatencyFigures) => medianPercentiles(runs.map((r) => r.latencyMs[key]));
    const med = median(throughputs);
    return [
      {
        case: caseName,
        runs: runs.length,
        throughputPerS: {
          median: med === null ? null : round(med, 1),
          min: throughputs.length === 0 ? null : round(Math.min(...throughputs), 1),
          max: throughputs.length === 0 ? null : round(Math.max(...throughputs), 1),
        },
        latencyMs: {
          enqueueToCommit: latency('enqueueToCommit'),
          enqueueToAnswer: latency('enqueueToAnswer'),
          activeToCommit: latency('activeToCommit'),
          call: latency('call'),
        },
        peakRssMbMax: peaks.length === 0 ? null : Math.max(...peaks),
        ...cpuMedians(runs),
        producerCpuMsPerTransfer: partMedians(runs.flatMap((r) => (r.producerCpu ? [r.producerCpu] : []))),
        verified: runs.every((r) => r.verification.ok),
      },
    ];
  });
}

function partMedians(accounts: readonly CpuAccount[]): Record<CpuPart | 'other', number | null> | null {
  if (accounts.length === 0) return null;
  const part = (p: CpuPart | 'other') => {
    const m = medianOf(accounts.map((a) => a.msPerTransfer[p]));
    return m === null ? null : round(m, 3);
  };
  return Object.fromEntries([...CPU_PARTS, 'other' as const].map((p) => [p, part(p)])) as Record<
    CpuPart | 'other',
    number | null
  >;
}

function cpuMedians(runs: readonly CaseRunResult[]): Pick<CaseSummary, 'cpuMsPerTransfer' | 'machineCores'> {
  const accounts = runs.flatMap((r) => (r.cpu === null ? [] : [r.cpu]));
  if (accounts.length === 0) return { cpuMsPerTransfer: null, machineCores: null };
  const cores = medianOf(accounts.map((a) => a.machineCores));
  return { cpuMsPerTransfer: partMedians(accounts), machineCores: cores === null ? null : round(cores, 2) };
}

/** Median over the runs of a case of one numeric note. */
function noteMedian(results: readonly CaseRunResult[], caseName: CaseName, note: string): number | null {
  const values = results
    .filter((r) => r.case === caseName)
    .map((r) => r.notes[note])
    .filter((v): v is number => typeof v === 'number');
  const m = median(values);
  return m === null ? null : round(m, 3);
}

export function ratios(summaries: readonly CaseSummary[], results: readonly CaseRunResult[] = []): Ratios {
  const throughput = (c: CaseName) => summaries.find((s) => s.case === c)?.throughputPerS.median ?? null;
  const ratio = (a: CaseName, b: CaseName) => {
    const x = throughput(a);
    const y = throughput(b);
    return x === null || y === null || y === 0 ? null : round(x / y, 3);
  };
  // e2e over the faster ceiling is the smaller of e2e's two ratios.
  const smaller = (x: number | null, y: number | null) => (x === null || y === null ? null : Math.min(x, y));
  const lowRate = (c: CaseName, key: 'p50' | 'p95') =>
    summaries.find((s) => s.case === c)?.latencyMs.enqueueToCommit?.[key] ?? null;
  const added = (key: 'p50' | 'p95') => {
    const on = lowRate('low-rate', key);
    const off = lowRate('low-rate-unbatched', key);
    return on === null || off === null ? null : round(on - off, 2);
  };
  return {
    e2eToDbCeilingRatio: ratio('e2e', 'db-ceiling'),
    e2eToFasterCeilingRatio: smaller(ratio('e2e', 'db-ceiling'), ratio('e2e', 'db-ceiling-first')),
    singleToFirstDecisionRatio: ratio('db-ceiling', 'db-ceiling-first'),
    singleToFirstPairedRatio: noteMedian(results, 'db-ceiling-paired', 'todayToFirstRatio'),
    e2eUnbatchedToDbCeilingRatio: ratio('e2e-unbatched', 'db-ceiling'),
    e2eToSeedDesignRatio: ratio('e2e', 'seed-design'),
    e2eToPeerRatio: ratio('e2e', 'peer-graphile-worker'),
    hotToUniformRatio: ratio('hot', 'e2e'),
    e2eToQueueCeilingRatio: ratio('e2e', 'queue-ceiling'),
    lowRateBatchingAddedP50Ms: added('p50'),
    lowRateBatchingAddedP95Ms: added('p95'),
    hotLockWaitShareOfSlotTime: noteMedian(results, 'hot', 'lockWaitShareOfSlotTime'),
    e2eLockWaitShareOfSlotTime: noteMedian(results, 'e2e', 'lockWaitShareOfSlotTime'),
    e2eIntake1ToE2eRatio: ratio('e2e-intake-1', 'e2e'),
    e2eIntake100ToE2eRatio: ratio('e2e-intake-100', 'e2e'),
    e2eTracedToE2eRatio: ratio('e2e-traced', 'e2e'),
    intake1ExtraPostgresMsPerTransfer: extraPostgres(summaries, 'e2e-intake-1'),
    intake100ExtraPostgresMsPerTransfer: extraPostgres(summaries, 'e2e-intake-100'),
    ...paymentRatios(results),
  };
}

type PaymentRatios = Pick<
  Ratios,
  | 'paymentsPerS'
  | 'machineMsPerPayment'
  | 'paymentCostToTransferRatio'
  | 'splitCostToTransferRatio'
  | 'paymentsToE2eRatio'
  | 'splitsToE2eRatio'
>;

/**
 * e2e-payments' figures: each run's payments against that run's e2e (same machine state), then
 * the median over the runs that have both; null when either case did not run or gave no figure.
 */
export function paymentRatios(results: readonly CaseRunResult[]): PaymentRatios {
  const of = (c: CaseName, run: number) => results.find((r) => r.case === c && r.run === run);
  const note = (r: CaseRunResult | undefined, key: string) => {
    const v = r?.notes[key];
    return typeof v === 'number' ? v : null;
  };
  const runs = [...new Set(results.filter((r) => r.case.startsWith('e2e-payments-')).map((r) => r.run))];
  const perRun = (f: (run: number) => number | null, places: number) => {
    const m = medianOf(runs.map(f));
    return m === null ? null : round(m, places);
  };
  const over = (x: number | null, y: number | null) => (x === null || y === null || y === 0 ? null : x / y);
  const e2eMachine = (run: number) => of('e2e', run)?.cpu?.msPerTransfer.machine ?? null;
  const e2eRate = (run: number) => of('e2e', run)?.throughputPerS ?? null;
  return {
    paymentsPerS: perRun((run) => note(of('e2e-payments-capture', run), 'paymentsPerS'), 1),
    machineMsPerPayment: perRun((run) => note(of('e2e-payments-capture', run), 'machineMsPerPayment'), 3),
    paymentCostToTransferRatio: perRun(
      (run) => over(note(of('e2e-payments-capture', run), 'machineMsPerPayment'), e2eMachine(run)),
      3,
    ),
    splitCostToTransferRatio: perRun(
      (run) => over(of('e2e-payments-split', run)?.cpu?.msPerTransfer.machine ?? null, e2eMachine(run)),
      3,
    ),
    paymentsToE2eRatio: perRun((run) => over(note(of('e2e-payments-capture', run), 'paymentsPerS'), e2eRate(run)), 3),
    splitsToE2eRatio: perRun((run) => over(of('e2e-payments-split', run)?.throughputPerS ?? null, e2eRate(run)), 3),
  };
}

/** PostgreSQL CPU ms per transfer of an intake case (pipeline + producer), or null when a part is missing. */
export function intakePostgresMsPerTransfer(s: CaseSummary | undefined): number | null {
  const pipeline = s?.cpuMsPerTransfer?.postgres ?? null;
  const producer = s?.producerCpuMsPerTransfer?.postgres ?? null;
  return pipeline === null || producer === null ? null : round(pipeline + producer, 3);
}

function extraPostgres(summaries: readonly CaseSummary[], intakeCase: CaseName): number | null {
  const intake = intakePostgresMsPerTransfer(summaries.find((s) => s.case === intakeCase));
  const e2e = summaries.find((s) => s.case === 'e2e')?.cpuMsPerTransfer?.postgres ?? null;
  return intake === null || e2e === null ? null : round(intake - e2e, 3);
}

/** Largest peak RSS of a worker process under the uniform end-to-end load (the acceptance's figure). */
export function e2ePeakRssMb(summaries: readonly CaseSummary[]): number | null {
  return summaries.find((s) => s.case === 'e2e')?.peakRssMbMax ?? null;
}
