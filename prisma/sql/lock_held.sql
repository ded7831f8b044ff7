-- Does this session hold the advisory lock of the key (the PostgreSQL lock service's renewal)?
-- Read from pg_locks, so a lock the server dropped with a session that was replaced is not
-- reported as held by the new one.
CREATE OR REPLACE FUNCTION "lock_held"(p_key TEXT) RETURNS BOOLEAN
LANGUAGE sql
STABLE
AS $$
    SELECT EXISTS (
        SELECT 1 FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1
           AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
           AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(p_key, 0));
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_held(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_held(text) FROM PUBLIC;
