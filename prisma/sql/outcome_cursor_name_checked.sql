-- The name rule of the cursors the outcome_cursor_* functions keep: `outcomes-` then 1 to 55 of
-- [a-z0-9-], the first a letter or a digit (64 characters at most). Answers the name, or raises
-- 22023. Other consumers' cursors (made by the owner under other names) are out of their reach.
CREATE OR REPLACE FUNCTION "outcome_cursor_name_checked"(p_name TEXT) RETURNS TEXT
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF p_name IS NULL OR p_name !~ '^outcomes-[a-z0-9][a-z0-9-]{0,54}$' THEN
        RAISE EXCEPTION 'outcome cursor: a name is outcomes- and 1 to 55 of [a-z0-9-], not %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END;
$$;

REVOKE EXECUTE ON FUNCTION outcome_cursor_name_checked(text) FROM PUBLIC;
