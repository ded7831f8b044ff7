-- A producer's request, as in the intake-and-outcome-feed migration, now under the operation's
-- advisory lock (the one the decision takes), held until the producer's transaction ends. A
-- decision of the operation through the other door then either committed before the check below
-- (the request is recorded decided, or the call raises conflict at once) or waits for the
-- producer's commit and finds the request (the decision closes it). A producer in REPEATABLE READ
-- or SERIALIZABLE may not see a decision that committed while it waited: its request is then
-- closed by the first decision of its job, which finds the record (the duplicate path above).
CREATE OR REPLACE FUNCTION "request_transfer"(
    p_operation_id TEXT,
    p_from         TEXT,
    p_to           TEXT,
    p_amount       BIGINT,
    p_currency     TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    c_id_pattern       CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_currency_pattern CONSTANT TEXT := '^[A-Z]{3}$';
    v_hash     TEXT;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    IF p_operation_id IS NULL OR p_operation_id !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: operationId must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from IS NULL OR p_from !~ c_id_pattern OR p_to IS NULL OR p_to !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: from and to must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from = p_to THEN
        RAISE EXCEPTION 'request_transfer: from and to are the same wallet' USING ERRCODE = '22023';
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'request_transfer: amount must be positive' USING ERRCODE = '22023';
    END IF;
    IF p_currency IS NOT NULL AND p_currency !~ c_currency_pattern THEN
        RAISE EXCEPTION 'request_transfer: currency must be three capital letters, like EUR' USING ERRCODE = '22023';
    END IF;
    v_hash := encode(sha256(convert_to(
        concat_ws(E'\n', 'v1', p_from, p_to, p_amount::TEXT, coalesce(p_currency, '')), 'UTF8')), 'hex');

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));

    -- Decided already (through the queue straight, say): the request is recorded as decided.
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = p_operation_id;

    INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount, currency, decided_at)
    VALUES (p_operation_id, v_hash, p_from, p_to, p_amount, p_currency, v_decided)
    ON CONFLICT (operation_id) DO NOTHING;
    IF FOUND THEN
        IF v_existing IS NOT NULL AND v_existing <> v_hash THEN
            RAISE EXCEPTION 'conflict: operation % was decided with another body', p_operation_id
                USING ERRCODE = '23505';
        END IF;
        RETURN CASE WHEN v_existing IS NULL THEN 'requested' ELSE 'duplicate' END;
    END IF;
    SELECT q.request_hash::TEXT INTO v_existing FROM transfer_requests q WHERE q.operation_id = p_operation_id;
    IF v_existing <> v_hash THEN
        RAISE EXCEPTION 'conflict: operation % was requested with another body', p_operation_id
            USING ERRCODE = '23505';
    END IF;
    RETURN 'duplicate';
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text,text,text,bigint,text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_transfer(text,text,text,bigint,text) FROM PUBLIC;

-- The intake takes the producer's trace context with a request: request_transfer() and
-- request_operation() gain a form with one more argument, the W3C trace context of the
-- producer's span as a JSON object ({"traceparent": "…"} and, when there is one, "tracestate"),
-- kept in transfer_requests.trace_context (the request-trace-context migration) with a request
-- that is new, so the relay that sends it hands it to the queue and the transfer's trace starts
-- where the producer asked for it. A duplicate keeps the context its first request stored. The
-- forms without it stay as they were: a producer that traces nothing calls them, as before.
-- Both new forms run as their owner (SECURITY DEFINER, like the old ones) and are granted to
-- every role that may execute request_transfer() now (the producer roles).
CREATE OR REPLACE FUNCTION "request_transfer"(
    p_operation_id  TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_trace_context JSONB
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_answer TEXT;
BEGIN
    PERFORM request_trace_context_check(p_trace_context);
    v_answer := request_transfer(p_operation_id, p_from, p_to, p_amount, p_currency);
    IF v_answer = 'requested' AND p_trace_context IS NOT NULL THEN
        UPDATE transfer_requests q SET trace_context = p_trace_context
         WHERE q.operation_id = p_operation_id AND q.trace_context IS NULL;
    END IF;
    RETURN v_answer;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text,text,text,bigint,text,jsonb) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_transfer(text,text,text,bigint,text,jsonb) FROM PUBLIC;
