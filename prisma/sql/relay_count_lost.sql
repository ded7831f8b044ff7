-- Counts a lost add (a re-send that found no job in the queue) on each request named; only a
-- request sent more than once can have lost one. Answers how many it counted.
CREATE OR REPLACE FUNCTION "relay_count_lost"(p_operation_ids TEXT[]) RETURNS INTEGER
LANGUAGE sql
VOLATILE
AS $$
    WITH counted AS (
        UPDATE transfer_requests q SET lost_count = q.lost_count + 1
         WHERE q.operation_id = ANY (p_operation_ids) AND q.send_count > 1
        RETURNING 1
    )
    SELECT count(*)::INTEGER FROM counted;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_count_lost(text[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_count_lost(text[]) FROM PUBLIC;
