-- Ends this session's advisory lock of the key; FALSE when this session does not hold it (it
-- was never this session's, or the session that held it is gone), so a release can only end
-- its own lease.
CREATE OR REPLACE FUNCTION "lock_release"(p_key TEXT) RETURNS BOOLEAN
LANGUAGE sql
AS $$
    SELECT CASE WHEN lock_held(p_key) THEN pg_advisory_unlock(hashtextextended(p_key, 0)) ELSE FALSE END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_release(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_release(text) FROM PUBLIC;
