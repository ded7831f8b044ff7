-- Moves a cursor forward to p_position (never back, never past the feed's last event); answers
-- whether it moved.
CREATE OR REPLACE FUNCTION "outcome_cursor_move"(p_name TEXT, p_position BIGINT) RETURNS BOOLEAN
LANGUAGE sql
VOLATILE
AS $$
    WITH moved AS (
        UPDATE outcome_cursors c SET position = p_position, updated_at = now()
         WHERE c.name = outcome_cursor_name_checked(p_name) AND c.position <= p_position
           AND p_position <= (SELECT coalesce(max(e.position), 0) FROM outcome_events e)
        RETURNING 1
    )
    SELECT count(*) = 1 FROM moved;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_cursor_move(text,bigint) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_cursor_move(text,bigint) FROM PUBLIC;
