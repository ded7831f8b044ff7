// Lease ids for tests that call the decision without a lock. By default one per token, so
// transfers that carry the same token decide as the riders of one lease do; a test that needs
// two leases with the same token (Redis lost increments) names another holder.
export function leaseIdFor(fence: bigint, holder = 0): string {
  if (fence < 0n || fence >= 2n ** 48n || !Number.isSafeInteger(holder) || holder < 0 || holder >= 2 ** 32) {
    throw new RangeError(`no test lease id for fence ${fence}, holder ${holder}`);
  }
  return `${holder.toString(16).padStart(8, '0')}-0000-4000-8000-${fence.toString(16).padStart(12, '0')}`;
}
