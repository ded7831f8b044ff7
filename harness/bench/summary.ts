// From the runs to what the acceptance reads: per case the median over the runs (and
// the spread), the peak memory of its processes, and the ratios between cases. A ratio is null
// when one of its cases was not run (a --modes subset) or gave no figure. A case of LOCK_MODES
// run on several lock services (`--lock`) has a summary per service; the ratios between cases
// read its Redis one, and lockToRedisRatios sets each other service against Redis, run by run.

import { LOCK_BACKENDS } from '../../src/config/settings.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
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
  /** The lock service of a case of LOCK_MODES (`--lock`); absent in the others. */
  readonly lock?: LockBackendName;
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
  /** Each case of LOCK_MODES on each lock service but Redis, against the same case on Redis (`--lock`). */
  readonly lockToRedisRatios: readonly LockToRedisRatio[];
  /** lockToRedisRatios of e2e, by lock service; null unless e2e ran on Redis and another service. */
  readonly e2eToRedisRatio: Readonly<Partial<Record<LockBackendName, LockToRedisRatio>>> | null;
}

/**
 * A case on one lock service against the same case on Redis: each run's figures over that run's
 * Redis ones (the same machine state), then the median over the runs that have both.
 */
export interface LockToRedisRatio {
  readonly case: CaseName;
  readonly lock: LockBackendName;
  /** Transfers/s over Redis's. */
  readonly throughputRatio: number | null;
  /** Machine CPU ms per transfer (everything busy on the machine) over Redis's. */
  readonly machineCpuRatio: number | null;
  /** The system's CPU ms per transfer (workers, relays, PostgreSQL, Redis, etcd: SYSTEM_PARTS) over Redis's. */
  readonly systemCpuRatio: number | null;
}

/** The parts of the CPU account that are the system under test: all but the bench and "other". */
export const SYSTEM_PARTS = ['processes', 'relays', 'postgres', 'redis', 'etcd'] as const satisfies readonly CpuPart[];

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
    const locks = LOCK_BACKENDS.filter((lock) => runs.some((r) => r.lock === lock));
    const unlabelled = runs.filter((r) => r.lock === undefined);
    return [
      ...(unlabelled.length === 0 ? [] : [summarizeRuns(caseName, undefined, unlabelled)]),
      ...locks.map((lock) =>
        summarizeRuns(
          caseName,
          lock,
          runs.filter((r) => r.lock === lock),
        ),
      ),
    ];
  });
}

/** The summary of one case's runs on one lock service (`lock` undefined: a case outside LOCK_MODES). */
function summarizeRuns(
  caseName: CaseName,
  lock: LockBackendName | undefined,
  runs: readonly CaseRunResult[],
): CaseSummary {
  const throughputs = runs.map((r) => r.throughputPerS).filter((t): t is number => t !== null);
  const peaks = runs.flatMap((r) => r.processes.map((p) => p.peakRssMb)).filter((p): p is number => p !== null);
  const latency = (key: keyof LatencyFigures) => medianPercentiles(runs.map((r) => r.latencyMs[key]));
  const med = median(throughputs);
  return {
    case: caseName,
    ...(lock === undefined ? {} : { lock }),
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
  };
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

/** A figure on Redis, or of a case that takes no lock: what the ratios between cases read. */
export function onRedis(x: { readonly lock?: LockBackendName }): boolean {
  return x.lock === undefined || x.lock === 'redis';
}

export function ratios(allSummaries: readonly CaseSummary[], allResults: readonly CaseRunResult[] = []): Ratios {
  const summaries = allSummaries.filter(onRedis);
  const results = allResults.filter(onRedis);
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
    ...lockRatios(allResults),
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

/** Of a CPU account, the system's part (SYSTEM_PARTS; one not read counts 0); null without the workers' part. */
export function systemMsPerTransfer(account: CpuAccount | null): number | null {
  if (account === null || account.msPerTransfer.processes === null) return null;
  return round(
    SYSTEM_PARTS.reduce((sum, part) => sum + (account.msPerTransfer[part] ?? 0), 0),
    3,
  );
}

/** lockToRedisRatios and e2eToRedisRatio: every labelled case but Redis against Redis, run by run. */
export function lockRatios(results: readonly CaseRunResult[]): Pick<Ratios, 'lockToRedisRatios' | 'e2eToRedisRatio'> {
  const labelled = results.filter((r) => r.lock !== undefined && r.lock !== 'redis');
  const pairs = [...new Map(labelled.map((r) => [`${r.case} ${r.lock}`, r])).values()];
  const lockToRedisRatios = pairs.map((p) => lockRatio(results, p.case, p.lock as LockBackendName));
  const e2e = lockToRedisRatios.filter((r) => r.case === 'e2e');
  return {
    lockToRedisRatios,
    e2eToRedisRatio:
      e2e.length === 0 || !results.some((r) => r.case === 'e2e' && r.lock === 'redis')
        ? null
        : Object.fromEntries(e2e.map((r) => [r.lock, r])),
  };
}

function lockRatio(results: readonly CaseRunResult[], caseName: CaseName, lock: LockBackendName): LockToRedisRatio {
  const of = (l: LockBackendName, run: number) =>
    results.find((r) => r.case === caseName && r.lock === l && r.run === run);
  const runs = [...new Set(results.filter((r) => r.case === caseName && r.lock === lock).map((r) => r.run))];
  const perRun = (figure: (r: CaseRunResult) => number | null) => {
    const m = medianOf(
      runs.map((run) => {
        const [x, y] = [of(lock, run), of('redis', run)];
        const [a, b] = [x === undefined ? null : figure(x), y === undefined ? null : figure(y)];
        return a === null || b === null || b === 0 ? null : a / b;
      }),
    );
    return m === null ? null : round(m, 3);
  };
  return {
    case: caseName,
    lock,
    throughputRatio: perRun((r) => r.throughputPerS),
    machineCpuRatio: perRun((r) => r.cpu?.msPerTransfer.machine ?? null),
    systemCpuRatio: perRun((r) => systemMsPerTransfer(r.cpu)),
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
  return summaries.find((s) => s.case === 'e2e' && onRedis(s))?.peakRssMbMax ?? null;
}
