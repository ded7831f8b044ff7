-- The intake takes the producer's trace context with a request: request_transfer() and
-- request_operation() gain a form with one more argument, the W3C trace context of the
-- producer's span as a JSON object ({"traceparent": "…"} and, when there is one, "tracestate"),
-- kept in transfer_requests.trace_context (the request-trace-context migration) with a request
-- that is new, so the relay that sends it hands it to the queue and the transfer's trace starts
-- where the producer asked for it. A duplicate keeps the context its first request stored. The
-- forms without it stay as they were: a producer that traces nothing calls them, as before.
-- Both new forms run as their owner (SECURITY DEFINER, like the old ones) and are granted to
-- every role that may execute request_transfer() now (the producer roles).
CREATE FUNCTION "request_transfer"(
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
REVOKE EXECUTE ON FUNCTION "request_transfer"(TEXT, TEXT, TEXT, BIGINT, TEXT, JSONB) FROM PUBLIC;

CREATE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT, p_trace_context JSONB) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_answer TEXT;
BEGIN
    PERFORM request_trace_context_check(p_trace_context);
    v_answer := request_operation(p_body, p_hold_expiry_max_ms);
    IF v_answer = 'requested' AND p_trace_context IS NOT NULL THEN
        UPDATE transfer_requests q SET trace_context = p_trace_context
         WHERE q.operation_id = p_body ->> 'operationId' AND q.trace_context IS NULL;
    END IF;
    RETURN v_answer;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_operation"(JSONB, BIGINT, JSONB) FROM PUBLIC;

-- A trace context is NULL or an object of a W3C traceparent and, optionally, a tracestate string;
-- anything else is refused (22023) before the request is made. Its size is the column's check.
CREATE FUNCTION "request_trace_context_check"(p_trace_context JSONB) RETURNS VOID
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF p_trace_context IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(p_trace_context) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_object_keys(p_trace_context) k WHERE k NOT IN ('traceparent', 'tracestate'))
       OR jsonb_typeof(p_trace_context -> 'traceparent') IS DISTINCT FROM 'string'
       OR (p_trace_context ->> 'traceparent') !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       OR (p_trace_context ? 'tracestate' AND jsonb_typeof(p_trace_context -> 'tracestate') <> 'string') THEN
        RAISE EXCEPTION 'request: the trace context must be {traceparent, tracestate?} with a W3C traceparent'
            USING ERRCODE = '22023';
    END IF;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_trace_context_check"(JSONB) FROM PUBLIC;

DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text, text, text, bigint, text, jsonb) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.request_operation(jsonb, bigint, jsonb) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'request_transfer(text, text, text, bigint, text)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION request_transfer(text, text, text, bigint, text, jsonb) TO %s', v_grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION request_operation(jsonb, bigint, jsonb) TO %s', v_grantee);
    END LOOP;
END
$$;
