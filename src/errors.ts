// Every error the product throws on purpose, in one module, each with a stable `code`: callers
// and the worker's classifier (src/queue/attempt-failure.ts) switch on the code, never on a
// class name or a message's text (BullMQ's classes/errors and ErrorCode are the model). This
// module imports nothing of the product, so the lock, the ledger, the intake and the commands
// all build on it without learning of each other. The messages keep the prefixes that
// src/ledger/vocabulary.ts documents, so a job's failedReason still reads back to its cause.

/** Every code an error of this package carries, one per class. */
export const ERROR_CODES = [
  'CONFIG',
  'USAGE',
  'STARTUP',
  'MIGRATION',
  'SESSION_BOUNDS',
  'WORKER_ROLE',
  'INTAKE_ROLE',
  'RELAY_ROLE',
  'INVALID_TRANSFER',
  'INTAKE_CONFLICT',
  'OUTCOME_FEED_PRUNED',
  'UNKNOWN_WALLET',
  'LOCK_LOST',
  'LOCK_PROTOCOL',
  'LOCK_EPOCH',
  'LEDGER_CONTRACT',
  'DECISION_TIMEOUT',
  'RETRYABLE_TRANSFER',
] as const;

/** The code of an error of this package: see {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The base of every error this package throws on purpose. Tell them apart by `code` (or with
 * {@link isFencedTransfersError}); `instanceof` works too while one copy of the package is loaded.
 */
export abstract class FencedTransfersError extends Error {
  /** What went wrong, stable across versions: switch on it. */
  abstract readonly code: ErrorCode;
}

/** True when `err` is an error of this package (by its code, so also across copies of the package). */
export function isFencedTransfersError(err: unknown): err is FencedTransfersError {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code);
}

/** An environment variable (or a file it names) holds a value the service refuses; `variable` names it. */
export class ConfigError extends FencedTransfersError {
  override readonly code = 'CONFIG';
  override name = 'ConfigError';
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`${variable}: ${detail}`);
  }
}

/** A command was called with flags or arguments it does not take; the message ends with its usage. */
export class UsageError extends FencedTransfersError {
  override readonly code = 'USAGE';
  override name = 'UsageError';
}

/** A worker or relay that cannot start: the variables to look at and what was found, on one line. */
export class StartupError extends FencedTransfersError {
  override readonly code = 'STARTUP';
  override name = 'StartupError';
  constructor(
    readonly variables: readonly string[],
    detail: string,
  ) {
    super(`${variables.join(', ')}: ${detail}`);
  }
}

/** The migrations folder, or a migration already applied, is not what this build expects. */
export class MigrationError extends FencedTransfersError {
  override readonly code = 'MIGRATION';
  override name = 'MigrationError';
}

/** A database session runs without the timeouts the configuration asks for. */
export class SessionBoundsError extends FencedTransfersError {
  override readonly code = 'SESSION_BOUNDS';
  override name = 'SessionBoundsError';
}

/** The worker role (`npm run db:worker-role`) could not be created or granted as asked. */
export class WorkerRoleError extends FencedTransfersError {
  override readonly code: 'WORKER_ROLE' | 'INTAKE_ROLE' | 'RELAY_ROLE' = 'WORKER_ROLE';
  override name = 'WorkerRoleError';
}

/** A producer or read role could not be created or granted; a WorkerRoleError, reported alike. */
export class IntakeRoleError extends WorkerRoleError {
  override readonly code = 'INTAKE_ROLE';
  override name = 'IntakeRoleError';
}

/** The relay role (`npm run db:relay-role`) could not be created or granted; a WorkerRoleError, reported alike. */
export class RelayRoleError extends WorkerRoleError {
  override readonly code = 'RELAY_ROLE';
  override name = 'RelayRoleError';
}

/** A transfer or operation outside the wire format; nothing was sent. The message names what is wrong. */
export class InvalidTransferError extends FencedTransfersError {
  override readonly code = 'INVALID_TRANSFER';
  override name = 'InvalidTransferError';
}

/** The same operationId was requested (or decided) before with another body. */
export class IntakeConflictError extends FencedTransfersError {
  override readonly code = 'INTAKE_CONFLICT';
  override name = 'IntakeConflictError';
}

/** The feed position asked for was pruned (`npm run outcomes -- --prune-before`): start after `firstKept - 1`. */
export class OutcomeFeedPrunedError extends FencedTransfersError {
  override readonly code = 'OUTCOME_FEED_PRUNED';
  override name = 'OutcomeFeedPrunedError';
  constructor(
    readonly after: bigint,
    readonly firstKept: bigint,
  ) {
    super(
      `outcome feed: positions before ${firstKept} were pruned, so position ${after + 1n} is gone; read after ${firstKept - 1n} to start at the first event kept`,
    );
  }
}

/** The wallet asked about has no row (`balanceAt()`, `statement()`): nothing was read. */
export class UnknownWalletError extends FencedTransfersError {
  override readonly code = 'UNKNOWN_WALLET';
  override name = 'UnknownWalletError';
  constructor(readonly wallet: string) {
    super(`no wallet ${JSON.stringify(wallet)}`);
  }
}

/** What a LockLostError's message starts with. */
export const LOCK_LOST_PREFIX = 'the lock of wallet ';
/** What a LockProtocolError's message starts with. */
export const LOCK_PROTOCOL_PREFIX = 'lock script ';
/** What a DecisionTimeoutError's message starts with. */
export const DECISION_TIMEOUT_PREFIX = 'no answer from the database within ';

/** Why a held lock stopped being ours. */
export type LockLostReason =
  /** A renewal found another owner, or no lock at all (deleted, expired, flushed). */
  | 'not_owner'
  /** Redis confirmed nothing before the lease ended by our own monotonic clock. */
  | 'lease_expired'
  /** The watchdog was stopped (the work is over and the lock released or about to be). */
  | 'stopped'
  /** Its work made no progress for too long (a database that stops answering): not renewed, released. */
  | 'no_progress';

/** Thrown (and used as the AbortSignal's reason) when work must not commit any more. */
export class LockLostError extends FencedTransfersError {
  override readonly code = 'LOCK_LOST';
  override name = 'LockLostError';
  readonly walletId: string;
  readonly token: bigint;
  readonly reason: LockLostReason;

  constructor(walletId: string, token: bigint, reason: LockLostReason) {
    super(`${LOCK_LOST_PREFIX}${walletId} (token ${token}) is lost: ${reason}`);
    this.walletId = walletId;
    this.token = token;
    this.reason = reason;
  }
}

/** A lock script replied something its header does not allow: a bug or a foreign writer, never retried silently. */
export class LockProtocolError extends FencedTransfersError {
  override readonly code = 'LOCK_PROTOCOL';
  override name = 'LockProtocolError';
  constructor(script: string, detail: string) {
    super(`${LOCK_PROTOCOL_PREFIX}${script}: ${detail}`);
  }
}

/**
 * The database's lock epoch is not this worker's lock service (it moved on, or the worker was
 * started with another LOCK_BACKEND): the worker must not issue tokens, so it does not start.
 */
export class LockEpochError extends FencedTransfersError {
  override readonly code = 'LOCK_EPOCH';
  override name = 'LockEpochError';
}

/**
 * The contract checks on what the SQL functions answer, each named, with the text its
 * LedgerContractError message starts with.
 */
export const LEDGER_CONTRACT_VIOLATIONS = {
  single_row_count: 'apply_transfer returned ',
  batch_row_count: 'apply_transfers returned ',
  batch_order: 'apply_transfers answered position ',
  batch_result_count: 'the batch decision answered ',
  unknown_outcome: 'unknown outcome ',
  unknown_rejection_reason: 'rejection without a known reason: ',
  stored_without_fence: 'stored outcome without a fence: ',
  unknown_stored_status: 'unknown stored status ',
  stale_fence_below_ours: 'stale_fence with a wallet fence below ours ',
  unsafe_decision_missing: 'negative-control decision missing: ',
} as const;
export type LedgerContractViolation = keyof typeof LEDGER_CONTRACT_VIOLATIONS;

/**
 * An answer from the database that breaks the function's contract: a bug, never retried quietly.
 * Each check is named in LEDGER_CONTRACT_VIOLATIONS, which gives the message its prefix.
 */
export class LedgerContractError extends FencedTransfersError {
  override readonly code = 'LEDGER_CONTRACT';
  override name = 'LedgerContractError';
  constructor(
    readonly violation: LedgerContractViolation,
    detail: string,
  ) {
    super(`${LEDGER_CONTRACT_VIOLATIONS[violation]}${detail}`);
  }
}

/**
 * A batch's decision did not come back in time: the transfer was withdrawn, and whether the
 * database committed it is unknown until a retry asks the record. Retryable.
 */
export class DecisionTimeoutError extends FencedTransfersError {
  override readonly code = 'DECISION_TIMEOUT';
  override name = 'DecisionTimeoutError';
  constructor(
    readonly deadlineMs: number,
    readonly batchSize: number,
  ) {
    super(
      `${DECISION_TIMEOUT_PREFIX}${deadlineMs} ms: the batch's ${batchSize} transfers are withdrawn for a retry (a late commit answers it as duplicate)`,
    );
  }
}

/**
 * A failure the job should be retried for (BullMQ attempts with back-off). `kind` is one of the
 * vocabulary's retry kinds (RETRY_KINDS); the message is the kind's prefix (`kind: `, as
 * FAILURE_KIND_DOCS declares it) and the detail, so a job's failedReason reads back to it.
 */
export class RetryableTransferError<Kind extends string = string> extends FencedTransfersError {
  override readonly code = 'RETRYABLE_TRANSFER';
  override name = 'RetryableTransferError';
  constructor(
    readonly kind: Kind,
    detail: string,
  ) {
    super(`${kind}: ${detail}`);
  }
}
