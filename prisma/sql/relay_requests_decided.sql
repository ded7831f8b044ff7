-- Which of the named requests (at most 10,000) are decided: a re-send that finds its job
-- completed asks, and only a request still undecided is a lost decision (the job may have
-- completed after the claim, its decision committed first).
CREATE OR REPLACE FUNCTION "relay_requests_decided"(p_operation_ids TEXT[]) RETURNS SETOF TEXT
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF p_operation_ids IS NULL OR cardinality(p_operation_ids) > 10000 THEN
        RAISE EXCEPTION 'relay_requests_decided: from 0 to 10000 operation ids' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.operation_id FROM transfer_requests r
         WHERE r.operation_id = ANY (p_operation_ids) AND r.decided_at IS NOT NULL;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_requests_decided(text[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_requests_decided(text[]) FROM PUBLIC;
