// The checker: after the queue has drained, proves (or refutes, with counterexamples) the
// invariants of DESIGN.md on the database — the ledger ones through src/ledger/reconciliation.ts —
// and the end-to-end ones that need the harness's own record of what was sent: every message
// has a final state, every operation one terminal outcome, invalid messages moved nothing,
// each job's answer agrees with the stored record, and the final balances are exactly the
// expected ones.
import type { PrismaClient } from '../../src/db/prisma.ts';
import { COUNTEREXAMPLES_MAX, type ReconcileReport, reconcile } from '../../src/ledger/reconciliation.ts';
import { classifyFailure } from '../../src/ledger/vocabulary.ts';
import type { ChaosMessage, ChaosWorkload } from './chaos-workload.ts';
import { type PaymentFigures, paymentChecks, type RecordRow } from './payment-checks.ts';

/** Which property a check protects; negative controls are judged by group. */
export type CheckGroup = 'money' | 'exactly-once' | 'queue' | 'input' | 'fence';

export type Counterexample = Record<string, string | number | boolean | null>;

export interface CheckResult {
  readonly name: string;
  readonly group: CheckGroup;
  readonly ok: boolean;
  /** How many items broke it (counterexamples are capped). */
  readonly violations: number;
  /** The violation count is a lower bound (reconcile() stops at COUNTEREXAMPLES_MAX rows). */
  readonly capped: boolean;
  readonly counterexamples: readonly Counterexample[];
}

/** The final state of one BullMQ job, as read after the drain. */
export interface FinalJob {
  readonly jobId: string;
  readonly name: string;
  readonly state: string;
  readonly returnvalue: unknown;
  readonly failedReason: string | null;
  readonly attemptsMade: number;
  readonly attemptsStarted: number;
  /** Date.now() values. */
  readonly timestamp: number;
  readonly processedOn: number | null;
  readonly finishedOn: number | null;
  readonly data: unknown;
}

export interface CheckInput {
  readonly workload: ChaosWorkload;
  /** jobId → the message sent under it. */
  readonly sent: ReadonlyMap<string, ChaosMessage>;
  readonly jobs: readonly FinalJob[];
  readonly drained: { ok: boolean; detail: string };
  /**
   * An intake run: a lossy failover may lose a valid transfer's job, so a missing job or a missing
   * record of a valid transfer is judged by the intake checks (intake-checks.ts), not here.
   */
  readonly intakeRun?: boolean;
}

/** A record as the payment checks read it, with the fence it was decided under. */
interface TransferRow extends RecordRow {
  fence: bigint;
}

export const TERMINAL_OUTCOME_CHECK =
  'every operation has exactly one terminal outcome, or all its messages are failed with a reason';

export class Check {
  violations = 0;
  readonly counterexamples: Counterexample[] = [];
  constructor(
    readonly name: string,
    readonly group: CheckGroup,
  ) {}

  fail(example: Counterexample): void {
    this.violations += 1;
    if (this.counterexamples.length < COUNTEREXAMPLES_MAX) this.counterexamples.push(example);
  }

  result(): CheckResult {
    return {
      name: this.name,
      group: this.group,
      ok: this.violations === 0,
      violations: this.violations,
      capped: false,
      counterexamples: this.counterexamples,
    };
  }
}

const RECONCILE_GROUPS: Record<string, CheckGroup> = {
  'conservation: sum of balances equals sum of opening balances': 'money',
  'no negative balance': 'money',
  'at most one debit per operation': 'exactly-once',
  "every operation's entries sum to zero": 'money',
  'every wallet balance equals the sum of its entries': 'money',
  'applied transfers have one debit and one credit; others none': 'exactly-once',
  'every money movement has an operation record': 'exactly-once',
  'per wallet, debit fences never decrease in commit order': 'fence',
  'per wallet, no token was used by two leases': 'fence',
  "each wallet's held equals the sum of its active holds": 'money',
  'every ended hold has captured + released = amount and ended once': 'exactly-once',
  'no applied capture of a voided or expired hold, no applied void of a captured one': 'exactly-once',
  "no refund total above its original's refundable amount": 'money',
  "every split's legs sum to its debit": 'money',
};

/** The answer a completed job returned (its outcome, the stored record of a duplicate, a rejection's reason), or null. */
export function outcomeOf(
  value: unknown,
): { outcome: string; stored?: { status?: string }; reason?: string; fence?: string } | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  return typeof v.outcome === 'string' ? (v as { outcome: string }) : null;
}

function short(value: string, max = 60): string {
  return value.length > max ? `${value.slice(0, max)}…(${value.length} chars)` : value;
}

export interface CheckOutput {
  readonly checks: CheckResult[];
  /** The ledger's own totals, from reconcile(). */
  readonly totals: ReconcileReport['totals'];
  /** The payments' counts: per kind and outcome, holds expired. */
  readonly payments: PaymentFigures;
}

export async function runChecks(prisma: PrismaClient, input: CheckInput): Promise<CheckOutput> {
  const { workload, sent, jobs } = input;
  const results: CheckResult[] = [];

  // The ledger invariants, from the project's own reconcile().
  const ledger = await reconcile(prisma);
  for (const inv of ledger.invariants) {
    const counterexamples = inv.counterexamples;
    const ok = counterexamples.length === 0;
    results.push({
      name: inv.name,
      group: RECONCILE_GROUPS[inv.name] ?? 'money',
      ok,
      violations: ok ? 0 : Math.max(1, counterexamples.length),
      capped: counterexamples.length >= COUNTEREXAMPLES_MAX,
      counterexamples,
    });
  }

  const transfers = await prisma.$queryRaw<TransferRow[]>`
    SELECT operation_id, request_hash, kind, original_id, from_wallet, to_wallet, amount, status, reason, fence
      FROM transfers`;
  const records = new Map(transfers.map((t) => [t.operation_id, t]));
  const wallets = await prisma.$queryRaw<{ id: string; balance: bigint; held: bigint; last_fence: bigint }[]>`
    SELECT id, balance, held, last_fence FROM wallets`;
  const debits = await prisma.$queryRaw<
    { operation_id: string; wallet_id: string; amount: bigint; fence: bigint | null }[]
  >`
    SELECT operation_id, wallet_id, amount, fence FROM ledger_entries WHERE kind = 'debit'`;
  const debitsByOp = new Map<string, typeof debits>();
  for (const d of debits) debitsByOp.set(d.operation_id, [...(debitsByOp.get(d.operation_id) ?? []), d]);

  const drained = new Check('the queue drained within the bound (nothing stuck)', 'queue');
  if (!input.drained.ok) drained.fail({ detail: input.drained.detail });
  results.push(drained.result());

  const byJobId = new Map(jobs.map((j) => [j.jobId, j]));
  const final = new Check('every enqueued message reached a final state (completed, or failed with a reason)', 'queue');
  for (const [jobId, message] of sent) {
    const job = byJobId.get(jobId);
    if (job === undefined && input.intakeRun === true && message.kind !== 'invalid') continue;
    if (job === undefined)
      final.fail({ jobId, operationId: message.operationId, kind: message.kind, state: 'missing' });
    else if (job.state !== 'completed' && job.state !== 'failed')
      final.fail({ jobId, operationId: message.operationId, state: job.state });
    else if (job.state === 'failed' && (job.failedReason ?? '') === '')
      final.fail({ jobId, operationId: message.operationId, state: 'failed without a reason' });
  }
  results.push(final.result());

  // Jobs per operation, valid messages only.
  const jobsByOp = new Map<string, { job: FinalJob; message: ChaosMessage }[]>();
  for (const [jobId, message] of sent) {
    if (message.kind === 'invalid' || message.operationId === null) continue;
    const job = byJobId.get(jobId);
    if (job === undefined) continue;
    jobsByOp.set(message.operationId, [...(jobsByOp.get(message.operationId) ?? []), { job, message }]);
  }

  const terminal = new Check(TERMINAL_OUTCOME_CHECK, 'queue');
  const matches = new Check('every stored outcome is one of the requests sent under its id', 'exactly-once');
  const noRejection = new Check('no valid transfer was rejected (opening balances cover every sender)', 'money');
  for (const op of workload.operations.values()) {
    const record = records.get(op.operationId);
    const opJobs = jobsByOp.get(op.operationId) ?? [];
    if (record === undefined) {
      if (input.intakeRun === true) continue;
      const unanswered = opJobs.filter(({ job }) => !(job.state === 'failed' && (job.failedReason ?? '') !== ''));
      if (unanswered.length > 0 || opJobs.length === 0) {
        terminal.fail({
          operationId: op.operationId,
          record: 'none',
          jobs: opJobs.map(({ job }) => `${job.jobId}:${job.state}`).join(' '),
        });
      }
      continue;
    }
    if (op.kind !== 'transfer') {
      if (!op.variants.has(record.request_hash) || record.from_wallet !== op.from || record.kind !== op.kind) {
        matches.fail({
          operationId: op.operationId,
          storedHash: record.request_hash.slice(0, 12),
          storedKind: record.kind,
          sentKind: op.kind,
          from: record.from_wallet,
        });
      }
      continue;
    }
    if (!op.variants.has(record.request_hash) || record.from_wallet !== op.from || record.to_wallet !== op.to) {
      matches.fail({
        operationId: op.operationId,
        storedHash: record.request_hash.slice(0, 12),
        from: record.from_wallet,
        to: record.to_wallet,
        amount: String(record.amount),
      });
    } else if (op.variants.get(record.request_hash) !== record.amount) {
      matches.fail({
        operationId: op.operationId,
        storedAmount: String(record.amount),
        sentAmount: String(op.variants.get(record.request_hash)),
      });
    }
    if (record.status !== 'applied' && op.kind === 'transfer')
      noRejection.fail({ operationId: op.operationId, status: record.status, reason: record.reason });
  }
  for (const record of records.values()) {
    if (!workload.operations.has(record.operation_id)) {
      matches.fail({
        operationId: short(record.operation_id),
        problem: 'record of an operation never sent as a valid message',
      });
    }
  }
  results.push(terminal.result(), matches.result(), noRejection.result());

  // What each completed job answered must agree with the record; at most one delivery applies.
  const answers = new Check(
    "every job's answer agrees with the stored record (applied / duplicate / conflict)",
    'exactly-once',
  );
  const onceApplied = new Check('each operation was applied by at most one delivery', 'exactly-once');
  for (const [operationId, entries] of jobsByOp) {
    const record = records.get(operationId);
    let applied = 0;
    for (const { job, message } of entries) {
      if (job.state !== 'completed') continue;
      const answer = outcomeOf(job.returnvalue);
      const example = {
        operationId,
        jobId: job.jobId,
        answer: answer?.outcome ?? String(job.returnvalue),
        recordStatus: record?.status ?? null,
        sameRequest: record === undefined ? null : record.request_hash === message.hash,
      };
      if (answer === null || record === undefined) {
        answers.fail(example);
        continue;
      }
      const same = record.request_hash === message.hash;
      if (answer.outcome === 'applied') {
        applied += 1;
        if (!same || record.status !== 'applied') answers.fail(example);
      } else if (answer.outcome === 'duplicate') {
        if (!same || answer.stored?.status !== record.status) answers.fail(example);
      } else if (answer.outcome === 'conflict') {
        if (same) answers.fail(example);
      } else if (answer.outcome === 'rejected') {
        if (!same || record.status !== 'rejected' || answer.reason !== record.reason) answers.fail(example);
      } else {
        answers.fail(example);
      }
    }
    if (applied > 1)
      onceApplied.fail({ operationId, appliedAnswers: applied, jobs: entries.map(({ job }) => job.jobId).join(' ') });
  }
  results.push(answers.result(), onceApplied.result());

  // Conflicting requests under one id: one of them moved money, once.
  const conflicts = new Check('conflicts never moved money twice (one debit, of the stored amount)', 'exactly-once');
  for (const op of workload.operations.values()) {
    if (op.variants.size < 2) continue;
    const opDebits = debitsByOp.get(op.operationId) ?? [];
    const record = records.get(op.operationId);
    if (
      opDebits.length > 1 ||
      (opDebits.length === 1 && (record === undefined || -(opDebits[0]?.amount ?? 0n) !== record.amount))
    ) {
      conflicts.fail({
        operationId: op.operationId,
        debits: opDebits.length,
        debitAmounts: opDebits.map((d) => (-d.amount).toString()).join(' '),
        storedAmount: record?.amount == null ? null : String(record.amount),
      });
    }
  }
  results.push(conflicts.result());

  // Invalid messages: refused as invalid, on the first attempt, and nothing under their ids.
  const invalid = new Check('invalid messages are in the failed set as invalid_request and moved no money', 'input');
  const entryOps = new Set(debits.map((d) => d.operation_id));
  for (const [jobId, message] of sent) {
    if (message.kind !== 'invalid') continue;
    const job = byJobId.get(jobId);
    const reason = job?.failedReason ?? '';
    const example = {
      jobId,
      defect: message.defect,
      state: job?.state ?? 'missing',
      reason: short(reason, 80),
      attemptsMade: job?.attemptsMade ?? 0,
    };
    if (
      job === undefined ||
      job.state !== 'failed' ||
      classifyFailure(reason).kind !== 'invalid_request' ||
      job.attemptsMade > 1
    )
      invalid.fail(example);
    else if (message.operationId !== null && (records.has(message.operationId) || entryOps.has(message.operationId))) {
      invalid.fail({ ...example, problem: 'money moved or a record was written under its id' });
    }
  }
  results.push(invalid.result());

  // Exact final balances: the model's (payment-checks.ts), which replays every applied operation
  // (its stored request) and every expiry by the rules; with transfers alone, opening ± each once.
  const payments = await paymentChecks(prisma, workload, transfers);
  results.push(...payments.checks);
  const expected = payments.expected;
  const balances = new Check(
    'final balances equal the expected ones (opening ± every applied operation, once)',
    'money',
  );
  const seen = new Set<string>();
  for (const w of wallets) {
    seen.add(w.id);
    const want = expected.get(w.id);
    if (want === undefined) balances.fail({ wallet: w.id, actual: w.balance.toString(), expected: null });
    else if (want !== w.balance) {
      balances.fail({
        wallet: w.id,
        expected: want.toString(),
        actual: w.balance.toString(),
        difference: (w.balance - want).toString(),
      });
    }
    // Its holding account, `$held:<wallet>`, is its `held`; one the model never credited holds nothing.
    const wantHeld = expected.get(`$held:${w.id}`) ?? 0n;
    if (wantHeld !== w.held) {
      balances.fail({
        wallet: `$held:${w.id}`,
        expected: wantHeld.toString(),
        actual: w.held.toString(),
        difference: (w.held - wantHeld).toString(),
      });
    }
  }
  for (const w of workload.wallets)
    if (!seen.has(w)) balances.fail({ wallet: w, actual: null, problem: 'wallet missing' });
  results.push(balances.result());

  // The database's per-wallet fence is the highest token that wrote; no debit carries a higher one.
  const fenceHigh = new Check("each wallet's last_fence is at least the fence of every debit it took", 'fence');
  const maxDebitFence = new Map<string, bigint>();
  for (const d of debits) {
    if (d.fence !== null && d.fence > (maxDebitFence.get(d.wallet_id) ?? 0n)) maxDebitFence.set(d.wallet_id, d.fence);
  }
  // A holding account is debited under its wallet's token (the wallet is the one locked and
  // fenced), so its debits are judged against that wallet's last_fence.
  for (const w of wallets) {
    const max = maxDebitFence.get(w.id) ?? 0n;
    if (w.last_fence < max)
      fenceHigh.fail({ wallet: w.id, lastFence: w.last_fence.toString(), highestDebitFence: max.toString() });
    const heldMax = maxDebitFence.get(`$held:${w.id}`) ?? 0n;
    if (w.last_fence < heldMax)
      fenceHigh.fail({
        wallet: `$held:${w.id}`,
        sourceLastFence: w.last_fence.toString(),
        highestDebitFence: heldMax.toString(),
      });
  }
  results.push(fenceHigh.result());
  return { checks: results, totals: ledger.totals, payments: payments.figures };
}
