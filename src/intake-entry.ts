// The public entry of the intake half, `fenced-transfers/intake`: what a producer imports to
// request operations inside its own PostgreSQL transaction, to read and follow the outcome feed,
// to look back at a wallet (its balance at an instant, its statement) and to find operations (the
// query API), with the wire types and the errors. Nothing it imports, however indirectly, loads BullMQ
// or ioredis (a checked import rule, intake-entry-reaches-queue, and test/library/intake-entry.test.ts):
// a producer that only talks to PostgreSQL carries no Redis client. The full entry is src/index.ts.
// Everything not exported here or there is private and may move.

export { type Config, loadConfig } from './config/config.ts';
export {
  ConfigError,
  ERROR_CODES,
  type ErrorCode,
  FencedTransfersError,
  IntakeConflictError,
  InvalidTransferError,
  isFencedTransfersError,
  OutcomeFeedPrunedError,
  UnknownWalletError,
} from './errors.ts';
export {
  INTAKE_BATCH_MAX,
  type IntakeAnswer,
  type IntakeClient,
  type PrismaTransactionClient,
  requestOperation,
  requestOperations,
  requestTransfer,
  requestTransfers,
} from './intake/intake.ts';
export {
  type FoundLeg,
  type FoundOperation,
  findOperations,
  OPERATION_SIDES,
  OPERATIONS_LIMIT_DEFAULT,
  OPERATIONS_LIMIT_MAX,
  type OperationPage,
  type OperationQuery,
  type OperationSide,
} from './intake/operation-query.ts';
export {
  type FeedClient,
  type FollowOptions,
  followOutcomes,
  OUTCOME_KINDS,
  OUTCOME_READ_LIMIT_MAX,
  type OutcomeEvent,
  type OutcomeKind,
  readOutcomes,
} from './intake/outcome-feed.ts';
export {
  balanceAt,
  type HistoryClient,
  LEDGER_ENTRY_KINDS,
  type LedgerEntryKind,
  STATEMENT_LIMIT_DEFAULT,
  STATEMENT_LIMIT_MAX,
  type StatementEntry,
  type StatementOptions,
  type StatementPage,
  statement,
  type WalletBalance,
} from './intake/wallet-history.ts';
export type { StoredOutcome, TransferOutcome } from './ledger/outcome.ts';
export {
  type CaptureWire,
  type CreditLimitWire,
  type DepositWire,
  FREEZE_CREDITS,
  type FreezeCredits,
  type FreezeWalletWire,
  type HoldWire,
  type Metadata,
  OPERATION_KINDS,
  type OpenWalletWire,
  type OperationKind,
  type OperationValidationResult,
  type OperationWire,
  type PaymentWire,
  type RefundWire,
  type SplitLegWire,
  type SplitWire,
  type TransferOperationWire,
  type TransferWire,
  type ValidationResult,
  type VoidWire,
  validateOperationRequest,
  validateTransferRequest,
  type WalletStatusWire,
  type WithdrawalWire,
  walletOf,
} from './ledger/transfer-request.ts';
export { REJECTION_REASONS, type RejectionReason } from './ledger/vocabulary.ts';
