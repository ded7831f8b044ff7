-- What is wrong with an operation's wire object, or NULL when nothing is: the intake's one rule.
-- Its limits are WIRE_LIMITS (src/ledger/wire-limits.ts) at the widest a worker may be set:
-- amounts up to 10^18 - 1, a credit limit up to 10^17, a hold's expiresInMs from 1000 to the given maximum (or the largest
-- HOLD_EXPIRY_MAX_MS when it is NULL), expiresAt a real calendar instant, 2 to 16 legs, and on
-- every kind an optional metadata (request_metadata_problem()).
-- request_operation() and request_transfer() refuse with its answer (22023), and
-- test/intake/one-rule.test.ts runs one table of bodies through it and through the worker's
-- validation, body by body.
CREATE OR REPLACE FUNCTION "request_operation_problem"(p_body JSONB, p_hold_expiry_max_ms BIGINT) RETURNS TEXT
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    c_id_pattern         CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_amount_pattern     CONSTANT TEXT := '^[0-9]{1,19}$';
    c_amount_ceiling     CONSTANT NUMERIC := 999999999999999999;
    c_limit_ceiling      CONSTANT NUMERIC := 100000000000000000;
    c_reference_pattern  CONSTANT TEXT := '^[!-~]{1,128}$';
    c_currency_pattern   CONSTANT TEXT := '^[A-Z]{3}$';
    c_expires_in_min_ms  CONSTANT BIGINT := 1000;
    c_expiry_ceiling_ms  CONSTANT BIGINT := 31622400000;
    c_legs_min           CONSTANT INTEGER := 2;
    c_legs_max           CONSTANT INTEGER := 16;
    v_max      BIGINT := coalesce(p_hold_expiry_max_ms, c_expiry_ceiling_ms);
    v_kind     TEXT;
    v_allowed  TEXT[];
    v_extra    TEXT;
    v_field    TEXT;
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
        WHEN 'credit_limit' THEN ARRAY['kind', 'operationId', 'from', 'limit']
        WHEN 'deposit'  THEN ARRAY['kind', 'operationId', 'to', 'amount', 'currency', 'reference']
        WHEN 'withdrawal' THEN ARRAY['kind', 'operationId', 'from', 'amount', 'currency', 'reference']
        WHEN 'open_wallet' THEN ARRAY['kind', 'operationId', 'wallet', 'currency', 'creditLimit']
        WHEN 'freeze_wallet' THEN ARRAY['kind', 'operationId', 'wallet', 'credits']
        WHEN 'unfreeze_wallet' THEN ARRAY['kind', 'operationId', 'wallet']
        WHEN 'close_wallet' THEN ARRAY['kind', 'operationId', 'wallet']
    END;
    IF v_allowed IS NULL THEN
        RETURN 'kind must be one of transfer, hold, capture, void, refund, split, credit_limit, deposit, withdrawal, '
               'open_wallet, freeze_wallet, unfreeze_wallet, close_wallet';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed || 'metadata'::TEXT) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown field %s for a %s', left(v_extra, 40), v_kind);
    END IF;
    IF p_body ? 'metadata' AND request_metadata_problem(p_body -> 'metadata') IS NOT NULL THEN
        RETURN request_metadata_problem(p_body -> 'metadata');
    END IF;

    -- The ids each kind names: its own, the wallet it is decided on (a deposit's `to`, a wallet operation's `wallet`),
    -- and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', CASE WHEN v_kind = 'deposit' THEN 'to' WHEN v_kind LIKE '%\_wallet' THEN 'wallet'
                                                      ELSE 'from' END] || CASE v_kind WHEN 'transfer' THEN ARRAY['to']
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
    IF v_kind IN ('transfer', 'hold', 'deposit', 'withdrawal') AND NOT p_body ? 'amount' THEN
        RETURN format('a %s needs an amount', v_kind);
    END IF;
    IF p_body ? 'amount' AND NOT request_amount_valid(p_body -> 'amount') THEN
        RETURN format('amount must be a string of decimal digits, from 1 to %s', c_amount_ceiling);
    END IF;
    IF p_body ? 'currency' AND (jsonb_typeof(p_body -> 'currency') <> 'string'
                                OR (p_body ->> 'currency') !~ c_currency_pattern) THEN
        RETURN 'currency must be three capital letters, like EUR';
    END IF;

    IF v_kind IN ('deposit', 'withdrawal', 'open_wallet') AND NOT p_body ? 'currency' THEN
        RETURN format('a %s needs its currency', v_kind);
    END IF;
    IF v_kind = 'open_wallet' AND p_body ? 'creditLimit' AND (jsonb_typeof(p_body -> 'creditLimit') <> 'string'
       OR (p_body ->> 'creditLimit') !~ c_amount_pattern OR (p_body ->> 'creditLimit')::NUMERIC > c_limit_ceiling) THEN
        RETURN format('creditLimit must be a string of decimal digits, from 0 to %s', c_limit_ceiling);
    ELSIF v_kind = 'freeze_wallet' AND p_body ? 'credits' AND (p_body -> 'credits') NOT IN ('"allowed"', '"refused"') THEN
        RETURN 'credits must be "allowed" or "refused"';
    ELSIF v_kind IN ('deposit', 'withdrawal') THEN
        IF jsonb_typeof(p_body -> 'reference') IS DISTINCT FROM 'string' OR (p_body ->> 'reference') !~ c_reference_pattern THEN
            RETURN 'reference must be a string of 1-128 printable ASCII characters without spaces';
        END IF;
    ELSIF v_kind = 'credit_limit' THEN
        IF jsonb_typeof(p_body -> 'limit') IS DISTINCT FROM 'string' OR (p_body ->> 'limit') !~ c_amount_pattern
           OR (p_body ->> 'limit')::NUMERIC > c_limit_ceiling THEN
            RETURN format('limit must be a string of decimal digits, from 0 to %s', c_limit_ceiling);
        END IF;
    ELSIF v_kind = 'hold' THEN
        RETURN request_hold_expiry_problem(p_body, v_max);
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_operation_problem(jsonb,bigint) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
