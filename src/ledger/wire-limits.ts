// The wire format's limits, declared once. The worker's validation (transfer-request.ts) reads
// them; the intake's SQL (prisma/sql/request_operation_problem.sql) enforces the same numbers,
// and test/intake/one-rule.test.ts runs one table of bodies through both, body by body, built
// from these values: a limit changed on one side only fails it.
import { SETTINGS } from '../config/settings.ts';

export const WIRE_LIMITS = {
  /** `operationId` and wallet ids: 1 to this many characters of [A-Za-z0-9._:-]. */
  idLengthMax: 128,
  /** Longest decimal string of an amount worth parsing; longer is refused before BigInt() sees it. */
  amountDigitsMax: 19,
  /**
   * The largest amount any worker may accept: the largest TRANSFER_AMOUNT_MAX (below 10^18). The
   * intake's SQL refuses above it (and a split's legs totalling more), since no worker could
   * decide such a body; a worker's own TRANSFER_AMOUNT_MAX may be lower.
   */
  amountCeilingMinor: 10n ** 18n - 1n,
  /**
   * The largest credit limit any worker may set: the largest CREDIT_LIMIT_MAX, and the wallets'
   * CHECK (wallets_credit_limit_range). The intake's SQL refuses above it.
   */
  creditLimitCeilingMinor: 10n ** 17n,
  /** The shortest hold a producer may ask for with `expiresInMs`. */
  holdExpiresInMsMin: 1_000,
  /**
   * The longest hold any worker may accept: the largest HOLD_EXPIRY_MAX_MS. request_operation()
   * given no maximum (NULL) uses this one.
   */
  holdExpiryCeilingMs: SETTINGS.HOLD_EXPIRY_MAX_MS.max,
  /** A split credits at least two wallets (one is a transfer) and at most this many. */
  splitLegsMin: 2,
  splitLegsMax: 16,
  /**
   * An operation's `metadata`: an object of at most this many keys, each 1 to metadataKeyLengthMax
   * characters of [A-Za-z0-9._:-], each value a string of at most metadataValueLengthMax
   * characters without control characters (U+0000-U+001F, U+007F), keys and values at most
   * metadataBytesMax bytes of UTF-8 in all.
   */
  metadataKeysMax: 16,
  metadataKeyLengthMax: 64,
  metadataValueLengthMax: 256,
  metadataBytesMax: 2_048,
} as const;
