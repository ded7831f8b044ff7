// The worker: pulls transfer jobs, validates them, takes the source wallet's fenced lock and
// applies the transfer with the lock's token. It composes the lock and the ledger; the
// guarantee lives in the database decision, the lock keeps the common case cheap.
import { DelayedError, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Config } from '../config/config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { applyTransfer, postgresErrorCode, RETRYABLE_SQLSTATES } from '../ledger/apply-transfer.ts';
import type { ApplyResult, TransferOutcome } from '../ledger/outcome.ts';
import { validateTransferRequest, type TransferRequest } from '../ledger/transfer-request.ts';
import { fullJitterDelayMs } from '../lock/backoff.ts';
import type { FencedLock } from '../lock/fenced-lock.ts';
import { LockLostError } from '../lock/lock-errors.ts';
import type { HeldLease } from '../lock/watchdog.ts';
import { withLock } from '../lock/with-lock.ts';
import type { Logger } from '../log/logger.ts';
import { transferBackoffMs, TRANSFER_JOB_NAME } from './job-options.ts';
import { metricsKey, recordEvents, type MetricEvent } from './metrics.ts';
import { consumedQueueShardsOf, type QueueShard } from './queue-shards.ts';
import type { RedisClient } from './redis-connection.ts';

/** Stale-fence refusals answered inside one attempt (advance the fence, take the lock again). */
export const STALE_FENCE_ROUNDS_MAX = 3;
/** Times a job may go back to the queue delayed because its wallet is busy, before that counts as a failed attempt. */
export const LOCK_BUSY_DEFERRALS_MAX = 100;
export const LOCK_BUSY_DELAY_BASE_MS = 25;
export const LOCK_BUSY_DELAY_CAP_MS = 2_000;
/** A stalled job (its worker died) is re-queued this many times before it fails. */
export const JOB_STALLED_COUNT_MAX = 10;

/** A failure the job should be retried for (BullMQ attempts with back-off). */
export class RetryableTransferError extends Error {
  override name = 'RetryableTransferError';
  constructor(readonly kind: 'stale_fence' | 'lock_lost' | 'lock_busy' | 'transient_error', detail: string) {
    super(`${kind}: ${detail}`);
  }
}

export interface ApplyContext {
  readonly job: Job;
  readonly request: TransferRequest;
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
}

/**
 * How a decision is taken once the token is in hand. The default is apply_transfer(); the chaos
 * harness plugs in a deliberately naive read-modify-write to show what the fence is for.
 */
export type ApplyStrategy = (request: TransferRequest, token: bigint, lease: HeldLease | null) => Promise<ApplyResult>;

export interface TransferWorkerDeps {
  readonly config: Config;
  readonly prisma: PrismaClient;
  readonly lock: FencedLock;
  /** A non-blocking connection for metrics (the lock's may be shared). */
  readonly redis: RedisClient;
  /** BullMQ's connection (blocking commands). */
  readonly connection: RedisClient;
  readonly logger: Logger;
  readonly hooks?: TransferWorkerHooks;
  /** Default: applyTransfer with the configured unsafe switches. */
  readonly apply?: ApplyStrategy;
}

type LockedApply =
  | { kind: 'done'; result: ApplyResult; token: bigint }
  | { kind: 'busy'; retryAfterMs: number };

export class TransferProcessor {
  private readonly metricsKey: string;
  private readonly skipLock: boolean;
  private readonly apply: ApplyStrategy;

  constructor(private readonly deps: TransferWorkerDeps) {
    this.metricsKey = metricsKey(deps.config.lockKeyPrefix, deps.config.queueName);
    this.skipLock = deps.config.unsafe.includes('no-lock');
    const options = {
      skipIdempotency: deps.config.unsafe.includes('no-idempotency'),
      skipFence: deps.config.unsafe.includes('no-fencing'),
    };
    this.apply = deps.apply ?? ((request, token) => applyTransfer(deps.prisma, request, token, options));
  }

  private async count(...events: MetricEvent[]): Promise<void> {
    try {
      await recordEvents(this.deps.redis, this.metricsKey, events);
    } catch (err) {
      // Counters are for reports; losing one must not fail a transfer.
      this.deps.logger.warn({ err, events }, 'metrics update failed');
    }
  }

  async process(job: Job, bullToken: string | undefined): Promise<TransferOutcome> {
    const attempt = job.attemptsMade + 1;
    const log = this.deps.logger.child({ jobId: job.id, attempt });
    const verdict = job.name === TRANSFER_JOB_NAME
      ? validateTransferRequest(job.data, this.deps.config.transferAmountMax)
      : { ok: false as const, reason: `unknown job name ${JSON.stringify(job.name.slice(0, 64))}` };
    if (!verdict.ok) {
      await this.count('invalid');
      log.warn({ event: 'transfer_invalid', reason: verdict.reason }, 'invalid transfer message');
      throw new UnrecoverableError(`invalid_request: ${verdict.reason}`);
    }
    const request = verdict.request;
    const fields = { operationId: request.operationId, walletId: request.from };

    try {
      for (let round = 1; ; round += 1) {
        const locked = await this.applyUnderLock(job, request);
        if (locked.kind === 'busy') {
          await this.count('lock_busy');
          return await this.deferBusy(job, bullToken, locked.retryAfterMs, log, fields);
        }
        const { result, token } = locked;
        if (result.outcome !== 'stale_fence') {
          await this.count(result.outcome, ...(result.outcome === 'rejected' ? [`rejected:${result.reason}` as const] : []));
          log.info({ event: 'transfer_done', ...fields, fence: token.toString(), outcome: result.outcome,
            ...(result.outcome === 'rejected' ? { reason: result.reason } : {}) }, 'transfer decided');
          return result;
        }
        // Our token is below what the wallet has seen: a newer holder wrote, or Redis lost
        // its counter. Raise the counter past the database's fence and try again.
        await this.count('stale_fence');
        log.warn({ event: 'transfer_stale_fence', ...fields, fence: token.toString(),
          walletFence: result.walletFence.toString(), round }, 'decision refused: stale fence');
        const advanced = await this.deps.lock.advanceFence(request.from, result.walletFence);
        if (advanced.kind === 'raised') await this.count('fence_advanced');
        if (round >= STALE_FENCE_ROUNDS_MAX) {
          throw new RetryableTransferError('stale_fence', `refused ${round} times; wallet fence ${result.walletFence}`);
        }
      }
    } catch (err) {
      if (err instanceof DelayedError || err instanceof UnrecoverableError || err instanceof RetryableTransferError) throw err;
      if (err instanceof LockLostError) {
        await this.count('lock_lost');
        log.warn({ event: 'transfer_lock_lost', ...fields, fence: err.token.toString(), reason: err.reason }, 'lock lost before commit');
        throw new RetryableTransferError('lock_lost', err.message);
      }
      await this.count('transient_error');
      const sqlState = postgresErrorCode(err);
      log.warn({ event: 'transfer_transient_error', ...fields, err, sqlState,
        expected: sqlState !== null && RETRYABLE_SQLSTATES.has(sqlState) }, 'transfer attempt failed; will retry');
      throw new RetryableTransferError('transient_error', err instanceof Error ? err.message : String(err));
    }
  }

  private async applyUnderLock(job: Job, request: TransferRequest): Promise<LockedApply> {
    if (this.skipLock) {
      // Negative control: a token is still issued (fencing stays on) but nobody is excluded.
      const acquired = await this.deps.lock.acquireWithRetry(request.from);
      if (acquired.kind === 'busy') return { kind: 'busy', retryAfterMs: acquired.retryAfterMs };
      await this.deps.lock.release(request.from, acquired.lease.owner, acquired.lease.token);
      const token = acquired.lease.token;
      await this.deps.hooks?.beforeApply?.({ job, request, token, lease: null });
      return { kind: 'done', result: await this.apply(request, token, null), token };
    }
    const outcome = await withLock(this.deps.lock, request.from, async (signal, token, lease) => {
      lease.assertHeld();
      await this.deps.hooks?.beforeApply?.({ job, request, token, lease });
      const result = await this.apply(request, token, lease);
      // The lease ran out while the decision was in flight (a pause, a slow link): too late
      // to abort, so the fence decided. Counted to show how often that guard is what mattered.
      if (signal.aborted) await this.count('lease_lost_in_flight');
      return result;
    });
    if (outcome.kind === 'busy') return { kind: 'busy', retryAfterMs: outcome.retryAfterMs };
    return { kind: 'done', result: outcome.value, token: outcome.token };
  }

  /** Hands the job back to the queue, delayed, instead of holding a worker slot while the wallet is busy. */
  private async deferBusy(job: Job, bullToken: string | undefined, retryAfterMs: number, log: Logger,
    fields: Record<string, string>): Promise<never> {
    const deferrals = Math.max(0, job.attemptsStarted - job.attemptsMade - 1);
    if (deferrals >= LOCK_BUSY_DEFERRALS_MAX) {
      throw new RetryableTransferError('lock_busy', `wallet busy after ${deferrals} deferrals`);
    }
    const capMs = Math.max(LOCK_BUSY_DELAY_BASE_MS, Math.min(LOCK_BUSY_DELAY_CAP_MS, retryAfterMs));
    const delayMs = fullJitterDelayMs(Math.min(deferrals, 16), LOCK_BUSY_DELAY_BASE_MS, capMs, Math.random) + 1;
    log.debug({ event: 'transfer_deferred', ...fields, delayMs, deferrals }, 'wallet busy; job delayed');
    await job.moveToDelayed(Date.now() + delayMs, bullToken);
    throw new DelayedError();
  }
}

/**
 * One BullMQ Worker per consumed queue shard (QUEUE_SHARDS, QUEUE_SHARDS_CONSUMED), all
 * sharing one processor. BullMQ's concurrency is per Worker: WORKER_CONCURRENCY jobs per shard.
 */
export function startTransferWorkers(deps: TransferWorkerDeps): Worker[] {
  const processor = new TransferProcessor(deps);
  return consumedQueueShardsOf(deps.config).map((shard) => shardWorker(shard, processor, deps));
}

/** The unsharded form: the one Worker of a process that consumes exactly one queue. */
export function startTransferWorker(deps: TransferWorkerDeps): Worker {
  const workers = startTransferWorkers(deps);
  if (workers.length !== 1) {
    void Promise.all(workers.map((w) => w.close()));
    throw new RangeError(`startTransferWorker serves one queue; this process consumes ${workers.length} (use startTransferWorkers)`);
  }
  return workers[0] as Worker;
}

function shardWorker(shard: QueueShard, processor: TransferProcessor, deps: TransferWorkerDeps): Worker {
  const worker = new Worker(shard.name, (job, token) => processor.process(job, token), {
    connection: deps.connection,
    prefix: shard.prefix,
    concurrency: deps.config.workerConcurrency,
    lockDuration: deps.config.jobLockDurationMs,
    stalledInterval: deps.config.jobStalledIntervalMs,
    maxStalledCount: JOB_STALLED_COUNT_MAX,
    settings: {
      // Serves TRANSFER_BACKOFF_TYPE, the type our producer puts on every job.
      backoffStrategy: (attemptsMade: number) => transferBackoffMs(attemptsMade),
    },
  });
  worker.on('failed', (job, err) => {
    const final = err instanceof UnrecoverableError || (job !== undefined && job.attemptsMade >= (job.opts.attempts ?? 1));
    if (job !== undefined && final) {
      deps.logger.error({ event: 'transfer_failed', queue: shard.name, jobId: job.id, attempt: job.attemptsMade, reason: err.message },
        'job failed for good; it stays in the failed set');
    }
  });
  worker.on('error', (err) => deps.logger.error({ err, queue: shard.name }, 'worker error'));
  return worker;
}
