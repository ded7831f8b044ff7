-- The PostgreSQL lock service (LOCK_BACKEND=postgres), one turn of a worker's acquisitions in one
-- statement: per key, a session advisory lock on its 64-bit hash and, when it was free, a token
-- from the lock_tokens sequence, so the number comes from the database that checks it and no
-- counter lives anywhere else; NULL where another session holds the key. Advisory locks stack
-- within a session: the caller never asks for a key its session holds (postgres-lock.ts keeps
-- them). The locks end with lock_release() or with the session (idle_session_timeout is the lease).
CREATE OR REPLACE FUNCTION "lock_try_acquire"(p_keys TEXT[]) RETURNS BIGINT[]
LANGUAGE plpgsql
AS $$
DECLARE
    v_tokens BIGINT[] := '{}';
    v_key TEXT;
BEGIN
    IF p_keys IS NULL OR cardinality(p_keys) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'lock_try_acquire: 1-256 keys' USING ERRCODE = '22023';
    END IF;
    FOREACH v_key IN ARRAY p_keys LOOP
        IF v_key IS NULL OR length(v_key) NOT BETWEEN 1 AND 256 THEN
            RAISE EXCEPTION 'lock_try_acquire: a key is 1-256 characters' USING ERRCODE = '22023';
        END IF;
        v_tokens := v_tokens || CASE WHEN pg_try_advisory_lock(hashtextextended(v_key, 0))
                                     THEN nextval('lock_tokens') END;
    END LOOP;
    RETURN v_tokens;
END
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_try_acquire(text[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_try_acquire(text[]) FROM PUBLIC;
