-- The relay's claim of requests never sent: up to p_limit (1-1,000) open ones, marked sent and
-- stamped with the claim's UUID, which a give-up by the relay must show (relay_record_given_up()).
CREATE OR REPLACE FUNCTION "relay_claim_first_sends"(p_limit INTEGER)
RETURNS TABLE (
    operation_id  TEXT,
    request_hash  TEXT,
    from_wallet   TEXT,
    to_wallet     TEXT,
    amount        BIGINT,
    currency      TEXT,
    send_count    INTEGER,
    kind          TEXT,
    body          JSONB,
    trace_context JSONB,
    claim         UUID
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_claim UUID := gen_random_uuid();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'relay_claim_first_sends: the limit must be from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL AND r.sent_at IS NULL
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q
           SET sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = v_claim
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context, q.relay_claim;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_claim_first_sends(integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_claim_first_sends(integer) FROM PUBLIC;
