// Typed errors of the fenced lock: a lost lease, and a Redis reply that breaks the scripts' contract.
// Their messages start with the prefixes the vocabulary declares, so a job's failedReason can be
// read back (the vocabulary is a leaf of names: the lock learns nothing of the ledger from it).
import { lockErrorMessage } from '../ledger/vocabulary.ts';

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
export class LockLostError extends Error {
  readonly walletId: string;
  readonly token: bigint;
  readonly reason: LockLostReason;

  constructor(walletId: string, token: bigint, reason: LockLostReason) {
    super(lockErrorMessage('LockLostError', `${walletId} (token ${token}) is lost: ${reason}`));
    this.name = 'LockLostError';
    this.walletId = walletId;
    this.token = token;
    this.reason = reason;
  }
}

/** A script replied something its header does not allow: a bug or a foreign writer, never retried silently. */
export class LockProtocolError extends Error {
  constructor(script: string, detail: string) {
    super(lockErrorMessage('LockProtocolError', `${script}: ${detail}`));
    this.name = 'LockProtocolError';
  }
}
