-- The answer to an operation that already has a record: `duplicate` when the request carries the
-- body the record was decided from (the same request hash), `conflict` when it carries another.
-- The caller returns the record's own status, reason and fence with it. One rule for the single
-- and the batch decision; an expression the planner inlines into its caller.
CREATE OR REPLACE FUNCTION "decision_answer"(p_record_hash TEXT, p_request_hash TEXT) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN p_record_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END
$$;

REVOKE EXECUTE ON FUNCTION decision_answer(text,text) FROM PUBLIC;
