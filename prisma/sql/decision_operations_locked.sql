-- Every operation's advisory lock, taken in one global order (by key): twins across batches
-- queue there instead of racing into a unique violation, and two batches that cross wait for
-- each other but never deadlock. The intake takes the same keys in the same order
-- (src/intake/intake.ts). Answers how many locks it took.
CREATE OR REPLACE FUNCTION "decision_operations_locked"(p_operation_ids TEXT[]) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_key   BIGINT;
    v_count INTEGER := 0;
BEGIN
    FOR v_key IN
        SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(v_key);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_operations_locked(text[]) FROM PUBLIC;
