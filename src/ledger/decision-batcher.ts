// Gathers the transfers that one process holds at the same time and sends them to the database
// together: one round trip and one commit for up to batchMax transfers. A transfer waits at most
// waitMs for company, and not at all when nothing else in the process is on its way (a quiet
// system pays no latency for batching). Every transfer keeps its own answer. A decision that
// does not come back within deadlineMs is given up: its transfers are withdrawn with a retryable
// error (each is idempotent, so a late commit answers the retry as `duplicate`) and its slot is
// freed; a waiting transfer whose lease is lost (its signal) leaves the batcher at once.
import { wholeNumberIn } from '../config/bounds.ts';
import {
  CONFIG_DEFAULTS,
  TRANSFER_BATCH_MAX_LIMIT,
  TRANSFER_BATCH_WAIT_MS_LIMIT,
  TRANSFER_BATCHES_IN_FLIGHT_LIMIT,
} from '../config/config.ts';
import { DB_CONNECTION_TIMEOUT_MS, DB_QUERY_TIMEOUT_MARGIN_MS, dbCallDeadlineMs } from '../db/prisma.ts';
import { DecisionTimeoutError, LedgerContractError } from '../errors.ts';
import { contextWithSpan, endSpan, type Span, startSpan, withSpan } from '../tracing/spans.ts';
import type { FencedOperation } from './apply-payments.ts';
import type { ApplyResult } from './outcome.ts';

/** The deadline of a decision with the default DB_STATEMENT_TIMEOUT_MS (see dbCallDeadlineMs). */
export const DECISION_DEADLINE_MS_DEFAULT = dbCallDeadlineMs({
  dbStatementTimeoutMs: Number(CONFIG_DEFAULTS.DB_STATEMENT_TIMEOUT_MS),
});
/** The largest deadline: that of the largest DB_STATEMENT_TIMEOUT_MS. */
export const DECISION_DEADLINE_MS_LIMIT = DB_CONNECTION_TIMEOUT_MS + 600_000 + DB_QUERY_TIMEOUT_MARGIN_MS;

/** Decides the given transfers in order, one result per transfer, in the same order. */
export type DecideBatch = (operations: readonly FencedOperation[]) => Promise<ApplyResult[]>;

export interface BatchItem extends FencedOperation {
  /**
   * The last check before the batch is sent (a lease's assertHeld): throwing withdraws this
   * transfer alone, which then fails with that error, and the others go on.
   */
  readonly check?: () => void;
  /** Runs after the check, right before sending: for tests and the chaos harness (a pause there is the worst case). */
  readonly beforeSend?: () => Promise<void> | void;
  /**
   * The lease's signal: once it fires, a transfer still waiting for its batch is withdrawn with
   * its reason. One already sent waits for its decision or the deadline, as before.
   */
  readonly signal?: AbortSignal;
  /**
   * The transfer's span for its wait in the batch (when the process traces): the batch's span is
   * linked to it and it to the batch's, and the first one sent is the batch span's parent, so
   * every transfer's trace shows its decision and the trace of the first holds the batch's work.
   */
  readonly span?: Span;
}

export interface BatchStats {
  /** Transfers sent (withdrawn ones excluded). */
  readonly size: number;
  readonly withdrawn: number;
  readonly seconds: number;
  readonly ok: boolean;
  /** No answer within deadlineMs: the batch was withdrawn. */
  readonly timedOut: boolean;
  /** Why it was sent: full, quiet (nobody else on the way), waited (waitMs passed). */
  readonly trigger: FlushTrigger;
}

export type FlushTrigger = 'full' | 'quiet' | 'waited';

export interface DecisionBatcherOptions {
  readonly decide: DecideBatch;
  readonly batchMax: number;
  readonly waitMs: number;
  readonly inFlightMax: number;
  /** How long a sent batch waits for its decision; default DECISION_DEADLINE_MS_DEFAULT. */
  readonly deadlineMs?: number;
  readonly onBatch?: (stats: BatchStats) => void;
}

/** A transfer announced to the batcher before it is ready (its lock is being taken). */
export interface ExpectedDecision {
  /** Queues the transfer for the next batch and resolves with its own result. Once only. */
  submit(item: BatchItem): Promise<ApplyResult>;
  /** The transfer will not come (busy lock, error); a no-op after submit. */
  cancel(): void;
}

interface Pending {
  readonly item: BatchItem;
  readonly queuedAtMs: number;
  /** Answered already (or withdrawn): later answers are ignored. */
  readonly settled: boolean;
  resolve(result: ApplyResult): void;
  reject(err: unknown): void;
}

export class DecisionBatcher {
  readonly batchMax: number;
  readonly waitMs: number;
  readonly inFlightMax: number;
  readonly deadlineMs: number;
  private readonly decide: DecideBatch;
  private readonly onBatch: ((stats: BatchStats) => void) | undefined;
  private pending: Pending[] = [];
  /** Transfers announced (expect) and not yet submitted or cancelled. */
  private expected = 0;
  private inFlight = 0;
  private timer: NodeJS.Timeout | null = null;
  private idleWaiters: (() => void)[] = [];

  constructor(options: DecisionBatcherOptions) {
    this.decide = options.decide;
    this.batchMax = wholeNumberIn('batchMax', options.batchMax, 1, TRANSFER_BATCH_MAX_LIMIT);
    this.waitMs = wholeNumberIn('waitMs', options.waitMs, 0, TRANSFER_BATCH_WAIT_MS_LIMIT);
    this.inFlightMax = wholeNumberIn('inFlightMax', options.inFlightMax, 1, TRANSFER_BATCHES_IN_FLIGHT_LIMIT);
    this.deadlineMs = wholeNumberIn(
      'deadlineMs',
      options.deadlineMs ?? DECISION_DEADLINE_MS_DEFAULT,
      1,
      DECISION_DEADLINE_MS_LIMIT,
    );
    this.onBatch = options.onBatch;
  }

  expect(): ExpectedDecision {
    this.expected += 1;
    let state: 'expected' | 'submitted' | 'cancelled' = 'expected';
    return {
      submit: (item) => {
        if (state !== 'expected') throw new Error(`a decision can be submitted once, and not after cancel (${state})`);
        state = 'submitted';
        this.expected -= 1;
        return new Promise<ApplyResult>((resolve, reject) => this.enqueue(item, resolve, reject));
      },
      cancel: () => {
        if (state !== 'expected') return;
        state = 'cancelled';
        this.expected -= 1;
        // The pending ones may have been waiting for this one only.
        this.schedule();
      },
    };
  }

  /** Transfers waiting for a batch, and batches at the database: for metrics and tests. */
  get load(): { pending: number; expected: number; inFlight: number } {
    return { pending: this.pending.length, expected: this.expected, inFlight: this.inFlight };
  }

  /** Resolves once nothing is pending or in flight (a clean shutdown waits for this). */
  async idle(): Promise<void> {
    if (this.pending.length === 0 && this.inFlight === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private enqueue(item: BatchItem, resolve: (r: ApplyResult) => void, reject: (err: unknown) => void): void {
    const { signal } = item;
    let settled = false;
    const onAbort = () => {
      const at = this.pending.indexOf(p);
      if (at < 0) return; // sent already
      this.pending.splice(at, 1);
      p.reject(signal?.reason);
      this.schedule();
    };
    const p: Pending = {
      item,
      queuedAtMs: performance.now(),
      get settled() {
        return settled;
      },
      resolve: (result) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      },
      reject: (err) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        reject(err);
      },
    };
    if (signal?.aborted) {
      p.reject(signal.reason);
      this.schedule();
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    this.pending.push(p);
    this.schedule();
  }

  private schedule(): void {
    if (this.pending.length === 0) {
      this.notifyIdle();
      return;
    }
    if (this.inFlight >= this.inFlightMax) return; // a returning batch schedules again
    const trigger = this.trigger();
    if (trigger !== null) {
      this.flush(trigger);
      return;
    }
    if (this.timer === null) {
      const oldest = this.pending[0];
      const dueInMs = oldest === undefined ? 0 : Math.max(0, oldest.queuedAtMs + this.waitMs - performance.now());
      this.timer = setTimeout(() => {
        this.timer = null;
        this.schedule();
      }, Math.ceil(dueInMs));
    }
  }

  private trigger(): FlushTrigger | null {
    if (this.pending.length >= this.batchMax) return 'full';
    // Nobody else in this process is heading here and nothing is at the database: waiting
    // could only add latency.
    if (this.expected === 0 && this.inFlight === 0) return 'quiet';
    const oldest = this.pending[0];
    if (oldest !== undefined && performance.now() - oldest.queuedAtMs >= this.waitMs) return 'waited';
    return null;
  }

  private flush(trigger: FlushTrigger): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    const batch = this.pending.splice(0, this.batchMax);
    this.inFlight += 1;
    void this.send(batch, trigger).finally(() => {
      this.inFlight -= 1;
      this.schedule();
    });
    // More may be ready at once (a full batch left others behind).
    if (this.pending.length > 0) this.schedule();
  }

  private async send(batch: Pending[], trigger: FlushTrigger): Promise<void> {
    const live: Pending[] = [];
    for (const p of batch) {
      try {
        p.item.check?.();
        live.push(p);
      } catch (err) {
        p.reject(err);
      }
    }
    const sent: Pending[] = [];
    for (const p of live) {
      try {
        await p.item.beforeSend?.();
        // Withdrawn meanwhile (its lease was lost): not sent.
        if (!p.settled) sent.push(p);
      } catch (err) {
        p.reject(err);
      }
    }
    if (sent.length === 0) return;
    const startedAtMs = performance.now();
    let ok = false;
    let timedOut = false;
    let failure: unknown;
    let deadlineTimer: NodeJS.Timeout | undefined;
    const batchSpan = this.batchSpanOf(sent, trigger);
    try {
      const decision = withSpan(batchSpan, () =>
        this.decide(sent.map((p) => ({ request: p.item.request, fence: p.item.fence, leaseId: p.item.leaseId }))),
      );
      const deadline = new Promise<never>((_, reject) => {
        deadlineTimer = setTimeout(() => {
          timedOut = true;
          reject(new DecisionTimeoutError(this.deadlineMs, sent.length));
        }, this.deadlineMs);
      });
      // A decision answered after the deadline is dropped; its error too.
      decision.catch(() => undefined);
      const results = await Promise.race([decision, deadline]);
      if (results.length !== sent.length) {
        throw new LedgerContractError('batch_result_count', `${results.length} results for ${sent.length} transfers`);
      }
      sent.forEach((p, i) => {
        p.resolve(results[i] as ApplyResult);
      });
      ok = true;
    } catch (err) {
      failure = err;
      for (const p of sent) p.reject(err);
    } finally {
      clearTimeout(deadlineTimer);
      endSpan(batchSpan, ok ? undefined : failure);
      this.onBatch?.({
        size: sent.length,
        withdrawn: batch.length - sent.length,
        seconds: (performance.now() - startedAtMs) / 1000,
        ok,
        timedOut,
        trigger,
      });
    }
  }

  /** The batch's span, when its transfers have spans (see BatchItem.span); null otherwise. */
  private batchSpanOf(sent: readonly Pending[], trigger: FlushTrigger): Span | null {
    const members = sent.flatMap((p) => (p.item.span === undefined ? [] : [p.item.span]));
    const first = members[0];
    if (first === undefined) return null;
    const span = startSpan(
      'decide batch',
      { 'batch.size': sent.length, 'batch.traced': members.length, 'batch.trigger': trigger },
      { parent: contextWithSpan(first), links: members.map((m) => ({ context: m.spanContext() })) },
    );
    if (span === null) return null;
    for (const m of members) {
      m.addLink({ context: span.spanContext() });
      m.setAttribute('batch.size', sent.length);
    }
    return span;
  }

  private notifyIdle(): void {
    if (this.inFlight > 0 || this.idleWaiters.length === 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
