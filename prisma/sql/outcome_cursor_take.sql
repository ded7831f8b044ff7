-- A cursor's position, its row locked (FOR UPDATE SKIP LOCKED) until the caller's transaction
-- ends: no row when another publisher holds it, so one publisher at a time moves it.
CREATE OR REPLACE FUNCTION "outcome_cursor_take"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
VOLATILE
AS $$
    SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name) FOR UPDATE SKIP LOCKED;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_cursor_take(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_cursor_take(text) FROM PUBLIC;
