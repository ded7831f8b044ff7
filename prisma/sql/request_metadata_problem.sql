-- What is wrong with an operation's `metadata`, or NULL when nothing is (or it is absent): an
-- object of at most 16 keys, each 1-64 characters of [A-Za-z0-9._:-], each value a string of at
-- most 256 characters without control characters, keys and values at most 2,048 bytes of UTF-8
-- in all (WIRE_LIMITS, src/ledger/wire-limits.ts). Part of request_operation_problem(), the
-- intake's one rule; the worker's validation says the same (test/intake/one-rule.test.ts).
CREATE OR REPLACE FUNCTION "request_metadata_problem"(p_metadata JSONB) RETURNS TEXT
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    c_keys_max       CONSTANT INTEGER := 16;
    c_key_pattern    CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,64}$';
    c_value_max      CONSTANT INTEGER := 256;
    c_bytes_max      CONSTANT INTEGER := 2048;
    v_bytes          INTEGER := 0;
    v_entry          RECORD;
BEGIN
    IF p_metadata IS NULL THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(p_metadata) <> 'object' THEN
        RETURN 'metadata must be an object of string values';
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(p_metadata)) > c_keys_max THEN
        RETURN format('metadata has more than %s keys', c_keys_max);
    END IF;
    FOR v_entry IN SELECT e.key, e.value FROM jsonb_each(p_metadata) e ORDER BY e.key COLLATE "C" LOOP
        IF v_entry.key !~ c_key_pattern THEN
            RETURN 'every metadata key must be 1-64 characters of [A-Za-z0-9._:-]';
        END IF;
        IF jsonb_typeof(v_entry.value) <> 'string' OR char_length(v_entry.value #>> '{}') > c_value_max
           OR (v_entry.value #>> '{}') ~ '[\x01-\x1f\x7f]' THEN
            RETURN format('metadata.%s must be a string of at most %s characters without control characters',
                          v_entry.key, c_value_max);
        END IF;
        v_bytes := v_bytes + octet_length(v_entry.key) + octet_length(v_entry.value #>> '{}');
    END LOOP;
    IF v_bytes > c_bytes_max THEN
        RETURN format('metadata is %s bytes of keys and values; at most %s', v_bytes, c_bytes_max);
    END IF;
    RETURN NULL;
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_metadata_problem"(JSONB) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_metadata_problem(jsonb) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
