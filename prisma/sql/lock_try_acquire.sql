-- The PostgreSQL lock service (LOCK_BACKEND=postgres): a session advisory lock on the 64-bit hash
-- of the lock key, and, when it was free, a token from the lock_tokens sequence, so the number
-- comes from the database that checks it and no counter lives anywhere else. NULL: another
-- session holds the key. A session that holds the key already is refused too (advisory locks
-- stack within a session; one lease per key and session is what the watchdog renews). The lock
-- ends with lock_release() or with the session (idle_session_timeout is the lease).
CREATE OR REPLACE FUNCTION "lock_try_acquire"(p_key TEXT) RETURNS BIGINT
LANGUAGE plpgsql
AS $$
DECLARE
    v_key BIGINT := hashtextextended(p_key, 0);
BEGIN
    IF p_key IS NULL OR length(p_key) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'lock_try_acquire: the key must be 1-256 characters' USING ERRCODE = '22023';
    END IF;
    IF lock_held(p_key) OR NOT pg_try_advisory_lock(v_key) THEN
        RETURN NULL;
    END IF;
    RETURN nextval('lock_tokens');
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_try_acquire(text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_try_acquire(text) FROM PUBLIC;
