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
CREATE FUNCTION "relay_claim_first_sends"(p_limit INTEGER)
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

-- Claims up to p_limit open requests sent longer than p_due_after_ms ago (re-sends that are due:
-- their job may have been lost) and marks them sent again, oldest send first.
CREATE FUNCTION "relay_claim_resends"(p_limit INTEGER, p_due_after_ms DOUBLE PRECISION)
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
        RAISE EXCEPTION 'relay_claim_resends: the limit must be from 1 to 10000' USING ERRCODE = '22023';
    END IF;
    IF p_due_after_ms IS NULL OR p_due_after_ms < 0 THEN
        RAISE EXCEPTION 'relay_claim_resends: the wait before a re-send must be 0 ms or more' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL
               AND r.sent_at < now() - make_interval(secs => p_due_after_ms / 1000)
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

-- Counts a lost add (a re-send that found no job in the queue) on each request named; only a
-- request sent more than once can have lost one. Answers how many it counted.
CREATE FUNCTION "relay_count_lost"(p_operation_ids TEXT[]) RETURNS INTEGER
LANGUAGE sql
VOLATILE
AS $$
    WITH counted AS (
        UPDATE transfer_requests q SET lost_count = q.lost_count + 1
         WHERE q.operation_id = ANY (p_operation_ids) AND q.send_count > 1
        RETURNING 1
    )
    SELECT count(*)::INTEGER FROM counted;
$$;

-- The intake's backlog for the relay's gauges: open (undecided) requests, of them those never
-- sent and those given up, and the age of the oldest never sent (the relay's lag, seconds).
CREATE FUNCTION "relay_intake_backlog"()
RETURNS TABLE ("open" BIGINT, unsent BIGINT, given_up BIGINT, lag_seconds DOUBLE PRECISION)
LANGUAGE sql
VOLATILE
AS $$
    SELECT count(*),
           count(*) FILTER (WHERE r.sent_at IS NULL),
           count(*) FILTER (WHERE r.given_up_at IS NOT NULL),
           extract(epoch FROM clock_timestamp() - min(r.requested_at) FILTER (WHERE r.sent_at IS NULL))::DOUBLE PRECISION
      FROM transfer_requests r WHERE r.decided_at IS NULL;
$$;

-- The outcome publisher's cursor (src/intake/outcome-publisher.ts). _open makes it at 0 when
-- missing, in a statement of its own; _take, inside the publisher's transaction, answers its
-- position and keeps its row locked until the transaction ends, or NULL when another publisher
-- holds it; _move sets it after the events were added, forward only and never past the last
-- position of the feed; _position reads it (the gauge; 0 before the first round).
CREATE FUNCTION "outcome_cursor_open"(p_name TEXT) RETURNS BOOLEAN
LANGUAGE sql
VOLATILE
AS $$
    WITH made AS (
        INSERT INTO outcome_cursors (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING RETURNING 1
    )
    SELECT count(*) = 1 FROM made;
$$;

CREATE FUNCTION "outcome_cursor_take"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
VOLATILE
AS $$
    SELECT c.position FROM outcome_cursors c WHERE c.name = p_name FOR UPDATE SKIP LOCKED;
$$;

CREATE FUNCTION "outcome_cursor_move"(p_name TEXT, p_position BIGINT) RETURNS BOOLEAN
LANGUAGE sql
VOLATILE
AS $$
    WITH moved AS (
        UPDATE outcome_cursors c SET position = p_position, updated_at = now()
         WHERE c.name = p_name AND c.position <= p_position
           AND p_position <= (SELECT coalesce(max(e.position), 0) FROM outcome_events e)
        RETURNING 1
    )
    SELECT count(*) = 1 FROM moved;
$$;

CREATE FUNCTION "outcome_cursor_position"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce((SELECT c.position FROM outcome_cursors c WHERE c.name = p_name), 0);
$$;

REVOKE EXECUTE ON FUNCTION "relay_claim_first_sends"(INTEGER) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_claim_resends"(INTEGER, DOUBLE PRECISION) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_count_lost"(TEXT[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_intake_backlog"() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "outcome_cursor_open"(TEXT) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "outcome_cursor_take"(TEXT) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "outcome_cursor_move"(TEXT, BIGINT) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "outcome_cursor_position"(TEXT) FROM PUBLIC;

-- Each runs as its owner, with the search_path fixed to the schema it lives in (pg_temp last),
-- so a caller cannot shadow a table with one of its own.
DO $$
DECLARE
    v_fn TEXT;
BEGIN
    FOREACH v_fn IN ARRAY ARRAY[
        'relay_claim_first_sends(integer)',
        'relay_claim_resends(integer, double precision)',
        'relay_count_lost(text[])',
        'relay_intake_backlog()',
        'outcome_cursor_open(text)',
        'outcome_cursor_take(text)',
        'outcome_cursor_move(text, bigint)',
        'outcome_cursor_position(text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %I.%s SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                       current_schema(), v_fn, current_schema());
    END LOOP;
END
$$;
