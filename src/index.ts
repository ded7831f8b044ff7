// The public entry of the package, `fenced-transfers`: everything of the intake's entry
// (src/intake-entry.ts: requesting operations in the producer's transaction, the outcome feed,
// a wallet's balance at an instant and its statement, the query API, the wire types, the errors), plus enqueueing straight to BullMQ. Importing it loads BullMQ and
// ioredis; a producer that only uses the intake imports `fenced-transfers/intake` instead.
// Everything not exported here is private and may move.

export {
  DecisionTimeoutError,
  IntakeRoleError,
  LedgerContractError,
  LockLostError,
  type LockLostReason,
  LockProtocolError,
  MigrationError,
  RetryableTransferError,
  SessionBoundsError,
  StartupError,
  UsageError,
  WorkerRoleError,
} from './errors.ts';
export * from './intake-entry.ts';
export {
  createTransferQueue,
  ENQUEUE_BATCH_MAX,
  type EnqueuedTransfer,
  enqueueOperation,
  enqueueOperations,
  enqueueTransfer,
  enqueueTransfers,
  TransferQueues,
} from './queue/producer.ts';
export { bullmqConnection, type RedisClient } from './queue/redis-connection.ts';
