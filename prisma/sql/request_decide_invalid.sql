-- The terminal end of a stored request that no worker can decide: what the worker calls for an
-- intake request it refuses as invalid. It takes no body from its caller: under the operation's
-- advisory lock it checks the stored request's own body with request_operation_problem() at the
-- widest limits, and only when no worker could decide it records it decided as rejected
-- `invalid_request` (a transfers record, decided_at on the request, a 'rejected' event), once. A
-- body some worker could decide (this worker's TRANSFER_AMOUNT_MAX is merely lower) is left open,
-- to be given up and redriven once the settings agree.
-- Answers whether it recorded that now: false when the operation is decided already, has no open
-- request, or its stored body is one some worker could decide.
CREATE OR REPLACE FUNCTION "request_decide_invalid"(p_operation_id TEXT) RETURNS BOOLEAN
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
    EXECUTE format('ALTER FUNCTION %I.request_decide_invalid(text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    -- Who decides transfers may end a request no worker can decide (npm run db:worker-role grants
    -- it to new worker roles; this reaches the ones that exist).
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION request_decide_invalid(text) TO %s', v_grantee);
    END LOOP;
END
$$;
