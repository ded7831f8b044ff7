-- The sequencer: moves up to p_limit pending events into the feed, numbered with no gap in the
-- order they become visible; one sequencer at a time (0 when another holds its lock), in READ
-- COMMITTED only. Answers how many it moved.
CREATE OR REPLACE FUNCTION "outcome_feed_sequence"(p_limit INTEGER DEFAULT 10000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_moved INTEGER;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outcome_feed_sequence: runs only in READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = '25000',
                  HINT = 'call it in a statement of its own, or set default_transaction_isolation to read committed for the role';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('outcome_feed:sequencer', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM outcome_pending p
         WHERE p.ctid = ANY (ARRAY(SELECT ctid FROM outcome_pending LIMIT greatest(1, least(p_limit, 100000))))
        RETURNING p.*
    ), base AS (
        SELECT coalesce(max(e.position), 0) AS last FROM outcome_events e
    )
    INSERT INTO outcome_events (position, operation_id, kind, reason, from_wallet, to_wallet, amount, currency, decided_at,
                                operation, original_id, detail, metadata)
    SELECT b.last + row_number() OVER (ORDER BY m.id), m.operation_id, m.kind, m.reason, m.from_wallet, m.to_wallet,
           m.amount, m.currency, m.decided_at, m.operation, m.original_id, m.detail, m.metadata
      FROM moved m CROSS JOIN base b;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_feed_sequence(integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_feed_sequence(integer) FROM PUBLIC;
