-- The last number the lock_tokens sequence issued: the PostgreSQL lock service compares a
-- refused token's number with it (below: the next acquire is above the fence; at or above: the
-- sequence was set back by hand, and a new lock epoch is the way out).
CREATE OR REPLACE FUNCTION "lock_tokens_last"() RETURNS BIGINT
LANGUAGE sql
STABLE
AS $$
    SELECT s.last_value FROM lock_tokens s;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_tokens_last() SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_tokens_last() FROM PUBLIC;
