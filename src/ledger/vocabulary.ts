// Every name an answer or a failure can carry, declared once with a one-line meaning and a
// one-line action: the terminal outcomes, the rejection reasons, the non-terminal answers, the
// failure kinds (the prefix of a failed attempt's message, which BullMQ keeps as the job's
// failedReason) and the errors whose messages fill a failure's detail. The SQL contract checks
// (apply-transfer.ts), the worker's messages, the metrics' label values and
// docs/reference/outcomes.md all derive from these tables; test/ledger/vocabulary.test.ts fails
// when the SQL functions can answer something that is not here. BullMQ's enums/error-code.ts is
// the model. The errors themselves, and the prefixes their messages start with, are in
// src/errors.ts, below the lock and the ledger alike; this module documents them.
import {
  DECISION_TIMEOUT_PREFIX,
  LEDGER_CONTRACT_VIOLATIONS,
  LOCK_LOST_PREFIX,
  LOCK_PROTOCOL_PREFIX,
} from '../errors.ts';
import type { OperationKind } from './transfer-request.ts';

export { LEDGER_CONTRACT_VIOLATIONS, type LedgerContractViolation } from '../errors.ts';

/** What an operator reads about one name: what it means, and what to do about it. */
export interface Described {
  readonly meaning: string;
  readonly action: string;
}

/** The answers a job completes with (its return value's `outcome`). */
export const TERMINAL_OUTCOMES = ['applied', 'rejected', 'duplicate', 'conflict'] as const;
export type TerminalOutcome = (typeof TERMINAL_OUTCOMES)[number];

export const TERMINAL_OUTCOME_DOCS: Readonly<Record<TerminalOutcome, Described>> = {
  applied: {
    meaning:
      'Decided: the money moved, one debit and its credits (one for a transfer) recorded under the operation and its fence.',
    action: 'Nothing.',
  },
  rejected: {
    meaning: 'Decided and recorded without moving money; the `reason` says why. A redelivery answers `duplicate`.',
    action: 'Act on the reason (below); a retry needs a new operationId, the same one answers the stored rejection.',
  },
  duplicate: {
    meaning: 'This operationId was decided before for the same request; `stored` is that decision, nothing moved now.',
    action: 'Nothing: a redelivery or a producer retry, answered from the idempotency record.',
  },
  conflict: {
    meaning: 'This operationId was decided before for a different request; nothing moved, `stored` is the first one.',
    action: 'A producer bug: find who reused the operationId for another transfer; one id per logical operation.',
  },
};

/** The outcomes the idempotency record stores (`transfers.status`). */
export const STORED_STATUSES = ['applied', 'rejected'] as const;
export type StoredStatus = (typeof STORED_STATUSES)[number];

/**
 * Why an operation was rejected: exactly the reasons the SQL functions can answer, a transfer's
 * first, then the payment operations', then a credit limit change's, then the wallet operations' and a
 * wallet's status's, then `invalid_request` (an intake request no worker can decide). The database's CHECK constraint on `transfers.reason` allows exactly these.
 */
export const REJECTION_REASONS = [
  'insufficient_funds',
  'unknown_wallet',
  'currency_mismatch',
  'same_wallet',
  'hold_not_found',
  'hold_rejected',
  'hold_already_captured',
  'hold_already_voided',
  'hold_expired',
  'exceeds_hold_amount',
  'expiry_out_of_range',
  'original_not_found',
  'original_not_refundable',
  'refund_exceeds_original',
  'wallet_mismatch',
  'limit_below_used',
  'wallet_exists',
  'wallet_not_empty',
  'wallet_closed',
  'wallet_frozen',
  'invalid_request',
] as const;
/** One of REJECTION_REASONS. */
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** One check of a decision: the reason it answers, and what it looks at. */
export interface CheckStep {
  readonly reason: RejectionReason;
  readonly when: string;
}

/** What a capture and a void both check, in order, before a capture checks its amount. */
const HOLD_ENDING_CHECKS: readonly CheckStep[] = [
  { reason: 'hold_rejected', when: 'no hold row, the hold recorded rejected' },
  { reason: 'hold_not_found', when: 'no hold row otherwise' },
  { reason: 'wallet_mismatch', when: "`from` against the hold's source" },
  { reason: 'hold_already_captured', when: "the hold's state" },
  { reason: 'hold_already_voided', when: "the hold's state" },
  { reason: 'hold_expired', when: "the hold's state or its expiry (releasing it when still active)" },
];

/**
 * What a wallet's status refuses, judged on the postings an operation would write once its own
 * checks passed (decision_status_refusal.sql): a debit of a wallet that is not open, a credit to a
 * wallet frozen for credits too or closed; money a wallet's own holds give back is never refused.
 */
const STATUS_CHECKS: readonly CheckStep[] = [
  { reason: 'wallet_closed', when: 'a wallet it would debit or credit is closed' },
  {
    reason: 'wallet_frozen',
    when: 'a wallet it would debit is frozen, or one it would credit is frozen for credits too',
  },
];

/** What every wallet operation but an opening checks first. */
const WALLET_CHECKS: readonly CheckStep[] = [
  { reason: 'unknown_wallet', when: '`wallet`' },
  { reason: 'wallet_closed', when: "`wallet`'s status" },
];

/**
 * Each kind's checks in the order its decision makes them; the first that fails is the answer.
 * Read off each kind's function in prisma/sql/ (decision_moved.sql, decision_hold_ended.sql,
 * decision_refunded.sql, decision_split.sql, decision_settled.sql, decision_wallet_changed.sql),
 * the movement checks of decision_refusal.sql and the statuses' (STATUS_CHECKS, last);
 * test/ledger/outcomes-reference.test.ts fails when a function's order, or the reasons a kind can
 * give, differ from this table. Before any of them a recorded operation answers `duplicate` or
 * `conflict`, and a token below the debited wallet's fence `stale_fence`.
 */
export const CHECK_ORDER: Readonly<Record<OperationKind, readonly CheckStep[]>> = {
  transfer: [
    { reason: 'same_wallet', when: '`from` = `to`' },
    { reason: 'unknown_wallet', when: 'either wallet' },
    { reason: 'currency_mismatch', when: "the wallets' currencies, then the message's" },
    { reason: 'insufficient_funds', when: "`from`'s balance plus its credit limit" },
    ...STATUS_CHECKS,
  ],
  hold: [
    { reason: 'same_wallet', when: '`from` = `to`' },
    { reason: 'unknown_wallet', when: 'either wallet' },
    { reason: 'currency_mismatch', when: "the wallets' currencies, then the message's" },
    { reason: 'expiry_out_of_range', when: 'the expiry against the clock and HOLD_EXPIRY_MAX_MS' },
    { reason: 'insufficient_funds', when: "`from`'s balance plus its credit limit" },
    ...STATUS_CHECKS,
  ],
  capture: [
    ...HOLD_ENDING_CHECKS,
    { reason: 'exceeds_hold_amount', when: 'the amount against the held amount' },
    ...STATUS_CHECKS,
  ],
  void: HOLD_ENDING_CHECKS,
  refund: [
    { reason: 'original_not_found', when: 'no record of the original' },
    { reason: 'original_not_refundable', when: 'rejected, of another kind, or a hold not captured' },
    { reason: 'wallet_mismatch', when: "`from` against the original's payee (a split: its legs)" },
    { reason: 'refund_exceeds_original', when: 'the amount against what is left for `from`' },
    { reason: 'unknown_wallet', when: "`from` and the original's source" },
    { reason: 'insufficient_funds', when: "`from`'s balance plus its credit limit" },
    ...STATUS_CHECKS,
  ],
  split: [
    { reason: 'same_wallet', when: "a leg's `to` = `from`, leg by leg in the message's order" },
    { reason: 'unknown_wallet', when: "`from` or the leg's wallet, leg by leg" },
    { reason: 'currency_mismatch', when: "the leg's currency and `from`'s, then the message's, leg by leg" },
    {
      reason: 'insufficient_funds',
      when: "`from`'s balance plus its credit limit against the legs' total, once every leg passed",
    },
    ...STATUS_CHECKS,
  ],
  deposit: [
    { reason: 'unknown_wallet', when: '`to`' },
    { reason: 'currency_mismatch', when: "`to`'s currency against the message's" },
    ...STATUS_CHECKS,
  ],
  withdrawal: [
    { reason: 'unknown_wallet', when: '`from`' },
    { reason: 'currency_mismatch', when: "`from`'s currency against the message's" },
    { reason: 'insufficient_funds', when: "`from`'s balance plus its credit limit" },
    ...STATUS_CHECKS,
  ],
  credit_limit: [
    { reason: 'unknown_wallet', when: '`from`' },
    { reason: 'wallet_closed', when: "`from`'s status" },
    { reason: 'limit_below_used', when: 'the new limit against what `from` uses (its balance below zero)' },
  ],
  open_wallet: [{ reason: 'wallet_exists', when: '`wallet` has a row (a closed wallet keeps its own)' }],
  freeze_wallet: WALLET_CHECKS,
  unfreeze_wallet: WALLET_CHECKS,
  close_wallet: [...WALLET_CHECKS, { reason: 'wallet_not_empty', when: "`wallet`'s balance and held amount" }],
};

export const REJECTION_REASON_DOCS: Readonly<Record<RejectionReason, Described>> = {
  insufficient_funds: {
    meaning:
      "The amount (a split's total) would take the debited wallet's balance below minus its credit limit (0 unless set); the balance is what is available, held money is not in it.",
    action:
      'Fund the wallet (or raise its credit limit) if the transfer should happen, then send it again under a new operationId.',
  },
  unknown_wallet: {
    meaning: 'A wallet the operation names does not exist: its source, its destination, a leg of a split.',
    action: 'Check the wallet ids the producer sends; create the wallet, then send again under a new operationId.',
  },
  currency_mismatch: {
    meaning: "The two wallets' currencies differ, or the message's `currency` is not theirs.",
    action: 'Fix the producer: a transfer moves one currency between wallets of that currency.',
  },
  same_wallet: {
    meaning:
      'Source and destination are the same wallet. The worker fails such a message as `invalid_request` first, so only a direct caller of the SQL functions gets this.',
    action: 'Fix the caller of apply_transfer(), apply_transfers() or apply_payments().',
  },
  hold_not_found: {
    meaning:
      'A capture or a void names a hold that has no record (none, or not decided yet), or whose record is not a hold.',
    action:
      'Fix the producer: `hold` is the operationId of the hold itself, sent once the hold is decided; send again under a new operationId.',
  },
  hold_rejected: {
    meaning:
      'A capture or a void names a hold that was rejected: nothing was held, so nothing can be taken or released.',
    action: "Read the hold's own reason; place a new hold if the payment should go ahead.",
  },
  hold_already_captured: {
    meaning: 'A capture or a void names a hold that a capture has already ended; nothing moved now.',
    action: 'Nothing if it is a second try of the same payment; a refund gives money back once captured.',
  },
  hold_already_voided: {
    meaning: 'A capture or a void names a hold that a void has already released; nothing moved now.',
    action: 'Nothing for a second void. A capture comes too late: place a new hold.',
  },
  hold_expired: {
    meaning:
      'A capture or a void names a hold past its expiry: the held money went back to the source (by the sweep, or in this decision).',
    action: 'Place a new hold, with a longer expiry if captures keep coming late.',
  },
  exceeds_hold_amount: {
    meaning: 'A capture asks for more than the hold holds; the hold stays active.',
    action: 'Fix the producer: capture at most the held amount (or leave `amount` out to capture all of it).',
  },
  expiry_out_of_range: {
    meaning: "A hold's expiry is not ahead of the database's clock, or is further ahead than HOLD_EXPIRY_MAX_MS.",
    action: 'Fix the producer: `expiresAt` within HOLD_EXPIRY_MAX_MS from now (or use `expiresInMs`); check its clock.',
  },
  original_not_found: {
    meaning: 'A refund names an original that has no record (none, or not decided yet).',
    action:
      'Fix the producer: `original` is the operationId of the payment to refund, sent once it is decided; send again under a new operationId.',
  },
  original_not_refundable: {
    meaning: 'A refund names a record that is rejected, or that is not a transfer, a captured hold or a split.',
    action: 'Fix the producer: refund only an applied transfer, a captured hold or an applied split.',
  },
  refund_exceeds_original: {
    meaning: 'A refund asks for more than is left of the original after earlier refunds, or nothing is left.',
    action:
      'Nothing if the original is already refunded; otherwise refund at most what is left (leave `amount` out for all of it).',
  },
  wallet_mismatch: {
    meaning:
      "The message's `from` is not the wallet the operation must debit: the hold's source for a capture or a void, the original's destination for a refund.",
    action: 'Fix the producer: send the operation with that wallet as `from` (it is the wallet the worker locks).',
  },
  limit_below_used: {
    meaning:
      "A credit_limit would set the wallet's limit below what it already uses (its balance below zero): the balance would lie below minus the new limit. Nothing changed; the limit in force stays.",
    action:
      'Bring the balance up to at least minus the wanted limit (a credit, a refund), or ask for a limit that covers what is used, under a new operationId.',
  },
  wallet_exists: {
    meaning:
      'An open_wallet names an id that has a wallet already: opened before (by another operation, or by `db:seed`), or closed (a closed wallet keeps its row, so an id is opened once).',
    action:
      'Nothing if the wallet is the one wanted (its currency and limit are in the status); otherwise pick another id.',
  },
  wallet_not_empty: {
    meaning:
      "A close_wallet of a wallet whose balance or held amount is not 0; the event's detail says both. Nothing changed.",
    action:
      'Withdraw or transfer what is left, wait for (or void) its holds, bring a balance below zero back to 0, then close under a new operationId.',
  },
  wallet_closed: {
    meaning:
      'The operation would debit or credit a closed wallet, or change one (a freeze, an unfreeze, a close, a credit limit). A closed wallet takes nothing, for good.',
    action: 'Fix the producer: a closed wallet is gone; pay into another wallet, under a new operationId.',
  },
  wallet_frozen: {
    meaning:
      'The operation would debit a frozen wallet (any freeze), or credit one frozen with `credits: refused`. Money its own holds give back (a void, an expiry) and the capture of a hold placed before the freeze still go through.',
    action:
      'Unfreeze the wallet (unfreeze_wallet) if the operation should happen, then send it under a new operationId.',
  },
  invalid_request: {
    meaning:
      'An intake request whose stored body no worker can decide: outside the wire format at the widest settings (an amount above any TRANSFER_AMOUNT_MAX, an `expiresAt` that is no real date), stored before the intake refused such bodies. The worker that gets its job records it rejected (request_decide_invalid()); nothing moved, and it is never sent again.',
    action: 'Fix the producer, then send the operation again under a new operationId.',
  },
};

/**
 * Answers that end one try but not the job: the worker acts on each and tries again (in the
 * same attempt, or by handing the job back to the queue).
 */
export const NON_TERMINAL_ANSWERS = ['stale_fence', 'lock_busy', 'lock_lost'] as const;
export type NonTerminalAnswer = (typeof NON_TERMINAL_ANSWERS)[number];

export const NON_TERMINAL_ANSWER_DOCS: Readonly<Record<NonTerminalAnswer, Described>> = {
  stale_fence: {
    meaning:
      "The database refused the decision: the token is below the source wallet's last fence, or equal to it but of another lease (a newer holder wrote, or Redis lost its counter). Nothing was written.",
    action:
      'Nothing for one: the worker raises the Redis counter past the fence and tries again. A steady rate means Redis keeps losing its counters (restarts without persistence, failovers).',
  },
  lock_busy: {
    meaning: "Another worker process holds the source wallet's lease; the job goes back to the queue, delayed.",
    action: 'Nothing for a few. Many mean one hot wallet shared by many processes, or a holder that is stuck.',
  },
  lock_lost: {
    meaning:
      'The lease ended before the decision was sent (another owner, no renewal before it ran out, or stopped), so it was not sent; the attempt fails and is retried.',
    action:
      'Nothing for one. A rate means Redis answers slowly or not at all, or the process pauses (GC, CPU starvation) longer than LOCK_TTL_MS.',
  },
};

/** What one decision of apply_transfer() / apply_transfers() answers in its `outcome` column. */
export const DECISION_OUTCOMES = [...TERMINAL_OUTCOMES, 'stale_fence'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/**
 * Failure kinds that no retry of this worker can clear: its database role, its code or the
 * database's functions, or the lock's scripts are wrong. The worker puts the job back, delayed,
 * without spending an attempt, with a reason that names the fix, and stops taking jobs for a hold
 * (src/ops/fault-hold.ts); a ready worker takes the job again later. src/queue/attempt-failure.ts
 * classifies.
 */
export const PERMANENT_KINDS = ['permission_denied', 'ledger_contract', 'lock_protocol', 'internal_error'] as const;
export type PermanentKind = (typeof PERMANENT_KINDS)[number];

/**
 * The PostgreSQL SQLSTATEs that make an error permanent. The errors of this package are
 * classified by their code (src/queue/attempt-failure.ts), a RangeError (a bound our own code
 * checks: a bug, not a server) is `internal_error`; everything else is transient
 * (`transient_error`) and retried as before.
 */
export const PERMANENT_SQLSTATES: Readonly<Record<string, PermanentKind>> = {
  /** insufficient_privilege: the role lost EXECUTE (or USAGE) after a migration or a restore. */
  '42501': 'permission_denied',
  /** undefined_function, undefined_table: the database lacks what this build calls. */
  '42883': 'ledger_contract',
  '42P01': 'ledger_contract',
};

/**
 * Failure kinds of an attempt that are retried with back-off (RetryableTransferError's kinds):
 * the transient ones, which BullMQ retries as attempts, and the permanent ones, which the worker
 * puts back without spending an attempt, for a ready worker to retry once fixed.
 */
export const RETRY_KINDS = ['stale_fence', 'lock_lost', 'lock_busy', 'transient_error', ...PERMANENT_KINDS] as const;
export type RetryKind = (typeof RETRY_KINDS)[number];

/** Failure kinds the worker raises: the message is the kind's prefix and a detail. */
export const WORKER_FAILURE_KINDS = ['invalid_request', ...RETRY_KINDS] as const;
export type WorkerFailureKind = (typeof WORKER_FAILURE_KINDS)[number];

/** Every kind a failed job's failedReason can start with: the worker's, and BullMQ's own stall limit. */
export const FAILURE_KINDS = [...WORKER_FAILURE_KINDS, 'stalled'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

export interface FailureKindDoc extends Described {
  /** What the message (and so the job's failedReason) starts with. */
  readonly prefix: string;
  /** The job is tried again (until JOB_ATTEMPTS_MAX attempts; a permanent kind spends none); false: it fails at once. */
  readonly retried: boolean;
  /** A retry on this worker cannot help: the worker goes not ready for a hold (PERMANENT_KINDS). */
  readonly permanent: boolean;
  /** Who writes the message: our worker, or BullMQ itself. */
  readonly source: 'worker' | 'bullmq';
}

export const FAILURE_KIND_DOCS: Readonly<Record<FailureKind, FailureKindDoc>> = {
  invalid_request: {
    prefix: 'invalid_request: ',
    retried: false,
    permanent: false,
    source: 'worker',
    meaning:
      "The message is outside the wire format, or the job's name is not `transfer`; the detail names what is wrong. Nothing was written. (The job of an intake request whose stored body no worker can decide completes instead, `rejected: invalid_request`.)",
    action: 'Fix the producer. Retrying the job only fails it again; remove it once understood.',
  },
  stale_fence: {
    prefix: 'stale_fence: ',
    retried: true,
    permanent: false,
    source: 'worker',
    meaning: 'The database refused the decision STALE_FENCE_ROUNDS_MAX times in one attempt (see `stale_fence` above).',
    action:
      "Nothing while attempts remain. In the failed set: Redis's fence counters keep falling behind; fix Redis, then retry the job (it is idempotent).",
  },
  lock_lost: {
    prefix: 'lock_lost: ',
    retried: true,
    permanent: false,
    source: 'worker',
    meaning: 'The lease was lost before the decision was sent; the detail is the LockLostError message.',
    action: 'Nothing while attempts remain. In the failed set: see `lock_lost` above, then retry the job.',
  },
  lock_busy: {
    prefix: 'lock_busy: ',
    retried: true,
    permanent: false,
    source: 'worker',
    meaning:
      'The wallet stayed busy for LOCK_BUSY_DEFERRALS_MAX deferrals since the last real attempt (readiness bounces and stalled re-runs do not count); that counts as one failed attempt, and the count starts again.',
    action:
      'Nothing while attempts remain. In the failed set: find what holds the wallet that long (a stuck worker, a hot wallet), then retry the job.',
  },
  transient_error: {
    prefix: 'transient_error: ',
    retried: true,
    permanent: false,
    source: 'worker',
    meaning:
      'Any other error of an attempt: PostgreSQL or Redis unreachable or timing out, a serialization failure or a deadlock; the detail is its message.',
    action: 'Nothing while attempts remain: it clears once the server is back. In the failed set: read the detail.',
  },
  permission_denied: {
    prefix: 'permission_denied: ',
    retried: true,
    permanent: true,
    source: 'worker',
    meaning:
      "PostgreSQL refused the worker's role (SQLSTATE 42501), most often EXECUTE on the decision function lost after a migration or a restore. The worker stops taking jobs: /readyz answers 503 until the role may execute the function again.",
    action:
      'Run `npm run db:worker-role -- --role <role>` as the database owner (the detail names the role). The worker is ready again within a second or two; its jobs wait and then complete.',
  },
  ledger_contract: {
    prefix: 'ledger_contract: ',
    retried: true,
    permanent: true,
    source: 'worker',
    meaning:
      "The database's decision functions do not match this worker's code: a LedgerContractError (below), or a function or table this build calls is missing (SQLSTATE 42883, 42P01). The worker stops taking jobs for a hold.",
    action:
      'Run `npm run db:migrate`, and run workers of the version the database was migrated for. The jobs wait and are retried by a ready worker.',
  },
  lock_protocol: {
    prefix: 'lock_protocol: ',
    retried: true,
    permanent: true,
    source: 'worker',
    meaning:
      'A lock script answered outside its contract (a LockProtocolError, below). The worker stops taking jobs for a hold.',
    action:
      'Check that every worker runs one version and that nothing else writes keys under LOCK_KEY_PREFIX. The jobs wait and are retried by a ready worker.',
  },
  internal_error: {
    prefix: 'internal_error: ',
    retried: true,
    permanent: true,
    source: 'worker',
    meaning:
      "A bound the worker's own code checks was broken (a RangeError): a bug. The worker stops taking jobs for a hold.",
    action:
      'Report it with the detail and the log line `transfer_permanent_error`; roll back to the last good version. The jobs wait and are retried by a ready worker.',
  },
  stalled: {
    prefix: 'job stalled more than allowable limit',
    retried: false,
    permanent: false,
    source: 'bullmq',
    meaning:
      "BullMQ's own failure: the job's worker died or stopped renewing the job lock more than JOB_STALLED_COUNT_MAX times. Given up like any job that fails for good (an intake request parked, a `given_up` event).",
    action:
      'Look for workers that crash or block their event loop longer than JOB_LOCK_DURATION_MS; then retry the job (it is idempotent).',
  },
};

/** The errors whose message is a failure's detail, by class name. */
export const FAILURE_CAUSES = [
  'LockLostError',
  'LockProtocolError',
  'LedgerContractError',
  'DecisionTimeoutError',
] as const;
export type FailureCause = (typeof FAILURE_CAUSES)[number];

export interface FailureCauseDoc extends Described {
  /** The texts its message starts with (one per named check for a LedgerContractError). */
  readonly prefixes: readonly [string, ...string[]];
}

export const FAILURE_CAUSE_DOCS: Readonly<Record<FailureCause, FailureCauseDoc>> = {
  LockLostError: {
    prefixes: [LOCK_LOST_PREFIX],
    meaning:
      'The lease stopped being ours: `not_owner` (a renewal found another owner or no lock), `lease_expired` (nothing confirmed before it ran out by our clock), `stopped` (the work was over), `no_progress` (its jobs got no answer from the database for as long as one call may take, so it was given up and released for other processes).',
    action: 'As for `lock_lost`.',
  },
  LockProtocolError: {
    prefixes: [LOCK_PROTOCOL_PREFIX],
    meaning:
      "A lock script replied something its header does not allow: a bug, another script loaded under the name, or a foreign writer on the lock's keys.",
    action: 'As for `lock_protocol`: the failure kind it is reported under.',
  },
  LedgerContractError: {
    prefixes: Object.values(LEDGER_CONTRACT_VIOLATIONS) as [string, ...string[]],
    meaning:
      "A database function answered outside its contract (an unknown outcome or reason, a wrong row count or order): the code and the migrations disagree. Or TRANSFERS_UNSAFE asked for a negative control's decision, which only the chaos harness's own databases have.",
    action:
      'As for `ledger_contract`: the failure kind it is reported under. A decision is one statement, so nothing is half-written.',
  },
  DecisionTimeoutError: {
    prefixes: [DECISION_TIMEOUT_PREFIX],
    meaning:
      "A batch's decision did not come back within the deadline (a connection, then DB_STATEMENT_TIMEOUT_MS and a margin): its transfers were withdrawn, and the retry learns from the record whether a late commit happened (`duplicate`).",
    action:
      'Nothing while attempts remain. Many: the path to PostgreSQL is silent (see the runbook, database path down).',
  },
};

/** The message of a failed attempt: the kind's prefix, then the detail. */
export function failureMessage(kind: WorkerFailureKind, detail: string): string {
  return `${FAILURE_KIND_DOCS[kind].prefix}${detail}`;
}

/** A failure message read back: its kind (null: no known prefix), the rest, and the error behind the rest. */
export interface ClassifiedFailure {
  readonly kind: FailureKind | null;
  readonly detail: string;
  readonly cause: FailureCause | null;
}

/** Reads a failure message (a job's failedReason) back into the names above. */
export function classifyFailure(message: string): ClassifiedFailure {
  const kind = FAILURE_KINDS.find((k) => message.startsWith(FAILURE_KIND_DOCS[k].prefix)) ?? null;
  const detail = kind === null ? message : message.slice(FAILURE_KIND_DOCS[kind].prefix.length);
  const cause = FAILURE_CAUSES.find((c) => FAILURE_CAUSE_DOCS[c].prefixes.some((p) => detail.startsWith(p))) ?? null;
  return { kind, detail, cause };
}

function isOneOf<T extends string>(list: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (list as readonly string[]).includes(value);
}

export function isRejectionReason(value: unknown): value is RejectionReason {
  return isOneOf(REJECTION_REASONS, value);
}

export function isStoredStatus(value: unknown): value is StoredStatus {
  return isOneOf(STORED_STATUSES, value);
}

export function isDecisionOutcome(value: unknown): value is DecisionOutcome {
  return isOneOf(DECISION_OUTCOMES, value);
}
