-- A transfer's request: its arguments are the wire object's fields (a NULL one is an absent one,
-- refused where required), checked by the one rule (request_operation_problem()).
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
    v_problem  TEXT;
    v_hash     TEXT;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    v_problem := request_operation_problem(
        jsonb_build_object('operationId', p_operation_id, 'from', p_from, 'to', p_to, 'amount', p_amount::TEXT)
            || CASE WHEN p_currency IS NULL THEN '{}'::JSONB ELSE jsonb_build_object('currency', p_currency) END,
        NULL);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'request_transfer: %', v_problem USING ERRCODE = '22023';
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
