-- The outcome publisher's cursor (src/intake/outcome-publisher.ts). _open makes it at 0 when
-- missing, in a statement of its own; _take, inside the publisher's transaction, answers its
-- position and keeps its row locked until the transaction ends, or NULL when another publisher
-- holds it; _move sets it after the events were added, forward only and never past the last
-- position of the feed; _position reads it (the gauge; 0 before the first round).
CREATE OR REPLACE FUNCTION "outcome_cursor_open"(p_name TEXT) RETURNS BOOLEAN
LANGUAGE sql
VOLATILE
AS $$
    WITH made AS (
        INSERT INTO outcome_cursors (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING RETURNING 1
    )
    SELECT count(*) = 1 FROM made;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_cursor_open(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_cursor_open(text) FROM PUBLIC;
