// The closed set of answers a transfer can get, as types. Terminal outcomes are stored with the
// operation; a duplicate or a conflict answers with what was stored. The names, and what each
// means, are declared in vocabulary.ts.
import type { RejectionReason } from './vocabulary.ts';

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
