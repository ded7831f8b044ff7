-- The outcome feed after a position: at most p_limit (1-10,000) events in order; FT001 when that
-- position was pruned.
CREATE OR REPLACE FUNCTION "outcome_events_after"(p_after BIGINT, p_limit INTEGER DEFAULT 1000)
RETURNS TABLE (
    "position"     BIGINT,
    operation_id   TEXT,
    kind           TEXT,
    reason         TEXT,
    from_wallet    TEXT,
    to_wallet      TEXT,
    amount         BIGINT,
    currency       TEXT,
    decided_at     TIMESTAMPTZ,
    operation      TEXT,
    original_id    TEXT,
    detail         JSONB,
    metadata       JSONB
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_first BIGINT;
BEGIN
    IF p_after IS NULL OR p_after < 0 OR p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'outcome_events_after: position must be 0 or more and the limit from 1 to 10000'
            USING ERRCODE = '22023';
    END IF;
    SELECT min(e.position) INTO v_first FROM outcome_events e;
    IF v_first IS NOT NULL AND p_after < v_first - 1 THEN
        RAISE EXCEPTION 'outcome_events_after: positions before % were pruned; position % is gone', v_first, p_after + 1
            USING ERRCODE = 'FT001',
                  DETAIL = format('first kept position: %s', v_first),
                  HINT = format('read after %s to start at the first event kept', v_first - 1);
    END IF;
    RETURN QUERY
        SELECT e.position, e.operation_id, e.kind, e.reason, e.from_wallet, e.to_wallet, e.amount,
               e.currency::TEXT, e.decided_at, e.operation, e.original_id, e.detail, e.metadata
          FROM outcome_events e
         WHERE e.position > p_after
         ORDER BY e.position
         LIMIT p_limit;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_events_after(bigint,integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_events_after(bigint,integer) FROM PUBLIC;
