-- The relay's own role. A relay (`npm run relay`) used to log in as the owner, which may rewrite
-- any table. What it does is now a short list of functions, each SECURITY DEFINER with its
-- search_path pinned and EXECUTE revoked from PUBLIC, and `npm run db:relay-role` grants the
-- relay's role EXECUTE on them (and on record_transfer_given_up(), outcome_feed_sequence() and
-- outcome_events_after(), which exist already), and no right on any table but reading
-- _prisma_migrations (its readiness check). A stolen relay credential can send requests to the
-- queue, count lost adds, record give-ups bound to the send it claimed and move the outcomes
-- cursor forward over the feed: it cannot decide, write a wallet or the ledger, forge a request
-- or rewrite a feed event. The redrive (`npm run redrive`) is an operator's command and stays
-- with the owner.

-- Claims up to p_limit requests never sent (first sends), oldest request first as the index
-- gives them, and marks them sent: the relay's first claim, unchanged but for trace_context
-- (the producer's trace, the request-trace-context migration), which it now returns too.
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
    trace_context JSONB
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'relay_claim_first_sends: the limit must be from 1 to 10000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL AND r.sent_at IS NULL
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q SET sent_at = clock_timestamp(), send_count = q.send_count + 1
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_claim_first_sends(integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_claim_first_sends(integer) FROM PUBLIC;
