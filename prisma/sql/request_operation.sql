-- The intake for every kind: a producer's request of one operation, given as the wire format's
-- JSON object, inside the producer's transaction, as request_transfer() (which a transfer goes
-- through, unchanged). Validates the body as the worker does (src/ledger/transfer-request.ts)
-- and hashes it the same way (src/ledger/request-hash.ts); answers 'requested' or 'duplicate',
-- raises 'conflict: …' (23505) for the same id with another body, 22023 for a bad body.
CREATE OR REPLACE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT DEFAULT 604800000) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    c_id_pattern       CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_amount_pattern   CONSTANT TEXT := '^[0-9]{1,19}$';
    c_currency_pattern CONSTANT TEXT := '^[A-Z]{3}$';
    c_time_pattern     CONSTANT TEXT := '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$';
    v_kind     TEXT;
    v_allowed  TEXT[];
    v_extra    TEXT;
    v_op       TEXT;
    v_from     TEXT;
    v_to       TEXT;
    v_amount   BIGINT;
    v_currency TEXT;
    v_lines    TEXT[];
    v_hash     TEXT;
    v_leg      JSONB;
    v_legs     TEXT[] := '{}';
    v_leg_to   TEXT[] := '{}';
    v_total    NUMERIC := 0;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
    v_field    TEXT;
BEGIN
    IF p_body IS NULL OR jsonb_typeof(p_body) <> 'object' THEN
        RAISE EXCEPTION 'request_operation: the body must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF p_body ? 'kind' AND jsonb_typeof(p_body -> 'kind') <> 'string' THEN
        RAISE EXCEPTION 'request_operation: kind must be a string' USING ERRCODE = '22023';
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
        RAISE EXCEPTION 'request_operation: kind must be one of transfer, hold, capture, void, refund, split'
            USING ERRCODE = '22023';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RAISE EXCEPTION 'request_operation: unknown field % for a %', left(v_extra, 40), v_kind USING ERRCODE = '22023';
    END IF;
    IF v_kind = 'transfer' THEN
        IF jsonb_typeof(p_body -> 'amount') IS DISTINCT FROM 'string' OR (p_body ->> 'amount') !~ c_amount_pattern THEN
            RAISE EXCEPTION 'request_operation: amount must be a string of decimal digits' USING ERRCODE = '22023';
        END IF;
        RETURN request_transfer(p_body ->> 'operationId', p_body ->> 'from', p_body ->> 'to',
                                (p_body ->> 'amount')::BIGINT, p_body ->> 'currency');
    END IF;

    -- The ids each kind names: its own, the wallet it debits, and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', 'from'] || CASE v_kind WHEN 'hold' THEN ARRAY['to']
                                                                   WHEN 'capture' THEN ARRAY['hold']
                                                                   WHEN 'void' THEN ARRAY['hold']
                                                                   WHEN 'refund' THEN ARRAY['original']
                                                                   ELSE ARRAY[]::TEXT[] END LOOP
        IF jsonb_typeof(p_body -> v_field) IS DISTINCT FROM 'string' OR (p_body ->> v_field) !~ c_id_pattern THEN
            RAISE EXCEPTION 'request_operation: % must be 1-128 characters of [A-Za-z0-9._:-]', v_field USING ERRCODE = '22023';
        END IF;
    END LOOP;
    v_op := p_body ->> 'operationId';
    v_from := p_body ->> 'from';
    v_to := p_body ->> 'to';
    IF p_body ? 'amount' THEN
        IF jsonb_typeof(p_body -> 'amount') <> 'string' OR (p_body ->> 'amount') !~ c_amount_pattern
           OR (p_body ->> 'amount')::NUMERIC <= 0 THEN
            RAISE EXCEPTION 'request_operation: amount must be a string of decimal digits, positive' USING ERRCODE = '22023';
        END IF;
        v_amount := (p_body ->> 'amount')::BIGINT;
    END IF;
    IF p_body ? 'currency' THEN
        IF jsonb_typeof(p_body -> 'currency') <> 'string' OR (p_body ->> 'currency') !~ c_currency_pattern THEN
            RAISE EXCEPTION 'request_operation: currency must be three capital letters, like EUR' USING ERRCODE = '22023';
        END IF;
        v_currency := p_body ->> 'currency';
    END IF;

    IF v_kind = 'hold' THEN
        IF v_amount IS NULL THEN
            RAISE EXCEPTION 'request_operation: a hold needs an amount' USING ERRCODE = '22023';
        END IF;
        IF v_from = v_to THEN
            RAISE EXCEPTION 'request_operation: from and to are the same wallet' USING ERRCODE = '22023';
        END IF;
        IF (p_body ? 'expiresInMs') = (p_body ? 'expiresAt') THEN
            RAISE EXCEPTION 'request_operation: a hold needs exactly one of expiresInMs and expiresAt' USING ERRCODE = '22023';
        END IF;
        IF p_body ? 'expiresInMs' AND (jsonb_typeof(p_body -> 'expiresInMs') <> 'number'
            OR (p_body ->> 'expiresInMs') !~ '^[0-9]{1,12}$'
            OR (p_body ->> 'expiresInMs')::BIGINT NOT BETWEEN 1000 AND p_hold_expiry_max_ms) THEN
            RAISE EXCEPTION 'request_operation: expiresInMs must be a whole number from 1000 to %', p_hold_expiry_max_ms
                USING ERRCODE = '22023';
        END IF;
        IF p_body ? 'expiresAt' AND (jsonb_typeof(p_body -> 'expiresAt') <> 'string'
            OR (p_body ->> 'expiresAt') !~ c_time_pattern) THEN
            RAISE EXCEPTION 'request_operation: expiresAt must be a UTC time like 2026-12-02T10:00:00.000Z'
                USING ERRCODE = '22023';
        END IF;
        v_lines := ARRAY['v2', 'hold', v_from, v_to, v_amount::TEXT, coalesce(v_currency, ''),
                         coalesce(p_body ->> 'expiresInMs', ''), coalesce(p_body ->> 'expiresAt', '')];
    ELSIF v_kind = 'capture' THEN
        v_lines := ARRAY['v2', 'capture', v_from, p_body ->> 'hold', coalesce(v_amount::TEXT, '')];
    ELSIF v_kind = 'void' THEN
        v_lines := ARRAY['v2', 'void', v_from, p_body ->> 'hold'];
    ELSIF v_kind = 'refund' THEN
        v_lines := ARRAY['v2', 'refund', v_from, p_body ->> 'original', coalesce(v_amount::TEXT, '')];
    ELSE
        IF jsonb_typeof(p_body -> 'legs') IS DISTINCT FROM 'array' OR jsonb_array_length(p_body -> 'legs') NOT BETWEEN 2 AND 16 THEN
            RAISE EXCEPTION 'request_operation: legs must be an array of 2 to 16 {to, amount}' USING ERRCODE = '22023';
        END IF;
        FOR v_leg IN SELECT l FROM jsonb_array_elements(p_body -> 'legs') l LOOP
            IF jsonb_typeof(v_leg) <> 'object' OR EXISTS (SELECT 1 FROM jsonb_object_keys(v_leg) k WHERE k NOT IN ('to', 'amount'))
               OR jsonb_typeof(v_leg -> 'to') IS DISTINCT FROM 'string' OR (v_leg ->> 'to') !~ c_id_pattern
               OR jsonb_typeof(v_leg -> 'amount') IS DISTINCT FROM 'string' OR (v_leg ->> 'amount') !~ c_amount_pattern
               OR (v_leg ->> 'amount')::NUMERIC <= 0 THEN
                RAISE EXCEPTION 'request_operation: every leg must be {to, amount} with a wallet id and a positive amount'
                    USING ERRCODE = '22023';
            END IF;
            IF (v_leg ->> 'to') = v_from OR (v_leg ->> 'to') = ANY (v_leg_to) THEN
                RAISE EXCEPTION 'request_operation: a split pays each wallet once, never its source' USING ERRCODE = '22023';
            END IF;
            v_leg_to := v_leg_to || (v_leg ->> 'to');
            v_legs := v_legs || (v_leg ->> 'to') || ((v_leg ->> 'amount')::NUMERIC::TEXT);
            v_total := v_total + (v_leg ->> 'amount')::NUMERIC;
        END LOOP;
        IF v_total > 9223372036854775807 THEN
            RAISE EXCEPTION 'request_operation: the legs'' total is too large' USING ERRCODE = '22023';
        END IF;
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_operation(jsonb,bigint) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_operation(jsonb,bigint) FROM PUBLIC;

CREATE OR REPLACE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT, p_trace_context JSONB) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_answer TEXT;
BEGIN
    PERFORM request_trace_context_check(p_trace_context);
    v_answer := request_operation(p_body, p_hold_expiry_max_ms);
    IF v_answer = 'requested' AND p_trace_context IS NOT NULL THEN
        UPDATE transfer_requests q SET trace_context = p_trace_context
         WHERE q.operation_id = p_body ->> 'operationId' AND q.trace_context IS NULL;
    END IF;
    RETURN v_answer;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_operation(jsonb,bigint,jsonb) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_operation(jsonb,bigint,jsonb) FROM PUBLIC;
