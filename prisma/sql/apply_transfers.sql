-- The worker's decision of transfers: decide_batch(), every element a transfer, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path pinned;
-- `npm run db:worker-role` grants it. PL/pgSQL, not SQL: its plan is cached, where an SQL
-- function's body is parsed and planned at every call (`npm run bench:decision-cost`). Its
-- transfers carry no metadata: the worker sends one that does to apply_payments().
CREATE OR REPLACE FUNCTION "apply_transfers"(
    p_operation_ids  TEXT[],
    p_request_hashes TEXT[],
    p_froms          TEXT[],
    p_tos            TEXT[],
    p_amounts        BIGINT[],
    p_currencies     TEXT[],
    p_fences         BIGINT[],
    p_lease_ids      UUID[]
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
AS $$
DECLARE
    v_none TEXT[] := array_fill(NULL::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]);
    -- Raises 22023 for a ledger-account id, before any lock.
    v_ok   BOOLEAN := decision_wallet_ids_checked(p_froms || p_tos);
BEGIN
    RETURN QUERY
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM decide_batch(array_fill('transfer'::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]), p_operation_ids,
                        p_request_hashes, p_froms, p_tos, p_amounts, p_currencies, v_none, v_none::BIGINT[],
                        v_none::TIMESTAMPTZ[], v_none::JSONB[], p_fences, p_lease_ids, 1, NULL) b;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) FROM PUBLIC;
