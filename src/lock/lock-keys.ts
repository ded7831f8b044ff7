// Names the two Redis keys of a wallet's lock; both share the hash tag {wallet:<id>} so that
// the scripts, which touch both, run on Redis Cluster.

export const WALLET_ID_LENGTH_MAX = 128;
export const KEY_PREFIX_LENGTH_MAX = 64;

/** No braces (they would move the hash tag), no whitespace or control characters. */
const WALLET_ID_PATTERN = /^[^{}\s\p{Cc}]+$/u;
/** The same characters the configuration accepts for LOCK_KEY_PREFIX; braces excluded for the same reason. */
const KEY_PREFIX_PATTERN = /^[A-Za-z0-9._:-]*$/;

export interface LockKeys {
  /** `<prefix>{wallet:<id>}:lock`: the owner id, with a PX TTL. */
  readonly lockKey: string;
  /** `<prefix>{wallet:<id>}:fence`: the fencing-token counter, never expires. */
  readonly fenceKey: string;
}

export function assertWalletId(walletId: string): void {
  if (walletId.length === 0 || walletId.length > WALLET_ID_LENGTH_MAX || !WALLET_ID_PATTERN.test(walletId)) {
    throw new RangeError(
      `walletId must be 1-${WALLET_ID_LENGTH_MAX} characters without braces, whitespace or control characters, got ${JSON.stringify(walletId)}`,
    );
  }
}

export function assertKeyPrefix(keyPrefix: string): void {
  if (keyPrefix.length > KEY_PREFIX_LENGTH_MAX || !KEY_PREFIX_PATTERN.test(keyPrefix)) {
    throw new RangeError(
      `keyPrefix must be up to ${KEY_PREFIX_LENGTH_MAX} characters of [A-Za-z0-9._:-], got ${JSON.stringify(keyPrefix)}`,
    );
  }
}

export function lockKeysOf(keyPrefix: string, walletId: string): LockKeys {
  assertKeyPrefix(keyPrefix);
  assertWalletId(walletId);
  const tagged = `${keyPrefix}{wallet:${walletId}}`;
  return { lockKey: `${tagged}:lock`, fenceKey: `${tagged}:fence` };
}
