-- The single decision: one transfer per call, with the same rules as decide_batch()
-- (decision_answer(), decision_stale(), decision_refusal(), decision_status_refusal()) and the same answers
-- (test/ledger/single-and-batch-agree.test.ts), in single-row statements: a batch of one pays the
-- batch's array handling, about twice the CPU (docs/reference/database.md). The bench's per-commit
-- anchors and the tests call it. Owner only. Every check always on: no parameter or branch
-- skips one (the negative controls' variant is derived from this file by harness/chaos/unsafe/).
CREATE OR REPLACE FUNCTION "apply_transfer"(
    p_operation_id      TEXT,
    p_request_hash      TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_currency          TEXT,
    p_fence             BIGINT,
    p_lease_id          UUID
) RETURNS TABLE (
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_existing   RECORD;
    v_wallet     RECORD;
    -- The two wallets' rows (currency NULL: no row), and their statuses.
    v_from_status   TEXT; v_to_status TEXT;
    v_from_currency TEXT;
    v_from_balance  BIGINT;
    v_from_limit    BIGINT;
    v_from_fence    BIGINT; v_from_lease UUID;
    v_to_currency   TEXT;
    v_to_balance    BIGINT; v_to_limit BIGINT;
    v_reason     TEXT := NULL;
    v_status     TEXT;
    v_fence_after BIGINT;
    v_rows       INTEGER;
    -- The intake's request of this operation, when this call closes one.
    v_req_hash     TEXT; v_req_from TEXT; v_req_to TEXT;
    v_req_amount   BIGINT;
    v_req_currency TEXT;
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_from IS NULL OR p_to IS NULL
       OR p_amount IS NULL OR p_amount <= 0 OR p_fence IS NULL OR p_fence < 1 OR p_lease_id IS NULL THEN
        RAISE EXCEPTION 'apply_transfer: ids, hash, wallets and lease must be given, amount and fence positive'
            USING ERRCODE = '22023';
    END IF;

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    SELECT t.request_hash, t.status, t.reason, t.fence INTO v_existing
      FROM transfers t WHERE t.operation_id = p_operation_id;
    IF FOUND THEN
        -- Decided before: an open request of the operation (requested through the intake while
        -- the other door decided it, or sent again after its decision) is decided too, and a
        -- request that asked for another body gets its conflict event.
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL
        RETURNING q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT
             INTO v_req_hash, v_req_from, v_req_to, v_req_amount, v_req_currency;
        IF FOUND AND v_req_hash <> v_existing.request_hash::TEXT THEN
            INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
            VALUES (p_operation_id, 'conflict', NULL, v_req_from, v_req_to, v_req_amount, v_req_currency);
        END IF;
        RETURN QUERY SELECT decision_answer(v_existing.request_hash::TEXT, p_request_hash), v_existing.status, v_existing.reason, v_existing.fence, NULL::BIGINT;
        RETURN;
    END IF;

    FOR v_wallet IN
        SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease, w.credit_limit, w.status
          FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE
    LOOP
        IF v_wallet.id = p_from THEN
            v_from_currency := v_wallet.currency; v_from_balance := v_wallet.balance; v_from_limit := v_wallet.credit_limit;
            v_from_fence := v_wallet.last_fence; v_from_lease := v_wallet.last_lease; v_from_status := v_wallet.status;
        END IF;
        IF v_wallet.id = p_to THEN v_to_currency := v_wallet.currency; v_to_balance := v_wallet.balance;
                                   v_to_limit := v_wallet.credit_limit; v_to_status := v_wallet.status; END IF;
    END LOOP;

    IF decision_stale(v_from_fence, v_from_lease, p_fence, p_lease_id) THEN
        RETURN QUERY SELECT 'stale_fence'::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, v_from_fence;
        RETURN;
    END IF;
    v_reason := decision_refusal(p_from, p_to, v_from_currency, v_to_currency, p_currency,
                                 v_from_balance + v_from_limit, p_amount);
    IF v_reason IS NULL AND (v_from_status <> 'open' OR v_to_status <> 'open') THEN
        v_reason := decision_status_refusal(ARRAY[p_from, p_to], ARRAY[-p_amount, p_amount], ARRAY[p_from, p_to],
                                            ARRAY[v_from_status, v_to_status]);
    END IF;
    v_status := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;

    IF v_from_currency IS NOT NULL THEN
        -- Every decision under our token raises the source's fence, refusals included; the lease
        -- that holds the fence is recorded with it. An applied transfer moves both balances in
        -- the same statement: one row-update pass, one evaluation of the wallets' CHECK
        -- constraints (which PostgreSQL compiles afresh for every statement that writes a row).
        v_fence_after := GREATEST(v_from_fence, p_fence);
        IF v_reason IS NULL THEN
            UPDATE wallets
               SET last_fence = CASE WHEN id = p_from THEN v_fence_after ELSE last_fence END,
                   last_lease = CASE WHEN id = p_from AND p_fence >= v_from_fence THEN p_lease_id ELSE last_lease END,
                   balance = balance + CASE WHEN id = p_from THEN -p_amount ELSE p_amount END,
                   updated_at = CURRENT_TIMESTAMP
             WHERE id IN (p_from, p_to);
            GET DIAGNOSTICS v_rows = ROW_COUNT;
            IF v_rows <> 2 THEN
                RAISE EXCEPTION 'apply_transfer: transfer % touched % wallet rows, not 2', p_operation_id, v_rows
                    USING ERRCODE = 'XX000';
            END IF;
        ELSE
            UPDATE wallets
               SET last_fence = v_fence_after,
                   last_lease = CASE WHEN p_fence >= v_from_fence THEN p_lease_id ELSE last_lease END,
                   updated_at = CURRENT_TIMESTAMP
             WHERE id = p_from;
        END IF;
    END IF;

    IF v_reason IS NULL THEN
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, lease, created_at)
        VALUES (p_operation_id, p_from, 'debit', -p_amount, v_from_balance - p_amount, v_from_limit, p_fence, p_lease_id, clock_timestamp()),
               (p_operation_id, p_to, 'credit', p_amount, v_to_balance + p_amount, v_to_limit, p_fence, p_lease_id, clock_timestamp());
    END IF;

    -- The record, then what it decides (as in the batch): the intake's request marked decided and
    -- one outcome event, only when the record was inserted. Three single-row statements: cheaper
    -- here than the batch's one statement over arrays.
    -- The record is a plain INSERT: under the operation's advisory lock the SELECT above
    -- found no row, so a row here now was written by someone who skipped that lock, and the
    -- unique violation rolls back the money this call moved. ON CONFLICT DO NOTHING would have
    -- kept it, unrecorded, and costs a speculative insertion (its confirm record, and a second
    -- index probe).
    INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                           status, reason, fence, lease)
    VALUES (p_operation_id, p_request_hash, p_from, p_to, p_amount, p_currency, v_status, v_reason, p_fence, p_lease_id);
    IF FOUND THEN
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL
        RETURNING q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT
             INTO v_req_hash, v_req_from, v_req_to, v_req_amount, v_req_currency;
        INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
        VALUES (p_operation_id, v_status, v_reason, p_from, p_to, p_amount, p_currency);
        -- Decided here with the body this call carries (a job sent to BullMQ straight): a request
        -- of the operation with another body is answered conflict, in the feed.
        IF v_req_hash IS NOT NULL AND v_req_hash <> p_request_hash THEN
            INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
            VALUES (p_operation_id, 'conflict', NULL, v_req_from, v_req_to, v_req_amount, v_req_currency);
        END IF;
    END IF;

    RETURN QUERY SELECT v_status, v_status, v_reason, p_fence, v_fence_after;
END;
$$;

REVOKE EXECUTE ON FUNCTION apply_transfer(text,text,text,text,bigint,text,bigint,uuid) FROM PUBLIC;
