// The queue contract shared by producer and worker: job name, default job options, and the
// retry back-off (exponential with full jitter, capped) that the worker registers.
import type { JobsOptions } from 'bullmq';
import { fullJitterDelayMs } from '../lock/backoff.ts';

export const TRANSFER_JOB_NAME = 'transfer';
/** The custom back-off type producers put on jobs; workers implement it (see transferBackoffMs). */
export const TRANSFER_BACKOFF_TYPE = 'transfer-jitter';
export const RETRY_BACKOFF_BASE_MS = 100;
export const RETRY_BACKOFF_CAP_MS = 10_000;
/** Completed jobs kept for inspection: the newest this many, for at most a day. */
export const COMPLETED_JOBS_KEPT_MAX = 100_000;
export const COMPLETED_JOBS_KEPT_S = 24 * 3600;
/** Failed jobs kept (with their reason) longer: they need a person. */
export const FAILED_JOBS_KEPT_MAX = 100_000;
export const FAILED_JOBS_KEPT_S = 14 * 24 * 3600;

export function defaultJobOptions(attemptsMax: number): JobsOptions {
  return {
    attempts: attemptsMax,
    backoff: { type: TRANSFER_BACKOFF_TYPE, delay: RETRY_BACKOFF_BASE_MS },
    removeOnComplete: { count: COMPLETED_JOBS_KEPT_MAX, age: COMPLETED_JOBS_KEPT_S },
    removeOnFail: { count: FAILED_JOBS_KEPT_MAX, age: FAILED_JOBS_KEPT_S },
  };
}

/** Delay before retry number `attemptsMade` (1-based): full jitter under a doubling cap. */
export function transferBackoffMs(attemptsMade: number, random: () => number = Math.random): number {
  return fullJitterDelayMs(Math.max(0, attemptsMade - 1), RETRY_BACKOFF_BASE_MS, RETRY_BACKOFF_CAP_MS, random);
}
