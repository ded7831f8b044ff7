-- A trace context is NULL or an object of a W3C traceparent and, optionally, a tracestate string;
-- anything else is refused (22023) before the request is made. Its size is the column's check.
CREATE OR REPLACE FUNCTION "request_trace_context_check"(p_trace_context JSONB) RETURNS VOID
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

REVOKE EXECUTE ON FUNCTION request_trace_context_check(jsonb) FROM PUBLIC;
