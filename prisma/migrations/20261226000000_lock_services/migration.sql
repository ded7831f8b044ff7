-- The lock services (issue 44): lock epochs and the PostgreSQL lock service. lock_epochs records
-- which lock service (LOCK_BACKEND) issues the fencing tokens from which epoch on; a token is
-- epoch × 2^53 + the service's own number (a Redis counter, an etcd create revision, a
-- lock_tokens value), so a holder of an older epoch never writes after one of a newer, however
-- the two services count. Epoch 0 is Redis, as every fleet ran before: its tokens are the
-- counters themselves, and nothing already written changes. The PostgreSQL service takes session
-- advisory locks and its tokens from the lock_tokens sequence, in the database that checks them.
--
-- Written by hand: the table and the sequence (below), then the files of prisma/sql/ as
-- `npm run db:new-migration` writes them.

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

CREATE TABLE "lock_epochs" (
    "epoch"     INTEGER PRIMARY KEY CHECK ("epoch" BETWEEN 0 AND 1023),
    "backend"   TEXT NOT NULL CHECK ("backend" IN ('redis', 'etcd', 'postgres')),
    "opened_at" TIMESTAMPTZ(6) NOT NULL DEFAULT now(),
    "note"      TEXT CHECK (length("note") <= 200)
);
INSERT INTO "lock_epochs" ("epoch", "backend", "note") VALUES (0, 'redis', 'the lock service before epochs');

-- Numbers below 2^53, so that epoch × 2^53 + number fits a bigint (lock-service.ts).
CREATE SEQUENCE "lock_tokens" AS BIGINT MINVALUE 1 MAXVALUE 9007199254740991 NO CYCLE;

-- prisma/sql/lock_epoch_current.sql
-- The lock epoch in force and its lock service (LOCK_BACKEND): the newest row of lock_epochs. A
-- worker reads it at start and on every readiness probe: it issues tokens of that epoch
-- (epoch × 2^53 + its backend's number), and refuses to run when the epoch belongs to another
-- backend, so a fleet that has moved on cannot be joined by a worker of the old lock service.
CREATE OR REPLACE FUNCTION "lock_epoch_current"() RETURNS TABLE (epoch INTEGER, backend TEXT)
LANGUAGE sql
STABLE
AS $$
    SELECT e.epoch, e.backend FROM lock_epochs e ORDER BY e.epoch DESC LIMIT 1;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_epoch_current() SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_epoch_current() FROM PUBLIC;

-- prisma/sql/lock_epoch_open.sql
-- Opens the next lock epoch for a lock service (`npm run lock:epoch -- --open <backend>`, as the
-- database's owner; no worker role may call it): every token issued under it is above every
-- token of the epochs before, whatever numbers either lock service counts in. Serialised on the
-- table, so two operators at once open two epochs one after the other, never one twice.
CREATE OR REPLACE FUNCTION "lock_epoch_open"(p_backend TEXT, p_note TEXT) RETURNS INTEGER
LANGUAGE plpgsql
AS $$
DECLARE
    v_epoch INTEGER;
BEGIN
    IF p_backend IS NULL OR p_backend NOT IN ('redis', 'etcd', 'postgres') THEN
        RAISE EXCEPTION 'lock_epoch_open: backend must be redis, etcd or postgres, got %', coalesce(p_backend, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    LOCK TABLE lock_epochs IN EXCLUSIVE MODE;
    SELECT coalesce(max(e.epoch), -1) + 1 INTO v_epoch FROM lock_epochs e;
    IF v_epoch > 1023 THEN
        RAISE EXCEPTION 'lock_epoch_open: the 1,024 lock epochs are spent' USING ERRCODE = '54000';
    END IF;
    INSERT INTO lock_epochs (epoch, backend, note) VALUES (v_epoch, p_backend, left(p_note, 200));
    RETURN v_epoch;
END
$$;
REVOKE EXECUTE ON FUNCTION lock_epoch_open(text,text) FROM PUBLIC;

-- prisma/sql/lock_release.sql
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

-- prisma/sql/lock_tokens_last.sql
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

-- prisma/sql/lock_try_acquire.sql
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

-- Who decides transfers reads the lock epoch and may take the PostgreSQL lock service's locks
-- (npm run db:worker-role grants them to new worker roles; this reaches the ones that exist, so
-- an upgraded worker stays ready without a new grant).
DO $$
DECLARE
    v_grantee TEXT;
    v_function TEXT;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        FOREACH v_function IN ARRAY ARRAY['lock_epoch_current()', 'lock_try_acquire(text[])',
                                          'lock_release(text[])', 'lock_tokens_last()']
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', v_function, v_grantee);
        END LOOP;
    END LOOP;
END
$$;
