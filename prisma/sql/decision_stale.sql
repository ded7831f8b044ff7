-- The fence check, for the wallet an operation debits (for a capture or a void, the hold's source,
-- whose money it is); credits are never fenced. A token below the wallet's fence is stale. An
-- equal token passes only for the lease that set it (the riders of one lease share its token):
-- after Redis lost increments another lease can carry the same number, and it is as stale as a
-- lower one. A wallet with no row (its fence NULL) is never stale: the decision refuses it as
-- unknown_wallet. One rule for the single and the batch decision; inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_stale"(p_wallet_fence BIGINT, p_wallet_lease UUID, p_fence BIGINT, p_lease UUID)
RETURNS BOOLEAN
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT coalesce(p_wallet_fence > p_fence OR (p_wallet_fence = p_fence AND p_wallet_lease IS DISTINCT FROM p_lease), FALSE)
$$;

REVOKE EXECUTE ON FUNCTION decision_stale(bigint,uuid,bigint,uuid) FROM PUBLIC;
