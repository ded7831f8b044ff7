-- Give-ups bound to their send, and the relay's role bound to its claims (issue 41, item 4.4).
-- record_transfer_given_up() parked a request whatever its send when the caller passed no send
-- count, and the worker passed none, checking that its job was still the failed one before the
-- call, not with it: a redrive in between was parked again. The send count is now required, and
-- the worker reads it first (give_up_send_count()), checks its job, then records the give-up bound
-- to that send, which a redrive since (it counts a send) makes the record refuse. The relay's
-- role loses record_transfer_given_up(): it records a give-up through relay_record_given_up(),
-- only for a re-send its own claim took (each claim marks its rows with a fresh relay_claim
-- UUID, which only the claimer learns), and a claim takes at most 1,000 requests. The outcome
-- cursors' functions take only names of `outcomes-` and 1-55 more of [a-z0-9-] (at most 8 such
-- cursors), so the relay's role cannot make or move another consumer's cursor, and a cursor is
-- made at the first event kept, not at 0, so one made after a prune does not hold back the next.
-- And a relay that finds a re-send's job completed asks relay_requests_decided() before it calls
-- the decision lost (item 4.5): a job that completed after the claim has its decision recorded.

ALTER TABLE "transfer_requests" ADD COLUMN "relay_claim" UUID;

-- Who had the old give-up, and who the relay's claims (their role lost the give-up, the claims'
-- signatures change): both are granted again below, each what is now theirs.
CREATE TEMPORARY TABLE "give_up_binding_relays" AS
    SELECT DISTINCT a.grantee::regrole::text AS grantee
      FROM pg_proc p, aclexplode(p.proacl) a
     WHERE p.oid = 'relay_claim_first_sends(integer)'::regprocedure
       AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0;
CREATE TEMPORARY TABLE "give_up_binding_givers" AS
    SELECT DISTINCT a.grantee::regrole::text AS grantee
      FROM pg_proc p, aclexplode(p.proacl) a
     WHERE p.oid = 'record_transfer_given_up(text, text, text, integer)'::regprocedure
       AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
       AND a.grantee::regrole::text NOT IN (SELECT grantee FROM "give_up_binding_relays");

-- The give-up, as in the payments migration, but bound to a send always: p_send_count is the
-- request's send_count the caller saw (the worker's give_up_send_count(), the relay's claim) and
-- must still be the request's, so a give-up seen before a redrive (or another relay's re-send)
-- parks nothing after it. NULL is refused (22023). Returns whether a give-up was recorded: false
-- when the operation is decided, has no open request, its request is given up already, was sent
-- again since, or asked for another body than the failed job's (a straight job that reused the
-- id). p_reason: the failed job's reason, at most 500 characters kept.
DROP FUNCTION "record_transfer_given_up"(TEXT, TEXT, TEXT, INTEGER);
CREATE FUNCTION "record_transfer_given_up"(
    p_operation_id TEXT,
    p_request_hash TEXT,
    p_reason       TEXT,
    p_send_count   INTEGER
) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_reason TEXT := left(coalesce(p_reason, 'no reason given'), 500);
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_request_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_transfer_given_up: an operation and the 64-hex-digit hash of its body must be given'
            USING ERRCODE = '22023';
    END IF;
    IF p_send_count IS NULL OR p_send_count < 0 THEN
        RAISE EXCEPTION 'record_transfer_given_up: the send the give-up belongs to (send_count, 0 or more) must be given'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    WITH parked AS (
        UPDATE transfer_requests q
           SET given_up_at = clock_timestamp(), give_up_count = q.give_up_count + 1, give_up_reason = v_reason
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL AND q.given_up_at IS NULL
           AND q.request_hash = p_request_hash AND q.send_count = p_send_count
        RETURNING q.operation_id, q.kind, q.body, q.from_wallet, q.to_wallet, q.amount, q.currency
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, from_wallet, to_wallet, amount, currency, detail)
    SELECT p.operation_id, 'given_up', v_reason, p.kind, p.from_wallet, p.to_wallet, p.amount, p.currency, p.body
      FROM parked p;
    RETURN FOUND;
END;
$$;
REVOKE EXECUTE ON FUNCTION "record_transfer_given_up"(TEXT, TEXT, TEXT, INTEGER) FROM PUBLIC;

-- The send a give-up of this operation and body would be bound to now: the open request's
-- send_count, NULL when there is none to give up (decided, given up already, another body, no
-- request: a job sent to BullMQ straight). The worker reads it, then checks that its job is still
-- the failed one, then records the give-up with it: a redrive between any two steps has counted
-- a send, and the record is refused.
CREATE FUNCTION "give_up_send_count"(p_operation_id TEXT, p_request_hash TEXT) RETURNS INTEGER
LANGUAGE sql
STABLE
AS $$
    SELECT q.send_count FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.request_hash = p_request_hash
       AND q.decided_at IS NULL AND q.given_up_at IS NULL;
$$;
REVOKE EXECUTE ON FUNCTION "give_up_send_count"(TEXT, TEXT) FROM PUBLIC;

-- The relay's claims, as in the relay-role migration, but a claim takes at most 1,000 requests
-- (RELAY_BATCH_MAX's bound) and marks the rows it takes with a fresh UUID of its own
-- (relay_claim), answered as `claim`: the one key to relay_record_given_up() for them.
DROP FUNCTION "relay_claim_first_sends"(INTEGER);
CREATE FUNCTION "relay_claim_first_sends"(p_limit INTEGER)
RETURNS TABLE (
    operation_id  TEXT,
    request_hash  TEXT,
    from_wallet   TEXT,
    to_wallet     TEXT,
    amount        BIGINT,
    currency      TEXT,
    send_count    INTEGER,
    kind          TEXT,
    body          JSONB,
    trace_context JSONB,
    claim         UUID
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_claim UUID := gen_random_uuid();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'relay_claim_first_sends: the limit must be from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL AND r.sent_at IS NULL
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q
           SET sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = v_claim
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context, q.relay_claim;
END;
$$;

DROP FUNCTION "relay_claim_resends"(INTEGER, DOUBLE PRECISION);
CREATE FUNCTION "relay_claim_resends"(p_limit INTEGER, p_due_after_ms DOUBLE PRECISION)
RETURNS TABLE (
    operation_id  TEXT,
    request_hash  TEXT,
    from_wallet   TEXT,
    to_wallet     TEXT,
    amount        BIGINT,
    currency      TEXT,
    send_count    INTEGER,
    kind          TEXT,
    body          JSONB,
    trace_context JSONB,
    claim         UUID
)
LANGUAGE plpgsql
VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    v_claim UUID := gen_random_uuid();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'relay_claim_resends: the limit must be from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    IF p_due_after_ms IS NULL OR p_due_after_ms < 0 THEN
        RAISE EXCEPTION 'relay_claim_resends: the wait before a re-send must be 0 ms or more' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL
               AND r.sent_at < now() - make_interval(secs => p_due_after_ms / 1000)
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q
           SET sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = v_claim
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context, q.relay_claim;
END;
$$;

-- The relay's give-up: only for a re-send (send_count above 1) that the claim p_claim took and
-- that is still the request's last send (p_send_count), recorded by record_transfer_given_up()
-- with the stored request's hash. A relay that did not make the claim does not know its UUID; a
-- redrive or another relay's re-send since has moved the send on. False, and nothing, otherwise.
CREATE FUNCTION "relay_record_given_up"(p_operation_id TEXT, p_reason TEXT, p_send_count INTEGER, p_claim UUID)
RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_hash TEXT;
BEGIN
    IF p_operation_id IS NULL OR p_send_count IS NULL OR p_claim IS NULL THEN
        RAISE EXCEPTION 'relay_record_given_up: an operation, the send_count and the claim of its re-send must be given'
            USING ERRCODE = '22023';
    END IF;
    SELECT q.request_hash::TEXT INTO v_hash FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.relay_claim = p_claim AND q.send_count = p_send_count
       AND q.send_count > 1;
    IF v_hash IS NULL THEN
        RETURN FALSE;
    END IF;
    -- Checks the send again under the operation's lock: a claim moves send_count, so the same
    -- send is the same claim.
    RETURN record_transfer_given_up(p_operation_id, v_hash, p_reason, p_send_count);
END;
$$;

-- Which of the named requests (at most 10,000) are decided: a re-send that finds its job
-- completed asks, and only a request still undecided is a lost decision (the job may have
-- completed after the claim, its decision committed first).
CREATE FUNCTION "relay_requests_decided"(p_operation_ids TEXT[]) RETURNS SETOF TEXT
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF p_operation_ids IS NULL OR cardinality(p_operation_ids) > 10000 THEN
        RAISE EXCEPTION 'relay_requests_decided: from 0 to 10000 operation ids' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.operation_id FROM transfer_requests r
         WHERE r.operation_id = ANY (p_operation_ids) AND r.decided_at IS NOT NULL;
END;
$$;

-- The name rule of the cursors the outcome_cursor_* functions keep: `outcomes-` then 1 to 55 of
-- [a-z0-9-], the first a letter or a digit (64 characters at most). Answers the name, or raises
-- 22023. Other consumers' cursors (made by the owner under other names) are out of their reach.
CREATE FUNCTION "outcome_cursor_name_checked"(p_name TEXT) RETURNS TEXT
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
REVOKE EXECUTE ON FUNCTION "outcome_cursor_name_checked"(TEXT) FROM PUBLIC;

-- The cursor's functions, as in the relay-role migration, each with the name rule. _open makes a
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

CREATE OR REPLACE FUNCTION "outcome_cursor_take"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
VOLATILE
AS $$
    SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name) FOR UPDATE SKIP LOCKED;
$$;

CREATE OR REPLACE FUNCTION "outcome_cursor_move"(p_name TEXT, p_position BIGINT) RETURNS BOOLEAN
LANGUAGE sql
VOLATILE
AS $$
    WITH moved AS (
        UPDATE outcome_cursors c SET position = p_position, updated_at = now()
         WHERE c.name = outcome_cursor_name_checked(p_name) AND c.position <= p_position
           AND p_position <= (SELECT coalesce(max(e.position), 0) FROM outcome_events e)
        RETURNING 1
    )
    SELECT count(*) = 1 FROM moved;
$$;

CREATE OR REPLACE FUNCTION "outcome_cursor_position"(p_name TEXT) RETURNS BIGINT
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce((SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name)), 0);
$$;

REVOKE EXECUTE ON FUNCTION "relay_claim_first_sends"(INTEGER) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_claim_resends"(INTEGER, DOUBLE PRECISION) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_record_given_up"(TEXT, TEXT, INTEGER, UUID) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION "relay_requests_decided"(TEXT[]) FROM PUBLIC;

-- Each runs as its owner, with the search_path fixed to the schema it lives in (pg_temp last);
-- CREATE OR REPLACE made the cursor's four SECURITY INVOKER again.
DO $$
DECLARE
    v_fn TEXT;
BEGIN
    FOREACH v_fn IN ARRAY ARRAY[
        'record_transfer_given_up(text, text, text, integer)',
        'give_up_send_count(text, text)',
        'relay_claim_first_sends(integer)',
        'relay_claim_resends(integer, double precision)',
        'relay_record_given_up(text, text, integer, uuid)',
        'relay_requests_decided(text[])',
        'outcome_cursor_open(text)',
        'outcome_cursor_take(text)',
        'outcome_cursor_move(text, bigint)',
        'outcome_cursor_position(text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %I.%s SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                       current_schema(), v_fn, current_schema());
    END LOOP;
END
$$;

-- Roles made before this migration get what is now theirs; later ones get it from their command
-- (`npm run db:worker-role`, `npm run db:relay-role`). A worker role: the give-up and the send it
-- reads first. A relay role: its claims again, its give-up and the decided check, not the
-- worker's give-up.
DO $$
DECLARE
    v_role TEXT;
BEGIN
    FOR v_role IN SELECT grantee FROM "give_up_binding_givers" LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION record_transfer_given_up(text, text, text, integer) TO %s', v_role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION give_up_send_count(text, text) TO %s', v_role);
    END LOOP;
    FOR v_role IN SELECT grantee FROM "give_up_binding_relays" LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION relay_claim_first_sends(integer) TO %s', v_role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION relay_claim_resends(integer, double precision) TO %s', v_role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION relay_record_given_up(text, text, integer, uuid) TO %s', v_role);
        EXECUTE format('GRANT EXECUTE ON FUNCTION relay_requests_decided(text[]) TO %s', v_role);
    END LOOP;
END
$$;
DROP TABLE "give_up_binding_relays";
DROP TABLE "give_up_binding_givers";
