-- A job that ran out of attempts: its open request is parked (given_up_at) with a given_up event
-- that carries a payment request's body, only while no decision exists and only for the send it
-- belongs to (p_send_count, required: a redrive or a re-send since moves the count on, and the
-- call then parks nothing). Answers whether it parked the request.
CREATE OR REPLACE FUNCTION "record_transfer_given_up"(
    p_operation_id TEXT,
    p_request_hash TEXT,
    p_reason       TEXT,
    p_send_count   INTEGER
) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_reason TEXT := left(coalesce(p_reason, 'no reason given'), 500);
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_request_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_transfer_given_up: an operation and the 64-hex-digit hash of its body must be given'
            USING ERRCODE = '22023';
    END IF;
    IF p_send_count IS NULL OR p_send_count < 0 THEN
        RAISE EXCEPTION 'record_transfer_given_up: the send the give-up belongs to (send_count, 0 or more) must be given'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    WITH parked AS (
        UPDATE transfer_requests q
           SET given_up_at = clock_timestamp(), give_up_count = q.give_up_count + 1, give_up_reason = v_reason
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL AND q.given_up_at IS NULL
           AND q.request_hash = p_request_hash AND q.send_count = p_send_count
        RETURNING q.operation_id, q.kind, q.body, q.from_wallet, q.to_wallet, q.amount, q.currency
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, from_wallet, to_wallet, amount, currency, detail)
    SELECT p.operation_id, 'given_up', v_reason, p.kind, p.from_wallet, p.to_wallet, p.amount, p.currency, p.body
      FROM parked p;
    RETURN FOUND;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.record_transfer_given_up(text,text,text,integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION record_transfer_given_up(text,text,text,integer) FROM PUBLIC;
