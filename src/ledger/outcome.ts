// The closed set of answers a transfer can get. Terminal outcomes are stored with the
// operation; a duplicate or a conflict answers with what was stored.

// Exactly the reasons apply_transfer() / apply_transfers() answer. The first migration's CHECK
// constraint on transfers.reason also allows 'invalid_request', which nothing produces (an
// invalid message fails its job before the database); applied migrations stay as they are.
export const REJECTION_REASONS = ['insufficient_funds', 'unknown_wallet', 'currency_mismatch', 'same_wallet'] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** What the idempotency record holds. Fences are decimal strings (JSON-safe, exact). */
export type StoredOutcome =
  | { readonly status: 'applied'; readonly fence: string }
  | { readonly status: 'rejected'; readonly reason: RejectionReason; readonly fence: string };

/** The answer of one delivery; this object is the BullMQ job's return value. */
export type TransferOutcome =
  | { readonly outcome: 'applied'; readonly operationId: string; readonly fence: string }
  | {
      readonly outcome: 'rejected';
      readonly operationId: string;
      readonly reason: RejectionReason;
      readonly fence: string;
    }
  | { readonly outcome: 'duplicate'; readonly operationId: string; readonly stored: StoredOutcome }
  | { readonly outcome: 'conflict'; readonly operationId: string; readonly stored: StoredOutcome };

/** A decision the database refused to take: the job must retry with a newer token. */
export interface StaleFence {
  readonly outcome: 'stale_fence';
  readonly operationId: string;
  readonly walletFence: bigint;
}

export type ApplyResult = TransferOutcome | StaleFence;

export function isRejectionReason(value: unknown): value is RejectionReason {
  return typeof value === 'string' && (REJECTION_REASONS as readonly string[]).includes(value);
}
