-- The chaos harness's negative controls only: the decision with the idempotency record, the
-- fence, the lease check, the credit limit and/or the wallets' statuses switched off (decide_batch_unsafe(), derived from the production
-- decision by unsafe-decisions.ts). Installed by the harness into its own scratch
-- databases and tests' databases, never by a migration; runs with the caller's rights and is
-- executable by the owner alone.
CREATE OR REPLACE FUNCTION "apply_transfers_unsafe"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_lease_ids         UUID[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN,
    p_check_lease       BOOLEAN,
    p_check_credit_limit BOOLEAN,
    p_check_wallet_status BOOLEAN
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE sql
VOLATILE
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM decide_batch_unsafe(array_fill('transfer'::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]),
                               p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts, p_currencies,
                               array_fill(NULL::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]),
                               array_fill(NULL::BIGINT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]),
                               array_fill(NULL::TIMESTAMPTZ, ARRAY[coalesce(cardinality(p_operation_ids), 0)]),
                               array_fill(NULL::JSONB, ARRAY[coalesce(cardinality(p_operation_ids), 0)]),
                               p_fences, p_lease_ids, 1, NULL, p_check_idempotency, p_check_fence, p_check_lease,
                               TRUE, TRUE, p_check_credit_limit, p_check_wallet_status) b
     WHERE decision_wallet_ids_checked(p_froms || p_tos);
$$;

REVOKE EXECUTE ON FUNCTION apply_transfers_unsafe(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[],boolean,boolean,boolean,boolean,boolean) FROM PUBLIC;
