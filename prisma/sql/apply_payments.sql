-- The worker's decision of payments: decide_batch() with every check, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path
-- pinned; `npm run db:worker-role` grants it. PL/pgSQL, as apply_transfers(): a cached plan.
-- p_metadata: each operation's metadata (NULL: none has any).
CREATE OR REPLACE FUNCTION "apply_payments"(
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
    p_metadata           JSONB[] DEFAULT NULL
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    -- Raises 22023 for a ledger-account id, before any lock.
    v_ok BOOLEAN := decision_wallet_ids_checked(p_froms || p_tos, p_legs);
BEGIN
    RETURN QUERY
    SELECT * FROM decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts, p_currencies, p_refs,
        p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms, p_metadata);
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) FROM PUBLIC;
