-- What is wrong with a hold's expiry on the wire, or NULL when nothing is: exactly one of
-- expiresInMs (a whole number from 1000 to p_max, HOLD_EXPIRY_MAX_MS) and expiresAt (a real UTC
-- calendar instant, as the worker's round trip through Date reads it). Whether the instant lies
-- ahead is the decision's (expiry_out_of_range). Part of request_operation_problem(), the intake's
-- one rule.
CREATE OR REPLACE FUNCTION "request_hold_expiry_problem"(p_body JSONB, p_max BIGINT) RETURNS TEXT
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    c_time_pattern       CONSTANT TEXT := '^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,3})?Z$';
    c_expires_in_min_ms  CONSTANT BIGINT := 1000;
    v_parts    TEXT[];
BEGIN
    IF (p_body ? 'expiresInMs') = (p_body ? 'expiresAt') THEN
        RETURN 'a hold needs exactly one of expiresInMs and expiresAt';
    END IF;
    IF p_body ? 'expiresInMs' THEN
        IF jsonb_typeof(p_body -> 'expiresInMs') <> 'number' OR (p_body ->> 'expiresInMs') !~ '^[0-9]{1,12}$' THEN
            RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, p_max);
        END IF;
        IF (p_body ->> 'expiresInMs')::BIGINT NOT BETWEEN c_expires_in_min_ms AND p_max THEN
            RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, p_max);
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
    RETURN NULL;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_hold_expiry_problem"(JSONB, BIGINT) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_hold_expiry_problem(jsonb,bigint) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
