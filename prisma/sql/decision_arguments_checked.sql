-- The shape of a batch decision's call, refused whole (22023) before any lock: 1-1,000 operations
-- (TRANSFER_BATCH_MAX's upper limit, src/config/config.ts), parallel arrays of that length, every
-- id, hash, source, fence and lease given, amounts and fences positive (a credit limit, which a
-- credit_limit and an open_wallet carry in p_amounts, from 0 to 10^17, the wallets' CHECK; an
-- open_wallet's currency given, a freeze_wallet's credits, in p_refs, `allowed` or `refused`), and
-- each element a whole operation of its kind. The worker never sends another; a direct caller learns what it got
-- wrong. Answers the number of operations.
CREATE OR REPLACE FUNCTION "decision_arguments_checked"(
    p_kinds              TEXT[],
    p_operation_ids      TEXT[],
    p_request_hashes     TEXT[],
    p_froms              TEXT[],
    p_tos                TEXT[],
    p_amounts            BIGINT[],
    p_currencies         TEXT[],
    p_refs               TEXT[],
    p_expires_in_ms      BIGINT[],
    p_expires_at         TIMESTAMPTZ[],
    p_legs               JSONB[],
    p_fences             BIGINT[],
    p_lease_ids          UUID[],
    p_hold_expiry_max_ms BIGINT
) RETURNS INTEGER
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    c_batch_max CONSTANT INTEGER := 1000;
    c_limit_max CONSTANT BIGINT := 100000000000000000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_kind      TEXT;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'decision: between 1 and % operations per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_kinds), -1) <> v_n OR coalesce(cardinality(p_request_hashes), -1) <> v_n
       OR coalesce(cardinality(p_froms), -1) <> v_n OR coalesce(cardinality(p_tos), -1) <> v_n
       OR coalesce(cardinality(p_amounts), -1) <> v_n OR coalesce(cardinality(p_currencies), -1) <> v_n
       OR coalesce(cardinality(p_refs), -1) <> v_n OR coalesce(cardinality(p_expires_in_ms), -1) <> v_n
       OR coalesce(cardinality(p_expires_at), -1) <> v_n OR coalesce(cardinality(p_legs), -1) <> v_n
       OR coalesce(cardinality(p_fences), -1) <> v_n OR coalesce(cardinality(p_lease_ids), -1) <> v_n THEN
        RAISE EXCEPTION 'decision: the arrays must all have % elements', v_n USING ERRCODE = '22023';
    END IF;
    IF array_position(p_operation_ids, NULL) IS NOT NULL OR array_position(p_request_hashes, NULL) IS NOT NULL
       OR array_position(p_froms, NULL) IS NOT NULL OR array_position(p_fences, NULL) IS NOT NULL
       OR array_position(p_lease_ids, NULL) IS NOT NULL OR p_hold_expiry_max_ms IS NULL OR p_hold_expiry_max_ms < 1
       OR (0 <= ALL (p_amounts)) IS FALSE OR (1 <= ALL (p_fences)) IS FALSE THEN
        RAISE EXCEPTION 'decision: ids, hashes, sources and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;
    IF 'transfer' = ALL (p_kinds) AND array_position(p_tos, NULL) IS NULL AND array_position(p_amounts, NULL) IS NULL
       AND 0 < ALL (p_amounts) THEN
        RETURN v_n;
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i];
        IF v_kind IS NULL
           OR v_kind NOT IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal',
                             'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet')
           OR (v_kind NOT IN ('credit_limit', 'open_wallet') AND p_amounts[v_i] = 0)
           OR (v_kind IN ('credit_limit', 'open_wallet') AND (p_amounts[v_i] IS NULL OR p_amounts[v_i] > c_limit_max))
           OR (v_kind = 'open_wallet' AND p_currencies[v_i] IS NULL)
           OR (v_kind = 'freeze_wallet' AND p_refs[v_i] IS DISTINCT FROM 'allowed' AND p_refs[v_i] IS DISTINCT FROM 'refused')
           OR (v_kind IN ('transfer', 'hold') AND (p_tos[v_i] IS NULL OR p_amounts[v_i] IS NULL))
           OR (v_kind = 'hold' AND (p_expires_in_ms[v_i] IS NULL) = (p_expires_at[v_i] IS NULL))
           OR (v_kind IN ('capture', 'void', 'refund') AND p_refs[v_i] IS NULL)
           OR (v_kind IN ('deposit', 'withdrawal')
               AND (p_amounts[v_i] IS NULL OR p_currencies[v_i] IS NULL OR p_refs[v_i] IS NULL))
           OR (v_kind = 'split' AND (jsonb_typeof(p_legs[v_i]) IS DISTINCT FROM 'array'
                                     OR jsonb_array_length(p_legs[v_i]) NOT BETWEEN 2 AND 16)) THEN
            RAISE EXCEPTION 'decision: element % is not a whole operation of its kind', v_i
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    RETURN v_n;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_arguments_checked(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;
