-- Ends this session's advisory locks of the keys, one turn of a worker's releases in one
-- statement; FALSE for a key this session does not hold (never its own, or the session that held
-- it is gone), so a release can only end its own lease.
CREATE OR REPLACE FUNCTION "lock_release"(p_keys TEXT[]) RETURNS BOOLEAN[]
LANGUAGE sql
AS $$
    SELECT coalesce(array_agg(pg_advisory_unlock(hashtextextended(k, 0)) ORDER BY i), '{}')
      FROM unnest(p_keys) WITH ORDINALITY AS u(k, i);
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_release(text[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_release(text[]) FROM PUBLIC;
