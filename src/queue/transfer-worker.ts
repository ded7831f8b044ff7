// The worker: pulls transfer jobs, validates them, takes (or rides on) the source wallet's
// fenced lease and has the transfer decided with the lease's token, in a batch with the other
// transfers the process holds at the same time. It composes the lock and the ledger; the
// guarantee lives in the database decision, the lock keeps the common case cheap.
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, Job, type Telemetry, UnrecoverableError, type Worker } from 'bullmq';
import type { Config } from '../config/config.ts';
import { dbCallDeadlineMs, type PrismaClient } from '../db/prisma.ts';
import { LockEpochError, LockLostError, RetryableTransferError } from '../errors.ts';
import { decideOperations } from '../ledger/apply-payments.ts';
import { type BatchItem, type BatchStats, DecisionBatcher, type ExpectedDecision } from '../ledger/decision-batcher.ts';
import type { ApplyResult, TransferOutcome } from '../ledger/outcome.ts';
import { requestHash } from '../ledger/request-hash.ts';
import {
  type OperationRequest,
  operationKindOf,
  type validateOperationRequest,
  validateOperationWithin,
  walletOf,
} from '../ledger/transfer-request.ts';
import { decideInvalidRequest } from '../ledger/undecidable-request.ts';
import { failureMessage, type PermanentKind, type RetryKind } from '../ledger/vocabulary.ts';
import { fullJitterDelayMs } from '../lock/backoff.ts';
import type { LockService } from '../lock/lock-service.ts';
import { SharedLeases } from '../lock/shared-leases.ts';
import type { HeldLease } from '../lock/watchdog.ts';
import type { Logger } from '../log/logger.ts';
import type { WorkerMetrics } from '../metrics/worker-metrics.ts';
import { endSpan, inSpan, startSpan } from '../tracing/spans.ts';
import { bullmqTelemetry } from '../tracing/tracing.ts';
import { classifyAttemptError, roleOf } from './attempt-failure.ts';
import { type Admission, GatedWorker } from './gated-worker.ts';
import { TRANSFER_JOB_NAME, transferBackoffMs } from './job-options.ts';
import { consumedQueueShardsOf, type QueueShard } from './queue-shards.ts';
import type { RedisClient } from './redis-connection.ts';

/** Stale-fence refusals answered inside one attempt (advance the fence, take the lock again). */
export const STALE_FENCE_ROUNDS_MAX = 3;
/**
 * Times a job may go back to the queue delayed because its wallet is busy since its last real
 * attempt (BusyDeferrals), before that counts as a failed attempt.
 */
export const LOCK_BUSY_DEFERRALS_MAX = 100;
export const LOCK_BUSY_DELAY_BASE_MS = 25;
export const LOCK_BUSY_DELAY_CAP_MS = 2_000;
/**
 * A stalled job (its worker died) is re-queued this many times before it fails. BullMQ's stalled
 * check (any worker's) only marks the job one stall over (moveStalledJobsToWait.lua sets its
 * deferred failure, `defa`, and moves it to wait); the worker that takes it next fails it without
 * running it, and that worker's 'failed' handler records the give-up like any other.
 */
export const JOB_STALLED_COUNT_MAX = 10;
/**
 * Calls of record_transfer_given_up() for one give-up, the first included: a call that fails (the
 * database away, a lost grant) is made again after GIVE_UP_RETRY_BASE_MS, doubling up to
 * GIVE_UP_RETRY_CAP_MS (full jitter), so about 15 s at most in all. Past the last one the relay
 * still records an intake request's give-up when its re-send finds the job failed.
 */
export const GIVE_UP_RECORD_TRIES_MAX = 6;
export const GIVE_UP_RETRY_BASE_MS = 500;
export const GIVE_UP_RETRY_CAP_MS = 8_000;

/** A failure the job should be retried for, of one of the vocabulary's retry kinds. */
function retryable(kind: RetryKind, detail: string): RetryableTransferError<RetryKind> {
  return new RetryableTransferError(kind, detail);
}

export interface ApplyContext {
  readonly job: Job;
  readonly request: OperationRequest;
  readonly token: bigint;
  readonly lease: HeldLease | null;
}

export interface TransferWorkerHooks {
  /**
   * Runs after the last lease check and right before the decision is sent: a pause here is
   * the worst case (a GC pause or a slow network between check and commit), which the fence
   * must catch. For tests and the chaos harness.
   */
  beforeApply?: (ctx: ApplyContext) => Promise<void> | void;
  /** Runs after every batch decision (its size, duration and what sent it). */
  onBatch?: (stats: BatchStats) => void;
}

/**
 * How a decision is taken once the token is in hand, one transfer at a time. The default is
 * the batched apply_transfers(); the chaos harness plugs in a deliberately naive
 * read-modify-write here to show what the fence is for.
 */
export type ApplyStrategy = (request: OperationRequest, token: bigint, lease: HeldLease | null) => Promise<ApplyResult>;

export interface TransferWorkerDeps {
  readonly config: Config;
  readonly prisma: PrismaClient;
  readonly lock: LockService;
  /** BullMQ's connection (blocking commands). */
  readonly connection: RedisClient;
  readonly logger: Logger;
  /** This process's counters and histograms (in memory; /metrics renders them). */
  readonly metrics: WorkerMetrics;
  readonly hooks?: TransferWorkerHooks;
  /** Default: batched apply_transfers() with the configured unsafe switches, TRANSFER_BATCH_* bounds. */
  readonly apply?: ApplyStrategy;
  /**
   * Readiness gate. When given, the worker is created with autorun off and takes no job until
   * its owner calls run(); a job fetched while admit() is false goes back to the wait list.
   */
  readonly admission?: Admission;
  /** The readiness gate's owner, told of permanent failures (src/ops/fault-hold.ts). */
  readonly faults?: FaultReporter;
}

/** Told of every permanent failure (the worker stops taking jobs) and every decision (it works). */
export interface FaultReporter {
  permanent(kind: PermanentKind, reason: string): void;
  decided(): void;
}

/**
 * A job's busy-wallet deferrals since its last real attempt, kept in the job's progress (the one
 * field of a job hash the wire format leaves free) beside the attemptsMade they count from: a
 * failed attempt starts the count again, and readiness-gate bounces and stalled re-runs, which
 * BullMQ counts in attemptsStarted, do not count at all.
 */
export interface BusyDeferrals {
  readonly busyDeferrals: number;
  readonly sinceAttemptsMade: number;
}

/**
 * What a job's progress holds: its busy deferrals, and, once it has met one, the permanent
 * failures it met (none spends an attempt: the job is put back, delayed) and the reason of the
 * last one, so the job itself says why it waits.
 */
export interface JobProgress extends BusyDeferrals {
  readonly permanentFailures?: number;
  readonly lastPermanentFailure?: string;
}

type ProgressOf = Pick<Job, 'progress' | 'attemptsMade'>;

function progressFields(job: ProgressOf): Partial<JobProgress> {
  const p = job.progress as Partial<JobProgress> | number | string | boolean | null | undefined;
  return typeof p === 'object' && p !== null ? p : {};
}

/** The deferrals a job has behind it since its last real attempt (0 when the count is from before it). */
export function busyDeferralsOf(job: ProgressOf): number {
  const p = progressFields(job);
  if (p.sinceAttemptsMade !== job.attemptsMade) return 0;
  const n = p.busyDeferrals;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The permanent failures a job has met so far (each put it back without spending an attempt). */
export function permanentFailuresOf(job: ProgressOf): number {
  const n = progressFields(job).permanentFailures;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The permanent-failure fields of a job's progress, kept as they are by a busy deferral. */
function permanentFieldsOf(job: ProgressOf): Pick<JobProgress, 'permanentFailures' | 'lastPermanentFailure'> {
  const n = permanentFailuresOf(job);
  const last = progressFields(job).lastPermanentFailure;
  return n === 0 ? {} : { permanentFailures: n, ...(typeof last === 'string' ? { lastPermanentFailure: last } : {}) };
}

type LockedApply = { kind: 'done'; result: ApplyResult; token: bigint } | { kind: 'busy'; retryAfterMs: number };

export class TransferProcessor {
  private readonly skipLock: boolean;
  /** Null when a custom ApplyStrategy decides one transfer at a time. */
  private readonly batcher: DecisionBatcher | null;
  private readonly apply: ApplyStrategy | null;
  private readonly leases: SharedLeases;
  private readonly metrics: WorkerMetrics;
  /** The database role the worker logs in as, named in the fix of a permission failure. */
  private readonly role: string;

  constructor(private readonly deps: TransferWorkerDeps) {
    this.role = roleOf(deps.config.databaseUrl);
    this.skipLock = deps.config.unsafe.includes('no-lock');
    const options = {
      skipIdempotency: deps.config.unsafe.includes('no-idempotency'),
      skipFence: deps.config.unsafe.includes('no-fencing'),
      skipLeaseCheck: deps.config.unsafe.includes('no-lease-check'),
      skipHoldState: deps.config.unsafe.includes('double-capture'),
      skipRefundBound: deps.config.unsafe.includes('refund-unbounded'),
      skipCreditLimit: deps.config.unsafe.includes('no-credit-limit'),
      skipWalletStatus: deps.config.unsafe.includes('no-wallet-status'),
      holdExpiryMaxMs: deps.config.holdExpiryMaxMs,
    };
    this.apply = deps.apply ?? null;
    this.batcher =
      deps.apply === undefined
        ? new DecisionBatcher({
            decide: (operations) => decideOperations(deps.prisma, operations, options),
            batchMax: deps.config.transferBatchMax,
            waitMs: deps.config.transferBatchWaitMs,
            inFlightMax: deps.config.transferBatchesInFlightMax,
            deadlineMs: dbCallDeadlineMs(deps.config),
            onBatch: (stats) => this.onBatch(stats),
          })
        : null;
    // Riders share one token (and the lease id the database tells leases apart by), which is
    // only safe when the database decides each transfer atomically (apply_transfers under row
    // locks). A custom strategy (the harness's naive
    // read-modify-write) gets the lease to itself, one job at a time, as the lock promises.
    // A lease whose riders get no answer for as long as one call may take is given up (released
    // for other processes): a database that stops answering does not hold wallets for ever.
    this.leases = new SharedLeases(deps.lock, {
      rideMsMax: deps.apply === undefined ? deps.config.lockRideMsMax : 0,
      progressMsMax: dbCallDeadlineMs(deps.config),
    });
    this.metrics = deps.metrics;
  }

  private onBatch(stats: BatchStats): void {
    this.metrics.observeBatch(stats.seconds, stats.size);
    this.deps.logger.debug({ event: 'batch_decided', ...stats }, 'batch decided');
    this.deps.hooks?.onBatch?.(stats);
  }

  /** Waits for the batches in flight and the lock releases already sent (a clean stop). */
  async close(): Promise<void> {
    await this.batcher?.idle();
    await this.leases.settled();
  }

  async process(job: Job, bullToken: string | undefined): Promise<TransferOutcome> {
    const attempt = job.attemptsMade + 1;
    // Made on first use: a job that logs nothing (every job, below info) costs no child logger,
    // which pino builds eagerly (its bindings serialized and redacted).
    let child: Logger | undefined;
    const log = (): Logger => {
      child ??= this.deps.logger.child({ jobId: job.id, attempt });
      return child;
    };
    const verdict =
      job.name === TRANSFER_JOB_NAME
        ? validateOperationWithin(job.data, this.deps.config)
        : { ok: false as const, reason: `unknown job name ${JSON.stringify(job.name.slice(0, 64))}` };
    if (!verdict.ok) {
      this.metrics.invalidMessage();
      log().warn({ event: 'transfer_invalid', reason: verdict.reason }, 'invalid transfer message');
      const decided = job.name === TRANSFER_JOB_NAME ? await this.decideIfUndecidable(job, log) : null;
      if (decided !== null) return decided;
      throw new UnrecoverableError(failureMessage('invalid_request', verdict.reason));
    }
    const request = verdict.request;
    const fields = { operationId: request.operationId, walletId: walletOf(request) };

    try {
      for (let round = 1; ; round += 1) {
        const locked = await this.applyUnderLock(job, request);
        if (locked.kind === 'busy') {
          this.metrics.lockBusyDeferred();
          return await this.deferBusy(job, bullToken, locked.retryAfterMs, log(), fields);
        }
        const { result, token } = locked;
        if (result.outcome !== 'stale_fence') {
          this.metrics.decided(result, operationKindOf(request));
          this.deps.faults?.decided();
          // Checked first: log() would build the child even when info is off.
          if (this.deps.logger.isLevelEnabled('info'))
            log().info(
              {
                event: 'transfer_done',
                ...fields,
                fence: token.toString(),
                outcome: result.outcome,
                ...(result.outcome === 'rejected' ? { reason: result.reason } : {}),
              },
              'transfer decided',
            );
          return result;
        }
        this.metrics.staleFenceRefused();
        log().warn(
          {
            event: 'transfer_stale_fence',
            ...fields,
            fence: token.toString(),
            walletFence: result.walletFence.toString(),
            round,
          },
          'decision refused: stale fence',
        );
        await this.advanceAfterStaleFence(walletOf(request), result.walletFence);
        if (round >= STALE_FENCE_ROUNDS_MAX) {
          throw retryable('stale_fence', `refused ${round} times; wallet fence ${result.walletFence}`);
        }
      }
    } catch (err) {
      if (err instanceof DelayedError || err instanceof UnrecoverableError || err instanceof RetryableTransferError)
        throw err;
      if (err instanceof LockLostError) {
        this.metrics.lockLost('before_commit');
        log().warn(
          { event: 'transfer_lock_lost', ...fields, fence: err.token.toString(), reason: err.reason },
          'lock lost before commit',
        );
        throw retryable('lock_lost', err.message);
      }
      const failure = classifyAttemptError(err, this.role);
      if (failure.permanent) {
        const error = retryable(failure.kind, failure.detail);
        log().error(
          { event: 'transfer_permanent_error', ...fields, err, kind: failure.kind, sqlState: failure.sqlState },
          'transfer attempt failed on an error no retry here can clear; the job waits with its attempts unspent, the worker stops taking jobs',
        );
        this.deps.faults?.permanent(failure.kind, error.message);
        return await this.putBack(job, bullToken, error, log(), fields);
      }
      log().warn(
        {
          event: 'transfer_transient_error',
          ...fields,
          err,
          sqlState: failure.sqlState,
          expected: failure.expected,
        },
        'transfer attempt failed; will retry',
      );
      throw retryable('transient_error', failure.detail);
    }
  }

  /**
   * An invalid job of an intake request that no worker can decide ends that request rejected
   * `invalid_request` (src/ledger/undecidable-request.ts), and the job completes with that
   * decision. Null otherwise (a job sent straight, a body only this worker's settings refuse, the
   * call failed): the job then fails as invalid, and a request is given up and can be redriven.
   */
  private async decideIfUndecidable(job: Job, log: () => Logger): Promise<TransferOutcome | null> {
    const data: unknown = job.data;
    const operationId =
      typeof data === 'object' && data !== null ? (data as Record<string, unknown>).operationId : null;
    let decided: TransferOutcome | null;
    try {
      decided = await decideInvalidRequest(this.deps.prisma, operationId);
    } catch (err) {
      log().warn(
        { event: 'transfer_invalid_undecided', err },
        'could not ask whether the invalid job is an intake request no worker can decide; it fails as invalid',
      );
      return null;
    }
    if (decided === null) return null;
    this.metrics.decided(decided);
    log().warn(
      { event: 'transfer_invalid_decided', operationId: decided.operationId },
      'intake request no worker can decide: recorded rejected as invalid_request',
    );
    return decided;
  }

  /**
   * Our token is below what the wallet has seen, or equal to it but another lease's: a newer
   * holder wrote, or the lock service lost increments. Raises the counter to the database's fence
   * (the next acquire then issues a token above it); when no token of this process can pass (a
   * newer lock epoch, a service behind the fence), a permanent fault: the job goes to another worker.
   */
  private async advanceAfterStaleFence(walletId: string, walletFence: bigint): Promise<void> {
    const advanced = await this.deps.lock.advanceFence(walletId, walletFence);
    if (advanced.kind === 'raised') this.metrics.fenceAdvanced();
    if (advanced.kind === 'superseded' || advanced.kind === 'behind') {
      throw new LockEpochError(
        `wallet fence ${walletFence} is beyond lock epoch ${this.deps.lock.epoch} of ${this.deps.lock.backend} (${advanced.kind})`,
      );
    }
  }

  private async applyUnderLock(job: Job, request: OperationRequest): Promise<LockedApply> {
    const lockWaitStartMs = performance.now();
    const lockWaitS = () => (performance.now() - lockWaitStartMs) / 1000;
    if (this.skipLock) {
      // Negative control: a token is still issued (fencing stays on) but nobody is excluded.
      const acquired = await this.deps.lock.acquireWithRetry(walletOf(request));
      this.metrics.observeLockWait(lockWaitS(), acquired.kind);
      if (acquired.kind === 'busy') return { kind: 'busy', retryAfterMs: acquired.retryAfterMs };
      await this.deps.lock.release(walletOf(request), acquired.lease.owner, acquired.lease.token);
      const { token, leaseId } = acquired.lease;
      return { kind: 'done', result: await this.decide(job, request, token, leaseId, null), token };
    }
    // Announced before the lease is taken, so the batcher knows a transfer is on its way.
    const expected = this.batcher?.expect();
    try {
      const entered = await inSpan(
        'lock wallet',
        { 'transfer.operation_id': request.operationId, 'transfer.wallet': walletOf(request) },
        async (span) => {
          const e = await this.leases.enter(walletOf(request));
          span?.setAttributes(
            e.kind === 'busy'
              ? { 'lock.outcome': 'busy', 'lock.retry_after_ms': e.retryAfterMs }
              : { 'lock.outcome': e.ride.joined ? 'joined' : 'acquired', 'lock.fence': e.ride.token.toString() },
          );
          return e;
        },
      );
      this.metrics.observeLockWait(lockWaitS(), entered.kind === 'busy' ? 'busy' : 'acquired');
      if (entered.kind === 'busy') return { kind: 'busy', retryAfterMs: entered.retryAfterMs };
      const { ride } = entered;
      try {
        // The acquire reply may have come back after the lease already ended.
        ride.lease.assertHeld();
        const result =
          expected === undefined
            ? await this.decide(job, request, ride.token, ride.leaseId, ride.lease)
            : await this.submitTraced(expected, {
                request,
                fence: ride.token,
                leaseId: ride.leaseId,
                check: () => ride.lease.assertHeld(),
                signal: ride.lease.signal,
                beforeSend: () =>
                  this.deps.hooks?.beforeApply?.({ job, request, token: ride.token, lease: ride.lease }),
              });
        // The lease ran out while the decision was in flight (a pause, a slow link): too late
        // to abort, so the fence decided. Counted to show how often that guard is what mattered.
        if (ride.lease.signal.aborted) this.metrics.lockLost('in_flight');
        if (result.outcome === 'stale_fence') ride.spoil();
        return { kind: 'done', result, token: ride.token };
      } finally {
        // Not awaited: the job's outcome does not depend on the release (a lost release
        // expires with the lease), so the job completes without one more round trip. A later
        // acquisition by this process goes out on the same connection behind it; close()
        // waits for every release sent.
        void ride.leave();
      }
    } finally {
      expected?.cancel();
    }
  }

  /**
   * Hands the transfer to the batcher, in an `await decision` span when the process traces: the
   * batch's span links to it and it to the batch's (decision-batcher.ts).
   */
  private async submitTraced(expected: ExpectedDecision, item: BatchItem): Promise<ApplyResult> {
    const span = startSpan('await decision', {
      'transfer.operation_id': item.request.operationId,
      'transfer.wallet': walletOf(item.request),
      'lock.fence': item.fence.toString(),
    });
    if (span === null) return expected.submit(item);
    try {
      const result = await expected.submit({ ...item, span });
      span.setAttribute('decision.outcome', result.outcome);
      endSpan(span);
      return result;
    } catch (err) {
      endSpan(span, err);
      throw err;
    }
  }

  /** One transfer through the custom ApplyStrategy (no batch): last lease check, hook, decision. */
  private async decide(
    job: Job,
    request: OperationRequest,
    token: bigint,
    leaseId: string,
    lease: HeldLease | null,
  ): Promise<ApplyResult> {
    lease?.assertHeld();
    await this.deps.hooks?.beforeApply?.({ job, request, token, lease });
    if (this.apply !== null) {
      const stopTimer = this.metrics.startDecisionTimer();
      try {
        return await this.apply(request, token, lease);
      } finally {
        stopTimer();
      }
    }
    if (this.batcher === null) throw new Error('no decision path: neither an ApplyStrategy nor a batcher');
    return this.batcher.expect().submit({ request, fence: token, leaseId });
  }

  /** Hands the job back to the queue, delayed, instead of holding a worker slot while the wallet is busy. */
  private async deferBusy(
    job: Job,
    bullToken: string | undefined,
    retryAfterMs: number,
    log: Logger,
    fields: Record<string, string>,
  ): Promise<never> {
    const deferrals = busyDeferralsOf(job);
    if (deferrals >= LOCK_BUSY_DEFERRALS_MAX) {
      throw retryable('lock_busy', `wallet busy after ${deferrals} deferrals`);
    }
    const capMs = Math.max(LOCK_BUSY_DELAY_BASE_MS, Math.min(LOCK_BUSY_DELAY_CAP_MS, retryAfterMs));
    const delayMs = fullJitterDelayMs(Math.min(deferrals, 16), LOCK_BUSY_DELAY_BASE_MS, capMs, Math.random) + 1;
    log.debug({ event: 'transfer_deferred', ...fields, delayMs, deferrals }, 'wallet busy; job delayed');
    const counted: JobProgress = {
      busyDeferrals: deferrals + 1,
      sinceAttemptsMade: job.attemptsMade,
      ...permanentFieldsOf(job),
    };
    await job.updateProgress(counted);
    await job.moveToDelayed(Date.now() + delayMs, bullToken);
    throw new DelayedError();
  }

  /**
   * After a permanent failure: hands the job back to the queue, delayed, without spending an
   * attempt (moveToDelayed, as a busy deferral does), since the worker is wrong, not the job. The
   * delay is the retry back-off (transferBackoffMs) of the permanent failures it has met, so a
   * worker without a fault hold (no readiness gate) meets the same job at most once per back-off,
   * up to RETRY_BACKOFF_CAP_MS; a gated worker takes no job during its hold anyway. Counted as a
   * retry of its kind, as when it failed the attempt. If the job cannot be put back (Redis did not
   * answer, the job lock was lost), the attempt fails as before.
   */
  private async putBack(
    job: Job,
    bullToken: string | undefined,
    error: RetryableTransferError<RetryKind>,
    log: Logger,
    fields: Record<string, string>,
  ): Promise<never> {
    const met = permanentFailuresOf(job) + 1;
    const delayMs = transferBackoffMs(met) + 1;
    const progress: JobProgress = {
      busyDeferrals: busyDeferralsOf(job),
      sinceAttemptsMade: job.attemptsMade,
      permanentFailures: met,
      lastPermanentFailure: error.message,
    };
    try {
      await job.updateProgress(progress);
      await job.moveToDelayed(Date.now() + delayMs, bullToken);
    } catch (err) {
      log.warn(
        { event: 'transfer_put_back_failed', ...fields, err, kind: error.kind },
        'could not put the job back without spending an attempt; the attempt fails instead',
      );
      throw error;
    }
    this.metrics.retry(error.kind);
    log.debug(
      { event: 'transfer_put_back', ...fields, kind: error.kind, delayMs, permanentFailures: met },
      'job put back, delayed, its attempts unspent',
    );
    throw new DelayedError();
  }
}

/**
 * A started worker: one BullMQ Worker per consumed queue shard (QUEUE_SHARDS,
 * QUEUE_SHARDS_CONSUMED), all sharing one processor (one batcher, one lease table).
 * BullMQ's concurrency is per Worker: WORKER_CONCURRENCY jobs per shard.
 */
export interface TransferWorker {
  readonly workers: readonly Worker[];
  readonly processor: TransferProcessor;
  /** Starts every shard's fetch loop (when the workers were created gated, autorun off). */
  run(): void;
  /** Stops taking new jobs on every shard; the jobs in hand go on. */
  pause(): Promise<void>;
  resume(): void;
  /** Every shard's loop runs. */
  isRunning(): boolean;
  /** Some shard is paused. */
  isPaused(): boolean;
  /**
   * Stops taking jobs, waits for the jobs in hand (unless force), then for their batches and
   * the lock releases they sent. Does not close the connections: their owner does.
   */
  close(force?: boolean): Promise<void>;
}

export function startTransferWorker(deps: TransferWorkerDeps): TransferWorker {
  const processor = new TransferProcessor(deps);
  const giveUps = new GiveUps(deps);
  const processJob = async (job: Job, token: string | undefined): Promise<TransferOutcome> => {
    const startedAtMs = performance.now();
    deps.metrics.jobStarted();
    try {
      return await processor.process(job, token);
    } catch (err) {
      if (err instanceof RetryableTransferError) deps.metrics.retry(err.kind);
      throw err;
    } finally {
      deps.metrics.jobFinished((performance.now() - startedAtMs) / 1000);
    }
  };
  const workers = consumedQueueShardsOf(deps.config).map((shard) => shardWorker(shard, processJob, deps, giveUps));
  return {
    workers,
    processor,
    run() {
      for (const w of workers) void w.run();
    },
    async pause() {
      await Promise.all(workers.map((w) => w.pause(true)));
    },
    resume() {
      for (const w of workers) w.resume();
    },
    isRunning: () => workers.every((w) => w.isRunning()),
    isPaused: () => workers.some((w) => w.isPaused()),
    async close(force = false) {
      await Promise.all(workers.map((w) => w.close(force)));
      await giveUps.close();
      await processor.close();
    },
  };
}

/**
 * The give-ups being recorded: each a recordGiveUp() with its tries. close() cuts the back-off
 * waits short (a stopping worker does not wait for them: the relay records an intake request's
 * give-up when it finds the failed job) and waits for the calls in flight.
 */
class GiveUps {
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly stopping = new AbortController();

  constructor(private readonly deps: TransferWorkerDeps) {}

  record(job: Job, reason: string, stillTheFailedJob: () => Promise<boolean>): void {
    const recorded = recordGiveUp(job, reason, this.deps, {
      triesMax: GIVE_UP_RECORD_TRIES_MAX,
      stillTheFailedJob,
      signal: this.stopping.signal,
    });
    this.inFlight.add(recorded);
    void recorded.finally(() => this.inFlight.delete(recorded));
  }

  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.inFlight]);
  }
}

function shardWorker(
  shard: QueueShard,
  process: (job: Job, token: string | undefined) => Promise<TransferOutcome>,
  deps: TransferWorkerDeps,
  giveUps: GiveUps,
): Worker {
  const worker = new GatedWorker(
    shard.name,
    process,
    {
      connection: deps.connection,
      prefix: shard.prefix,
      concurrency: deps.config.workerConcurrency,
      lockDuration: deps.config.jobLockDurationMs,
      stalledInterval: deps.config.jobStalledIntervalMs,
      maxStalledCount: JOB_STALLED_COUNT_MAX,
      // When the process traces (src/tracing/tracing.ts): each attempt is BullMQ's `process` span,
      // a child of the context the job carries (the relay's send, or the producer's add).
      ...telemetryOption(),
      settings: {
        // Serves TRANSFER_BACKOFF_TYPE, the type our producer puts on every job.
        backoffStrategy: (attemptsMade: number) => transferBackoffMs(attemptsMade),
      },
    },
    deps.admission,
  );
  // Every failed attempt comes here, a job failed by the stall limit too (an UnrecoverableError
  // raised by the worker that took it next, see JOB_STALLED_COUNT_MAX).
  worker.on('failed', (job, err) => {
    const final =
      err instanceof UnrecoverableError || (job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1));
    if (job !== undefined && final) {
      deps.logger.error(
        { event: 'transfer_failed', queue: shard.name, jobId: job.id, attempt: job.attemptsMade, reason: err.message },
        'job failed for good; it stays in the failed set',
      );
      giveUps.record(job, err.message, () => isStillTheFailedJob(worker, job));
    }
  });
  worker.on('error', (err) => deps.logger.error({ err, queue: shard.name }, 'worker error'));
  return worker;
}

function telemetryOption(): { telemetry?: Telemetry } {
  // tracing-sdk.ts made it with bullmq-otel, for BullMQ: its type is BullMQ's.
  const telemetry = bullmqTelemetry() as Telemetry | undefined;
  return telemetry === undefined ? {} : { telemetry };
}

/**
 * Whether the job that failed is still there, failed: the job under its id has the timestamp it
 * was added with (a redrive removes it and adds a fresh job under the same id) and the finish of
 * that failure (a retry from the dashboard runs it again), and is in the failed set.
 */
async function isStillTheFailedJob(worker: Worker, failed: Job): Promise<boolean> {
  const id = failed.id;
  if (id === undefined) return false;
  const now = await Job.fromId(worker, id);
  if (now === undefined || now.timestamp !== failed.timestamp || now.finishedOn !== failed.finishedOn) return false;
  return (await now.getState()) === 'failed';
}

/** How recordGiveUp() tries again after a failed call; without it, it calls once. */
export interface GiveUpRetry {
  /** Calls in all, the first included (GIVE_UP_RECORD_TRIES_MAX for the worker). */
  readonly triesMax: number;
  /**
   * Asked before each call, after the request's send is read and before the give-up is recorded
   * bound to that send: false when the job is no longer the one that failed (redriven, or
   * retried), and the give-up is then not recorded; a throw (Redis did not answer) skips that
   * call. A redrive after the answer counts a send, so the call bound to the send read before it
   * is refused: the check and the record are one.
   */
  readonly stillTheFailedJob: () => Promise<boolean>;
  /** Ends the waits between calls (the worker is stopping); the give-up is then not recorded. */
  readonly signal?: AbortSignal;
}

type GiveUpDeps = Pick<TransferWorkerDeps, 'prisma' | 'logger' | 'config'> & { readonly metrics?: WorkerMetrics };

/**
 * Records a job that failed for good as given up: record_transfer_given_up() parks the intake's
 * open request of that operation and body (kept open for `npm run redrive`, so a trim of BullMQ's
 * failed set drops nothing) and appends its 'given_up' event to the outcome feed. A job sent to
 * BullMQ straight has no request, and nothing in PostgreSQL can vouch for its body: the database
 * records nothing, and the give-up is only counted and logged. Each try reads the send the
 * request is at (give_up_send_count()), asks whether the job is still the failed one (`retry`),
 * and records the give-up bound to that send, which a redrive in between has moved on; a try
 * that fails is made again (`retry`). Answers whether the feed got the give-up;
 * never throws (the relay records intake give-ups it finds too). Counted in
 * given_up_jobs_total{feed} (GIVE_UP_FEED_RESULTS) when `deps.metrics` is given.
 */
export async function recordGiveUp(job: Job, reason: string, deps: GiveUpDeps, retry?: GiveUpRetry): Promise<boolean> {
  const valid: ReturnType<typeof validateOperationRequest> =
    job.name === TRANSFER_JOB_NAME
      ? validateOperationWithin(job.data, deps.config)
      : { ok: false, reason: `job name ${JSON.stringify(job.name)} is not ${JSON.stringify(TRANSFER_JOB_NAME)}` };
  if (!valid.ok) {
    deps.metrics?.givenUp('invalid_job');
    deps.logger.error(
      { event: 'transfer_give_up_not_recorded', jobId: job.id, reason: valid.reason },
      'a job that failed for good carries no valid transfer; its give-up cannot be recorded',
    );
    return false;
  }
  const r = valid.request;
  const hash = requestHash(r);
  const fields = { jobId: job.id, operationId: r.operationId };
  const triesMax = Math.max(1, retry?.triesMax ?? 1);
  let lastError: unknown = null;
  for (let tried = 0; tried < triesMax; tried += 1) {
    if (tried > 0 && retry !== undefined) {
      const waitMs = fullJitterDelayMs(tried - 1, GIVE_UP_RETRY_BASE_MS, GIVE_UP_RETRY_CAP_MS, Math.random);
      try {
        await sleep(waitMs, undefined, retry.signal === undefined ? {} : { signal: retry.signal });
      } catch {
        lastError = new Error('the worker stopped before the give-up could be recorded');
        break;
      }
    }
    let sendCount: number | null;
    try {
      sendCount = await giveUpSendCount(deps, r.operationId, hash);
    } catch (err) {
      lastError = err;
      logGiveUpRetry(deps, fields, err, tried, triesMax);
      continue;
    }
    if (sendCount === null) return noOpenRequest(deps, fields, reason);
    if (retry !== undefined) {
      let same: boolean;
      try {
        same = await retry.stillTheFailedJob();
      } catch (err) {
        lastError = err;
        continue;
      }
      if (!same) {
        deps.metrics?.givenUp('superseded');
        deps.logger.warn(
          { event: 'transfer_give_up_superseded', ...fields },
          'the failed job is gone or runs again (redriven or retried): its give-up is not recorded',
        );
        return false;
      }
    }
    try {
      const rows = await deps.prisma.$queryRawUnsafe<{ recorded: boolean }[]>(
        'SELECT record_transfer_given_up($1, $2, $3, $4::integer) AS recorded',
        r.operationId,
        hash,
        reason,
        sendCount,
      );
      if (rows[0]?.recorded === true) {
        deps.metrics?.givenUp('recorded');
        deps.logger.warn(
          { event: 'transfer_given_up', ...fields },
          'give-up recorded: the transfer stays open; npm run redrive sends it again',
        );
        return true;
      }
      return noOpenRequest(deps, fields, reason);
    } catch (err) {
      lastError = err;
      logGiveUpRetry(deps, fields, err, tried, triesMax);
    }
  }
  deps.metrics?.givenUp('error');
  deps.logger.error(
    { event: 'transfer_give_up_not_recorded', ...fields, err: lastError, triesMax },
    'could not record the give-up; the relay records it when it finds the failed job',
  );
  return false;
}

/** The send a give-up of this operation and body is bound to now; null: no open request of that body. */
async function giveUpSendCount(deps: GiveUpDeps, operationId: string, hash: string): Promise<number | null> {
  const rows = await deps.prisma.$queryRawUnsafe<{ send_count: number | null }[]>(
    'SELECT give_up_send_count($1, $2) AS send_count',
    operationId,
    hash,
  );
  return rows[0]?.send_count ?? null;
}

function noOpenRequest(deps: GiveUpDeps, fields: { jobId: string | undefined; operationId: string }, reason: string) {
  deps.metrics?.givenUp('no_open_request');
  deps.logger.warn(
    { event: 'transfer_given_up_unrecorded', ...fields, reason },
    'no open intake request of this body to give up (a job sent to BullMQ straight, or its request was given up, decided, sent again or asked for another body already): the job stays in the failed set only',
  );
  return false;
}

function logGiveUpRetry(
  deps: GiveUpDeps,
  fields: { jobId: string | undefined; operationId: string },
  err: unknown,
  tried: number,
  triesMax: number,
): void {
  if (tried + 1 < triesMax)
    deps.logger.warn(
      { event: 'transfer_give_up_retry', ...fields, err, tried: tried + 1, triesMax },
      'could not record the give-up; trying again',
    );
}
