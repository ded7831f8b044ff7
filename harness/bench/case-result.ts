// What every case gets (its context) and gives back (one run's figures and its verification),
// shared by the case files, the run loop, the summary, the table and the chart.
import type { Config } from '../../src/config/config.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
import type { BenchLocks } from './bench-locks.ts';
import type { BenchOptions, CaseName } from './bench-options.ts';
import type { CpuAccount } from './cpu-account.ts';
import type { Percentiles } from './measure.ts';
import type { ProcessPeak } from './process-memory.ts';
import type { Progress } from './progress.ts';

export interface CaseContext {
  readonly options: BenchOptions;
  readonly config: Config;
  readonly caseName: CaseName;
  /** The lock service of the case's workers (`--lock`; Redis for a case outside LOCK_MODES). */
  readonly lock: LockBackendName;
  /** The bench's lock services: the workers' lock variables, the epoch, etcd's processes. */
  readonly locks: BenchLocks;
  /** 1-based run number. */
  readonly run: number;
  /** The bench invocation's id, in every database, queue and key name it creates. */
  readonly runId: string;
  /** Folder of this invocation's worker logs. */
  readonly logRoot: string;
  readonly progress: Progress;
  readonly signal: AbortSignal;
}

/** Where a case's throughput span comes from. */
export type SpanSource = 'transfers.created_at' | 'job.finishedOn';

export interface Verification {
  readonly ok: boolean;
  /** Transfers that must end applied. */
  readonly expected: number;
  readonly applied: number;
  /** Operations recorded with another status (rejected), or missing. */
  readonly notApplied: number;
  /** BullMQ or Graphile jobs that failed for good; null when the case has no queue. */
  readonly failedJobs: number | null;
  /** Jobs still queued after the drain; null when the case has no queue. */
  readonly jobsLeft: number | null;
  /** reconcile() of src/ledger/reconciliation.ts; null when the case has no database. */
  readonly invariantsHeld: boolean | null;
  readonly problems: readonly string[];
}

export interface LatencyFigures {
  /** Bench's enqueue time → transfers.created_at of the deciding transaction. */
  readonly enqueueToCommit: Percentiles | null;
  /** Bench's enqueue time → BullMQ finishedOn (the worker had the answer and completed the job). */
  readonly enqueueToAnswer: Percentiles | null;
  /** BullMQ processedOn (a worker took the job, last attempt) → transfers.created_at. */
  readonly activeToCommit: Percentiles | null;
  /** One call's round trip in the bench process (db-ceiling, seed-design). */
  readonly call: Percentiles | null;
}

export interface CaseRunResult {
  readonly case: CaseName;
  /** The lock service the workers ran on, in the cases of LOCK_MODES (`--lock`); absent in the others. */
  readonly lock?: LockBackendName;
  readonly run: number;
  /** Transfers (or no-op jobs) measured. */
  readonly transfers: number;
  /** count / (last − first) over the span source; null when fewer than two were measured. */
  readonly throughputPerS: number | null;
  readonly spanMs: number | null;
  readonly spanSource: SpanSource;
  /** Bench clock from the start of driving (processes started, first call) until all was done. */
  readonly wallMs: number;
  readonly latencyMs: LatencyFigures;
  readonly processes: readonly ProcessPeak[];
  /** CPU per transfer of each part of the system inside the throughput span; null when not measured. */
  readonly cpu: CpuAccount | null;
  /**
   * The intake cases: the account of the producer's phase (requests committed into the intake,
   * before the pipeline starts), per request; bench = the producer. Absent in the other cases.
   */
  readonly producerCpu?: CpuAccount | null;
  readonly verification: Verification;
  /** Case-specific figures (retries, achieved rate, warm-up size, ...). */
  readonly notes: Readonly<Record<string, number | string | null>>;
}

export const NO_LATENCY: LatencyFigures = Object.freeze({
  enqueueToCommit: null,
  enqueueToAnswer: null,
  activeToCommit: null,
  call: null,
});

/** A case whose verification failed: the bench stops with a non-zero exit. */
export class VerificationFailedError extends Error {
  override name = 'VerificationFailedError';
  constructor(readonly result: CaseRunResult) {
    super(`${result.case} run ${result.run} failed verification: ${result.verification.problems.join('; ')}`);
  }
}
