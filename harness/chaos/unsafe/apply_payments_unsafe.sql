-- The negative controls' payments (owner only, never granted): --unsafe double-capture turns the
-- hold's state check off, --unsafe refund-unbounded the refund's bound, --unsafe no-credit-limit
-- the credit limit of every debit, --unsafe no-wallet-status the wallets' statuses. As apply_transfers_unsafe():
-- installed by the harness only, over decide_batch_unsafe() (unsafe-decisions.ts). The operations'
-- metadata is kept as apply_payments() keeps it: a control switches a check off, nothing else.
CREATE OR REPLACE FUNCTION "apply_payments_unsafe"(
    p_kinds              TEXT[],
    p_operation_ids      TEXT[],
    p_request_hashes     TEXT[],
    p_froms              TEXT[],
    p_tos                TEXT[],
    p_amounts            BIGINT[],
    p_currencies         TEXT[],
    p_refs               TEXT[],
    p_expires_in_ms      BIGINT[],
    p_expires_at         TIMESTAMPTZ[],
    p_legs               JSONB[],
    p_fences             BIGINT[],
    p_lease_ids          UUID[],
    p_hold_expiry_max_ms BIGINT,
    p_check_idempotency  BOOLEAN,
    p_check_fence        BOOLEAN,
    p_check_lease        BOOLEAN,
    p_check_hold_state   BOOLEAN,
    p_check_refund_bound BOOLEAN,
    p_check_credit_limit BOOLEAN,
    p_check_wallet_status BOOLEAN,
    p_metadata           JSONB[] DEFAULT NULL
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE sql
VOLATILE
AS $$
    SELECT * FROM decide_batch_unsafe(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms, p_metadata,
        p_check_idempotency, p_check_fence, p_check_lease, p_check_hold_state, p_check_refund_bound,
        p_check_credit_limit, p_check_wallet_status)
     WHERE decision_wallet_ids_checked(p_froms || p_tos, p_legs);
$$;

REVOKE EXECUTE ON FUNCTION apply_payments_unsafe(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,boolean,boolean,boolean,boolean,boolean,boolean,boolean,jsonb[]) FROM PUBLIC;
