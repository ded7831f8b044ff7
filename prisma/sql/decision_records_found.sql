-- The idempotency records of the operations named, read once their advisory locks are held (so
-- none can appear before the batch commits): what the decision answers a duplicate or a conflict
-- with. Parallel arrays, one element per record found.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_records_found"(
    p_operation_ids TEXT[],
    OUT r_op        TEXT[],
    OUT r_hash      TEXT[],
    OUT r_status    TEXT[],
    OUT r_reason    TEXT[],
    OUT r_fence     BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
           coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'), coalesce(array_agg(t.fence), '{}')
      INTO r_op, r_hash, r_status, r_reason, r_fence
      FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_records_found(text[]) FROM PUBLIC;
