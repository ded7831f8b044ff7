-- The trace contexts of some requests, for the relay's publisher: it gives each outcome event it
-- publishes a span under the producer's request, so a transfer's trace ends with its outcome's
-- publication. The relay's role has no right on transfer_requests (the relay-role migration), so
-- the lookup is a function like the rest of what a relay does: SECURITY DEFINER, search_path
-- pinned, EXECUTE revoked from PUBLIC and granted by `npm run db:relay-role`. It answers only the
-- named requests that carry a context, at most 10,000 names a call, and reads nothing else.
CREATE OR REPLACE FUNCTION "relay_trace_contexts"(p_operation_ids TEXT[])
RETURNS TABLE (operation_id TEXT, trace_context JSONB)
LANGUAGE plpgsql
STABLE
AS $$
#variable_conflict use_column
BEGIN
    IF p_operation_ids IS NULL OR cardinality(p_operation_ids) > 10000 THEN
        RAISE EXCEPTION 'relay_trace_contexts: from 0 to 10000 operation ids' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.operation_id, r.trace_context FROM transfer_requests r
         WHERE r.operation_id = ANY (p_operation_ids) AND r.trace_context IS NOT NULL;
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_trace_contexts(text[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_trace_contexts(text[]) FROM PUBLIC;
