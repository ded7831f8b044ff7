-- An amount on the wire: a JSON string of 1-19 decimal digits, from 1 to 10^18 - 1. The digits are
-- matched before they are read as a number (CASE keeps that order).
CREATE OR REPLACE FUNCTION "request_amount_valid"(p_amount JSONB) RETURNS BOOLEAN
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_amount IS NULL OR jsonb_typeof(p_amount) <> 'string' OR (p_amount #>> '{}') !~ '^[0-9]{1,19}$' THEN FALSE
        ELSE (p_amount #>> '{}')::NUMERIC BETWEEN 1 AND 999999999999999999
    END
$$;
REVOKE EXECUTE ON FUNCTION "request_amount_valid"(JSONB) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_amount_valid(jsonb) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
