-- The intake refuses what every worker refuses, by one rule (issue 41, 4.2): request_operation()
-- and request_transfer() check a body with request_operation_problem(), whose limits are
-- WIRE_LIMITS (src/ledger/wire-limits.ts) at the widest a worker may be set. A request stored
-- before, which no worker can decide, ends with a terminal `rejected: invalid_request` through
-- request_decide_invalid(), which the worker calls for an intake request it refuses as invalid.
--
-- request_operation() accepted bodies that the worker's validation (src/ledger/transfer-request.ts)
-- refuses, so they were stored, sent, failed, given up and sent again after every redrive: an
-- amount above any TRANSFER_AMOUNT_MAX (9e18), an expiresAt matched by pattern only (30 February),
-- an expiresInMs with a NULL maximum (NOT BETWEEN 1000 AND NULL is NULL, and passed), legs
-- totalling more than any maximum (1.8e18), ids and currencies read with ->> whatever their JSON
-- type (an operationId of 123, a currency of null). The checks now live in one function,
-- request_operation_problem(), with the limits of src/ledger/wire-limits.ts (WIRE_LIMITS) at the
-- widest a worker may be configured: amounts up to 10^18 - 1, a hold's expiresInMs from 1000 to
-- the given maximum, or 31622400000 (the largest HOLD_EXPIRY_MAX_MS) when it is NULL, a real
-- calendar instant, 2 to 16 legs. request_operation() and request_transfer() both refuse with
-- its answer (22023), and test/intake/one-rule.test.ts runs one table of bodies through it and
-- through the worker's validation, body by body.
--
-- request_decide_invalid(): what the worker calls for an intake request it refuses as invalid.
-- It takes no body from its caller: under the operation's advisory lock it checks the stored
-- request's own body with request_operation_problem() at the widest limits, and only when no
-- worker could decide it records it decided as rejected `invalid_request` (a transfers record,
-- decided_at on the request, a 'rejected' event), in one statement's transaction, once. A body
-- some worker could decide (this worker's TRANSFER_AMOUNT_MAX is merely lower) is left open, to be
-- given up and redriven once the settings agree. SECURITY DEFINER, search_path pinned, granted to
-- the roles that execute the decision (the worker roles).
CREATE FUNCTION "request_operation_problem"(p_body JSONB, p_hold_expiry_max_ms BIGINT) RETURNS TEXT
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    c_id_pattern         CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_amount_pattern     CONSTANT TEXT := '^[0-9]{1,19}$';
    c_amount_ceiling     CONSTANT NUMERIC := 999999999999999999;
    c_currency_pattern   CONSTANT TEXT := '^[A-Z]{3}$';
    c_time_pattern       CONSTANT TEXT := '^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,3})?Z$';
    c_expires_in_min_ms  CONSTANT BIGINT := 1000;
    c_expiry_ceiling_ms  CONSTANT BIGINT := 31622400000;
    c_legs_min           CONSTANT INTEGER := 2;
    c_legs_max           CONSTANT INTEGER := 16;
    v_max      BIGINT := coalesce(p_hold_expiry_max_ms, c_expiry_ceiling_ms);
    v_kind     TEXT;
    v_allowed  TEXT[];
    v_extra    TEXT;
    v_field    TEXT;
    v_parts    TEXT[];
    v_leg      JSONB;
    v_leg_to   TEXT[] := '{}';
    v_total    NUMERIC := 0;
BEGIN
    IF v_max NOT BETWEEN c_expires_in_min_ms AND c_expiry_ceiling_ms THEN
        RETURN format('the hold expiry maximum must be from %s to %s ms, got %s', c_expires_in_min_ms,
                      c_expiry_ceiling_ms, v_max);
    END IF;
    IF p_body IS NULL OR jsonb_typeof(p_body) <> 'object' THEN
        RETURN 'the body must be a JSON object';
    END IF;
    IF p_body ? 'kind' AND jsonb_typeof(p_body -> 'kind') <> 'string' THEN
        RETURN 'kind must be a string';
    END IF;
    v_kind := coalesce(p_body ->> 'kind', 'transfer');
    v_allowed := CASE v_kind
        WHEN 'transfer' THEN ARRAY['kind', 'operationId', 'from', 'to', 'amount', 'currency']
        WHEN 'hold'     THEN ARRAY['kind', 'operationId', 'from', 'to', 'amount', 'currency', 'expiresInMs', 'expiresAt']
        WHEN 'capture'  THEN ARRAY['kind', 'operationId', 'from', 'hold', 'amount']
        WHEN 'void'     THEN ARRAY['kind', 'operationId', 'from', 'hold']
        WHEN 'refund'   THEN ARRAY['kind', 'operationId', 'from', 'original', 'amount']
        WHEN 'split'    THEN ARRAY['kind', 'operationId', 'from', 'legs', 'currency']
    END;
    IF v_allowed IS NULL THEN
        RETURN 'kind must be one of transfer, hold, capture, void, refund, split';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown field %s for a %s', left(v_extra, 40), v_kind);
    END IF;

    -- The ids each kind names: its own, the wallet it debits, and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', 'from'] || CASE v_kind WHEN 'transfer' THEN ARRAY['to']
                                                                   WHEN 'hold' THEN ARRAY['to']
                                                                   WHEN 'capture' THEN ARRAY['hold']
                                                                   WHEN 'void' THEN ARRAY['hold']
                                                                   WHEN 'refund' THEN ARRAY['original']
                                                                   ELSE ARRAY[]::TEXT[] END LOOP
        IF jsonb_typeof(p_body -> v_field) IS DISTINCT FROM 'string' OR (p_body ->> v_field) !~ c_id_pattern THEN
            RETURN format('%s must be a string of 1-128 characters of [A-Za-z0-9._:-]', v_field);
        END IF;
    END LOOP;
    IF v_kind IN ('transfer', 'hold') AND (p_body ->> 'from') = (p_body ->> 'to') THEN
        RETURN 'from and to are the same wallet';
    END IF;
    IF v_kind IN ('transfer', 'hold') AND NOT p_body ? 'amount' THEN
        RETURN format('a %s needs an amount', v_kind);
    END IF;
    IF p_body ? 'amount' AND NOT request_amount_valid(p_body -> 'amount') THEN
        RETURN format('amount must be a string of decimal digits, from 1 to %s', c_amount_ceiling);
    END IF;
    IF p_body ? 'currency' AND (jsonb_typeof(p_body -> 'currency') <> 'string'
                                OR (p_body ->> 'currency') !~ c_currency_pattern) THEN
        RETURN 'currency must be three capital letters, like EUR';
    END IF;

    IF v_kind = 'hold' THEN
        IF (p_body ? 'expiresInMs') = (p_body ? 'expiresAt') THEN
            RETURN 'a hold needs exactly one of expiresInMs and expiresAt';
        END IF;
        IF p_body ? 'expiresInMs' THEN
            IF jsonb_typeof(p_body -> 'expiresInMs') <> 'number' OR (p_body ->> 'expiresInMs') !~ '^[0-9]{1,12}$' THEN
                RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, v_max);
            END IF;
            IF (p_body ->> 'expiresInMs')::BIGINT NOT BETWEEN c_expires_in_min_ms AND v_max THEN
                RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, v_max);
            END IF;
        ELSE
            IF jsonb_typeof(p_body -> 'expiresAt') <> 'string' THEN
                RETURN 'expiresAt must be a UTC time like 2026-12-02T10:00:00.000Z';
            END IF;
            v_parts := regexp_match(p_body ->> 'expiresAt', c_time_pattern);
            IF v_parts IS NULL THEN
                RETURN 'expiresAt must be a UTC time like 2026-12-02T10:00:00.000Z';
            END IF;
            -- A real instant: the validation's round trip through Date, field by field. The day
            -- is checked only once year and month are known good (make_date raises otherwise).
            IF v_parts[1]::INTEGER < 1 OR v_parts[2]::INTEGER NOT BETWEEN 1 AND 12 OR v_parts[4]::INTEGER > 23
               OR v_parts[5]::INTEGER > 59 OR v_parts[6]::INTEGER > 59 THEN
                RETURN format('expiresAt is not a real date and time: %s', p_body ->> 'expiresAt');
            END IF;
            IF v_parts[3]::INTEGER NOT BETWEEN 1 AND extract(DAY FROM make_date(v_parts[1]::INTEGER, v_parts[2]::INTEGER, 1)
                                                                       + INTERVAL '1 month - 1 day')::INTEGER THEN
                RETURN format('expiresAt is not a real date and time: %s', p_body ->> 'expiresAt');
            END IF;
        END IF;
    ELSIF v_kind = 'split' THEN
        IF jsonb_typeof(p_body -> 'legs') IS DISTINCT FROM 'array' THEN
            RETURN format('legs must be an array of %s to %s {to, amount}', c_legs_min, c_legs_max);
        END IF;
        IF jsonb_array_length(p_body -> 'legs') NOT BETWEEN c_legs_min AND c_legs_max THEN
            RETURN format('legs must be an array of %s to %s {to, amount}', c_legs_min, c_legs_max);
        END IF;
        FOR v_leg IN SELECT l FROM jsonb_array_elements(p_body -> 'legs') l LOOP
            IF jsonb_typeof(v_leg) <> 'object' THEN
                RETURN 'every leg must be {to, amount}';
            END IF;
            IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_leg) k WHERE k NOT IN ('to', 'amount'))
               OR jsonb_typeof(v_leg -> 'to') IS DISTINCT FROM 'string' OR (v_leg ->> 'to') !~ c_id_pattern
               OR NOT request_amount_valid(v_leg -> 'amount') THEN
                RETURN format('every leg must be {to, amount} with a wallet id and an amount from 1 to %s', c_amount_ceiling);
            END IF;
            IF (v_leg ->> 'to') = (p_body ->> 'from') OR (v_leg ->> 'to') = ANY (v_leg_to) THEN
                RETURN 'a split pays each wallet once, never its source';
            END IF;
            v_leg_to := v_leg_to || (v_leg ->> 'to');
            v_total := v_total + (v_leg ->> 'amount')::NUMERIC;
        END LOOP;
        IF v_total > c_amount_ceiling THEN
            RETURN format('the legs'' total %s exceeds the maximum of %s', v_total, c_amount_ceiling);
        END IF;
    END IF;
    RETURN NULL;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_operation_problem"(JSONB, BIGINT) FROM PUBLIC;

-- An amount on the wire: a JSON string of 1-19 decimal digits, from 1 to 10^18 - 1. The digits are
-- matched before they are read as a number (CASE keeps that order).
CREATE FUNCTION "request_amount_valid"(p_amount JSONB) RETURNS BOOLEAN
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_amount IS NULL OR jsonb_typeof(p_amount) <> 'string' OR (p_amount #>> '{}') !~ '^[0-9]{1,19}$' THEN FALSE
        ELSE (p_amount #>> '{}')::NUMERIC BETWEEN 1 AND 999999999999999999
    END
$$;
REVOKE EXECUTE ON FUNCTION "request_amount_valid"(JSONB) FROM PUBLIC;

-- A transfer's request, as in the front-door-edges migration, checked by the one rule: its
-- arguments are the wire object's fields (a NULL one is an absent one, refused where required).
CREATE OR REPLACE FUNCTION "request_transfer"(
    p_operation_id TEXT,
    p_from         TEXT,
    p_to           TEXT,
    p_amount       BIGINT,
    p_currency     TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_problem  TEXT;
    v_hash     TEXT;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    v_problem := request_operation_problem(
        jsonb_build_object('operationId', p_operation_id, 'from', p_from, 'to', p_to, 'amount', p_amount::TEXT)
            || CASE WHEN p_currency IS NULL THEN '{}'::JSONB ELSE jsonb_build_object('currency', p_currency) END,
        NULL);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'request_transfer: %', v_problem USING ERRCODE = '22023';
    END IF;
    v_hash := encode(sha256(convert_to(
        concat_ws(E'\n', 'v1', p_from, p_to, p_amount::TEXT, coalesce(p_currency, '')), 'UTF8')), 'hex');

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));

    -- Decided already (through the queue straight, say): the request is recorded as decided.
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = p_operation_id;

    INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount, currency, decided_at)
    VALUES (p_operation_id, v_hash, p_from, p_to, p_amount, p_currency, v_decided)
    ON CONFLICT (operation_id) DO NOTHING;
    IF FOUND THEN
        IF v_existing IS NOT NULL AND v_existing <> v_hash THEN
            RAISE EXCEPTION 'conflict: operation % was decided with another body', p_operation_id
                USING ERRCODE = '23505';
        END IF;
        RETURN CASE WHEN v_existing IS NULL THEN 'requested' ELSE 'duplicate' END;
    END IF;
    SELECT q.request_hash::TEXT INTO v_existing FROM transfer_requests q WHERE q.operation_id = p_operation_id;
    IF v_existing <> v_hash THEN
        RAISE EXCEPTION 'conflict: operation % was requested with another body', p_operation_id
            USING ERRCODE = '23505';
    END IF;
    RETURN 'duplicate';
END;
$$;

-- The intake for every kind, as in the payments migration, checked by the one rule before
-- anything is read from the body; p_hold_expiry_max_ms NULL is the largest HOLD_EXPIRY_MAX_MS.
CREATE OR REPLACE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT DEFAULT 604800000) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_problem  TEXT;
    v_kind     TEXT;
    v_op       TEXT;
    v_from     TEXT;
    v_to       TEXT;
    v_amount   BIGINT;
    v_currency TEXT;
    v_lines    TEXT[];
    v_hash     TEXT;
    v_leg      JSONB;
    v_legs     TEXT[] := '{}';
    v_total    NUMERIC := 0;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    v_problem := request_operation_problem(p_body, p_hold_expiry_max_ms);
    IF v_problem IS NOT NULL THEN
        RAISE EXCEPTION 'request_operation: %', v_problem USING ERRCODE = '22023';
    END IF;
    v_kind := coalesce(p_body ->> 'kind', 'transfer');
    IF v_kind = 'transfer' THEN
        RETURN request_transfer(p_body ->> 'operationId', p_body ->> 'from', p_body ->> 'to',
                                (p_body ->> 'amount')::BIGINT, p_body ->> 'currency');
    END IF;
    v_op := p_body ->> 'operationId';
    v_from := p_body ->> 'from';
    v_to := p_body ->> 'to';
    v_amount := (p_body ->> 'amount')::BIGINT;
    v_currency := p_body ->> 'currency';

    IF v_kind = 'hold' THEN
        v_lines := ARRAY['v2', 'hold', v_from, v_to, v_amount::TEXT, coalesce(v_currency, ''),
                         coalesce(p_body ->> 'expiresInMs', ''), coalesce(p_body ->> 'expiresAt', '')];
    ELSIF v_kind = 'capture' THEN
        v_lines := ARRAY['v2', 'capture', v_from, p_body ->> 'hold', coalesce(v_amount::TEXT, '')];
    ELSIF v_kind = 'void' THEN
        v_lines := ARRAY['v2', 'void', v_from, p_body ->> 'hold'];
    ELSIF v_kind = 'refund' THEN
        v_lines := ARRAY['v2', 'refund', v_from, p_body ->> 'original', coalesce(v_amount::TEXT, '')];
    ELSE
        FOR v_leg IN SELECT l FROM jsonb_array_elements(p_body -> 'legs') l LOOP
            v_legs := v_legs || (v_leg ->> 'to') || ((v_leg ->> 'amount')::NUMERIC::TEXT);
            v_total := v_total + (v_leg ->> 'amount')::NUMERIC;
        END LOOP;
        v_amount := v_total::BIGINT;
        v_lines := ARRAY['v2', 'split', v_from, coalesce(v_currency, '')] || v_legs;
    END IF;
    v_hash := encode(sha256(convert_to(array_to_string(v_lines, E'\n'), 'UTF8')), 'hex');

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || v_op, 0));
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = v_op;
    INSERT INTO transfer_requests (operation_id, request_hash, kind, body, from_wallet, to_wallet, amount, currency,
                                   decided_at)
    VALUES (v_op, v_hash, v_kind, p_body, v_from, CASE WHEN v_kind = 'hold' THEN v_to END, v_amount, v_currency, v_decided)
    ON CONFLICT (operation_id) DO NOTHING;
    IF FOUND THEN
        IF v_existing IS NOT NULL AND v_existing <> v_hash THEN
            RAISE EXCEPTION 'conflict: operation % was decided with another body', v_op USING ERRCODE = '23505';
        END IF;
        RETURN CASE WHEN v_existing IS NULL THEN 'requested' ELSE 'duplicate' END;
    END IF;
    SELECT q.request_hash::TEXT INTO v_existing FROM transfer_requests q WHERE q.operation_id = v_op;
    IF v_existing <> v_hash THEN
        RAISE EXCEPTION 'conflict: operation % was requested with another body', v_op USING ERRCODE = '23505';
    END IF;
    RETURN 'duplicate';
END;
$$;

-- The terminal end of a stored request that no worker can decide (see the header). Returns
-- whether it recorded that now: false when the operation is decided already, has no open
-- request, or its stored body is one some worker could decide.
CREATE FUNCTION "request_decide_invalid"(p_operation_id TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_request  transfer_requests%ROWTYPE;
    v_body     JSONB;
    v_original TEXT;
    v_decided  TIMESTAMPTZ;
    v_reason   TEXT;
BEGIN
    IF p_operation_id IS NULL THEN
        RAISE EXCEPTION 'request_decide_invalid: an operation must be given' USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    SELECT q.* INTO v_request FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN FALSE;
    END IF;
    -- A transfer's request keeps its fields in columns, a payment's its wire object.
    v_body := coalesce(v_request.body,
        jsonb_build_object('operationId', v_request.operation_id, 'from', v_request.from_wallet,
                           'to', v_request.to_wallet, 'amount', v_request.amount::TEXT)
        || CASE WHEN v_request.currency IS NULL THEN '{}'::JSONB
                ELSE jsonb_build_object('currency', v_request.currency::TEXT) END);
    IF request_operation_problem(v_body, NULL) IS NULL THEN
        RETURN FALSE;
    END IF;
    v_reason := 'invalid_request';
    v_original := CASE v_request.kind WHEN 'capture' THEN coalesce(v_body ->> 'hold', '')
                                      WHEN 'void' THEN coalesce(v_body ->> 'hold', '')
                                      WHEN 'refund' THEN coalesce(v_body ->> 'original', '') END;
    -- Fence 0: no lease wrote it, and it moves no money.
    INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency, status, reason,
                           fence, kind, original_id)
    VALUES (v_request.operation_id, v_request.request_hash, v_request.from_wallet, v_request.to_wallet,
            v_request.amount, v_request.currency, 'rejected', v_reason, 0, v_request.kind, v_original)
    RETURNING created_at INTO v_decided;
    UPDATE transfer_requests q SET decided_at = v_decided WHERE q.operation_id = p_operation_id;
    INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency, operation,
                                 original_id, detail)
    VALUES (v_request.operation_id, 'rejected', v_reason, v_request.from_wallet, v_request.to_wallet,
            v_request.amount, v_request.currency, v_request.kind, v_original, v_request.body);
    RETURN TRUE;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_decide_invalid"(TEXT) FROM PUBLIC;

DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_operation_problem(jsonb, bigint) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.request_amount_valid(jsonb) '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    -- CREATE OR REPLACE reset these two to SECURITY INVOKER; they run as their owner, as before.
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text, text, text, bigint, text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.request_operation(jsonb, bigint) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.request_decide_invalid(text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    -- Who decides transfers may end a request no worker can decide.
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION request_decide_invalid(text) TO %s', v_grantee);
    END LOOP;
END
$$;
