-- The cursors' functions keep names of one rule (outcome_cursor_name_checked()). _open makes a
-- cursor at the position before the first event kept (0 on a feed never pruned), at most 8 of the
-- rule's names (54000 past it), one _open at a time.
CREATE OR REPLACE FUNCTION "outcome_cursor_open"(p_name TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_name TEXT := outcome_cursor_name_checked(p_name);
BEGIN
    IF EXISTS (SELECT 1 FROM outcome_cursors c WHERE c.name = v_name) THEN
        RETURN FALSE;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('outcome_cursors:open', 0));
    IF (SELECT count(*) FROM outcome_cursors c WHERE c.name ~ '^outcomes-[a-z0-9][a-z0-9-]{0,54}$') >= 8 THEN
        RAISE EXCEPTION 'outcome_cursor_open: 8 outcome cursors exist already; the owner deletes one no publisher uses'
            USING ERRCODE = '54000';
    END IF;
    INSERT INTO outcome_cursors (name, position)
    VALUES (v_name, coalesce((SELECT min(e.position) - 1 FROM outcome_events e), 0))
    ON CONFLICT (name) DO NOTHING;
    RETURN FOUND;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_cursor_open(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_cursor_open(text) FROM PUBLIC;
