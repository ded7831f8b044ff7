-- A cursor's position (0 for a cursor never opened), for the relay's gauges.
CREATE OR REPLACE FUNCTION "outcome_cursor_position"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce((SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name)), 0);
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_cursor_position(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_cursor_position(text) FROM PUBLIC;
