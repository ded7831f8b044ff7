-- One decision core (issue 41, item 2): decide_batch() decides every kind, each rule written once
-- in a function of its own that every kind and both entries ask; transfers_decide_batch() and
-- payments_decide_batch() are gone.
--
-- Written by `npm run db:new-migration` from prisma/sql/: apply_payments.sql, apply_transfer.sql,
-- apply_transfers.sql, decide_batch.sql, decision_answer.sql, decision_arguments_checked.sql,
-- decision_hold_ended.sql, decision_moved.sql, decision_operations_locked.sql,
-- decision_recorded.sql, decision_records_found.sql, decision_refunded.sql, decision_refusal.sql,
-- decision_split.sql, decision_stale.sql, decision_state_read.sql, decision_verdict.sql,
-- decision_wallets_locked.sql, decision_written.sql; drops function payments_decide_batch(…),
-- function transfers_decide_batch(…).

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

DROP FUNCTION payments_decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint);
DROP FUNCTION transfers_decide_batch(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]);
-- prisma/sql/apply_payments.sql
-- The worker's decision of payments: decide_batch() with every check, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path
-- pinned; `npm run db:worker-role` grants it. PL/pgSQL, as apply_transfers(): a cached plan.
CREATE OR REPLACE FUNCTION "apply_payments"(
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
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    -- Raises 22023 for a ledger-account id, before any lock.
    v_ok BOOLEAN := decision_wallet_ids_checked(p_froms || p_tos, p_legs);
BEGIN
    RETURN QUERY
    SELECT * FROM decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts, p_currencies, p_refs,
        p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms);
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/apply_transfer.sql
-- The single decision: one transfer per call, with the same rules as decide_batch()
-- (decision_answer(), decision_stale(), decision_refusal()) and the same answers
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
    -- The two wallets' rows (currency NULL: no row).
    v_from_currency TEXT;
    v_from_balance  BIGINT;
    v_from_fence    BIGINT;
    v_from_lease    UUID;
    v_to_currency   TEXT;
    v_reason     TEXT := NULL;
    v_status     TEXT;
    v_fence_after BIGINT;
    v_rows       INTEGER;
    -- The intake's request of this operation, when this call closes one.
    v_req_hash     TEXT;
    v_req_from     TEXT;
    v_req_to       TEXT;
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
        SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease
          FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE
    LOOP
        IF v_wallet.id = p_from THEN
            v_from_currency := v_wallet.currency; v_from_balance := v_wallet.balance;
            v_from_fence := v_wallet.last_fence; v_from_lease := v_wallet.last_lease;
        END IF;
        IF v_wallet.id = p_to THEN v_to_currency := v_wallet.currency; END IF;
    END LOOP;

    IF decision_stale(v_from_fence, v_from_lease, p_fence, p_lease_id) THEN
        RETURN QUERY SELECT 'stale_fence'::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, v_from_fence;
        RETURN;
    END IF;
    v_reason := decision_refusal(p_from, p_to, v_from_currency, v_to_currency, p_currency, v_from_balance, p_amount);
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
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease) VALUES
            (p_operation_id, p_from, 'debit', -p_amount, p_fence, p_lease_id),
            (p_operation_id, p_to, 'credit', p_amount, p_fence, p_lease_id);
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

-- prisma/sql/apply_transfers.sql
-- The worker's decision of transfers: decide_batch(), every element a transfer, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path pinned;
-- `npm run db:worker-role` grants it. PL/pgSQL, not SQL: its plan is cached, where an SQL
-- function's body is parsed and planned at every call (`npm run bench:decision-cost`).
CREATE OR REPLACE FUNCTION "apply_transfers"(
    p_operation_ids  TEXT[],
    p_request_hashes TEXT[],
    p_froms          TEXT[],
    p_tos            TEXT[],
    p_amounts        BIGINT[],
    p_currencies     TEXT[],
    p_fences         BIGINT[],
    p_lease_ids      UUID[]
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
AS $$
DECLARE
    v_none TEXT[] := array_fill(NULL::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]);
    -- Raises 22023 for a ledger-account id, before any lock.
    v_ok   BOOLEAN := decision_wallet_ids_checked(p_froms || p_tos);
BEGIN
    RETURN QUERY
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM decide_batch(array_fill('transfer'::TEXT, ARRAY[coalesce(cardinality(p_operation_ids), 0)]), p_operation_ids,
                        p_request_hashes, p_froms, p_tos, p_amounts, p_currencies, v_none, v_none::BIGINT[],
                        v_none::TIMESTAMPTZ[], v_none::JSONB[], p_fences, p_lease_ids, 1) b;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) FROM PUBLIC;

-- prisma/sql/decide_batch.sql
-- The one decision: 1-1,000 operations of any kind (transfer, hold, capture, void, refund, split)
-- given as parallel arrays, decided in order as if each committed before the next. Every lock up
-- front in one order (decision_operations_locked(), decision_state_read()), then per operation:
-- its record answers a duplicate or a conflict (decision_answer()), the debited wallet's fence and
-- lease (decision_stale()), the kind's checks and postings (decision_moved() for a transfer and a
-- hold, decision_verdict() for the kinds that name another operation or have legs), the postings
-- applied to the balances (a `$held:<wallet>` posting to its held money) and the ledger (a release
-- at expiry recorded as the hold's own, unfenced), the fence advanced, and the record kept: a later
-- twin in the batch answers from it, and a later operation naming it finds it as it would find it
-- committed. Then one write per table (decision_written(), decision_recorded()). Every check always
-- on: no parameter or branch skips one (the negative controls' variants are derived from these
-- files by harness/chaos/unsafe/).
--
-- Every statement reaches its rows by key, a few dozen at a time. On a small or freshly loaded
-- table the planner prefers a sequential scan that tests each row against the whole id array and
-- a hash join for the write-back (EXPLAIN in `npm run bench:explain`); index lookups are right at
-- any table size. The plans are generic: a custom plan per call costs a planning per statement.
CREATE OR REPLACE FUNCTION "decide_batch"(
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
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE plpgsql
VOLATILE
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n        INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_names    BOOLEAN := 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds);
    v_now TIMESTAMPTZ; v_latest TIMESTAMPTZ;
    -- The locked wallets, by id, as the batch's decisions leave them.
    w_id TEXT[]; w_currency TEXT[]; w_balance BIGINT[]; w_held BIGINT[]; w_fence BIGINT[]; w_lease UUID[];
    w_touched  BOOLEAN[];
    -- The holds named (h_read of them), then those placed here; which of the named ended here.
    h_id TEXT[]; h holds[]; h_read INTEGER; h_ended BOOLEAN[];
    -- Originals named (records read, then those decided here when the batch names any), split legs
    -- (s_read read, then those placed here), what was refunded per original and payer.
    o_id TEXT[]; o transfers[]; o_count INTEGER; s split_legs[]; s_read INTEGER; f_key TEXT[]; f_sum BIGINT[];
    -- Records found, then decided here (r_element: the element; NULL for a record found).
    r_op TEXT[]; r_hash TEXT[]; r_status TEXT[]; r_reason TEXT[]; r_fence BIGINT[]; r_element INTEGER[]; r_count INTEGER;
    -- What each element decided here records (status NULL: answered from a record, or stale).
    e_status TEXT[] := array_fill(NULL::TEXT, ARRAY[v_n]); e_reason TEXT[] := e_status; e_to TEXT[] := e_status;
    e_amount BIGINT[] := array_fill(NULL::BIGINT, ARRAY[v_n]); e_detail JSONB[] := array_fill(NULL::JSONB, ARRAY[v_n]);
    -- Ledger entries in decision order; holds released at expiry; requests to close.
    l_op TEXT[] := '{}'; l_wallet TEXT[] := '{}'; l_amount BIGINT[] := '{}'; l_fence BIGINT[] := '{}'; l_lease UUID[] := '{}';
    l_count INTEGER := 0; x_hold TEXT[] := '{}'; d_op TEXT[] := '{}'; d_hash TEXT[] := '{}';
    -- One operation, and its kind's verdict.
    v_i INTEGER; v_j INTEGER; v_k INTEGER; v_f INTEGER; v_w INTEGER; v_fi INTEGER; v_ti INTEGER;
    v_kind TEXT; v_op TEXT; v_from TEXT; v_ref TEXT; v_fence BIGINT; v_lease UUID; v_entries TEXT; v_wallet TEXT;
    v RECORD;
BEGIN
    v_n := decision_arguments_checked(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms);
    v_j := decision_operations_locked(p_operation_ids);
    v := decision_state_read(p_kinds, p_froms, p_tos, p_refs, p_legs);
    w_id := v.w_id; w_currency := v.w_currency; w_balance := v.w_balance; w_held := v.w_held; w_fence := v.w_fence;
    w_lease := v.w_lease; h_id := v.h_id; h := v.h; o_id := v.o_id; o := v.o; s := v.s; f_key := v.f_key; f_sum := v.f_sum;
    v := decision_records_found(p_operation_ids);
    r_op := v.r_op; r_hash := v.r_hash; r_status := v.r_status; r_reason := v.r_reason; r_fence := v.r_fence;
    w_touched := array_fill(FALSE, ARRAY[cardinality(w_id)]);
    h_read := cardinality(h); h_ended := array_fill(FALSE, ARRAY[h_read]); s_read := cardinality(s);
    o_count := cardinality(o); r_count := cardinality(r_op); r_element := array_fill(NULL::INTEGER, ARRAY[r_count]);
    -- Expiries are judged once every lock is held: a capture that waited past its hold's expiry is refused.
    v_now := clock_timestamp();
    v_latest := v_now + make_interval(secs => p_hold_expiry_max_ms / 1000.0);

    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i]; v_op := p_operation_ids[v_i]; v_from := p_froms[v_i]; v_ref := p_refs[v_i];
        v_fence := p_fences[v_i]; v_lease := p_lease_ids[v_i]; ord := v_i;
        v_k := array_position(r_op, v_op);
        IF v_k IS NOT NULL THEN
            -- Decided before this batch: the operation's open request is closed with it.
            IF r_element[v_k] IS NULL THEN d_op := d_op || v_op; d_hash := d_hash || r_hash[v_k]; END IF;
            outcome := decision_answer(r_hash[v_k], p_request_hashes[v_i]);
            status := r_status[v_k]; reason := r_reason[v_k]; fence := r_fence[v_k]; wallet_fence := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        v_fi := array_position(w_id, v_from);
        IF decision_stale(w_fence[v_fi], w_lease[v_fi], v_fence, v_lease) THEN
            outcome := 'stale_fence'; status := NULL; reason := NULL; fence := NULL; wallet_fence := w_fence[v_fi];
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_ti := array_position(w_id, p_tos[v_i]);
        IF v_kind IN ('transfer', 'hold') THEN
            v := decision_moved(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], w_currency[v_fi],
                     w_currency[v_ti], w_balance[v_fi],
                     coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0)), v_now, v_latest);
        ELSE
            v := decision_verdict(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], v_ref, p_legs[v_i],
                     v_now, w_id, w_currency, w_balance, h_id, h, o_id, o, s, f_key, f_sum);
        END IF;
        v_entries := CASE WHEN v.expiry_released THEN '$expiry:' || v_ref ELSE v_op END;
        FOR v_j IN 1 .. coalesce(cardinality(v.wallets), 0) LOOP
            v_wallet := v.wallets[v_j];
            v_w := CASE WHEN v_wallet IN (v_from, '$held:' || v_from) THEN v_fi WHEN v_wallet = p_tos[v_i] THEN v_ti
                        ELSE array_position(w_id, v_wallet) END;
            IF v_wallet LIKE '$held:%' THEN w_held[v_w] := w_held[v_w] + v.amounts[v_j];
            ELSE w_balance[v_w] := w_balance[v_w] + v.amounts[v_j]; END IF;
            w_touched[v_w] := TRUE;
            l_count := l_count + 1;
            l_op[l_count] := v_entries; l_wallet[l_count] := v_wallet; l_amount[l_count] := v.amounts[v_j];
            l_fence[l_count] := CASE WHEN v.expiry_released THEN NULL ELSE v_fence END;
            l_lease[l_count] := CASE WHEN v.expiry_released THEN NULL ELSE v_lease END;
        END LOOP;
        IF v_kind = 'hold' AND v.reason IS NULL THEN
            h_id := h_id || v_op; h := h || v.hold;
        ELSIF v_kind IN ('capture', 'void') AND (v.reason IS NULL OR v.expiry_released) THEN
            v_k := array_position(h_id, v_ref);
            h[v_k] := v.hold;
            h_ended[v_k] := v_k <= h_read;
            IF v.expiry_released THEN x_hold := x_hold || v_ref; END IF;
        ELSIF v_kind = 'refund' AND v.reason IS NULL THEN
            v_f := array_position(f_key, v_ref || E'\n' || v_from);
            IF v_f IS NULL THEN f_key := f_key || (v_ref || E'\n' || v_from); f_sum := f_sum || v.amount;
            ELSE f_sum[v_f] := f_sum[v_f] + v.amount; END IF;
        ELSIF v_kind = 'split' AND v.reason IS NULL THEN
            FOR v_j IN 2 .. cardinality(v.wallets) LOOP
                s := s || ROW(v_op, v_j - 1, v.wallets[v_j], v.amounts[v_j])::split_legs;
            END LOOP;
        END IF;
        IF v_fi IS NOT NULL THEN
            -- Every decision under our token raises the source's fence, refusals included.
            IF v_fence >= w_fence[v_fi] THEN w_fence[v_fi] := v_fence; w_lease[v_fi] := v_lease; END IF;
            w_touched[v_fi] := TRUE;
        END IF;

        status := CASE WHEN v.reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_count := r_count + 1; r_op[r_count] := v_op; r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := status; r_reason[r_count] := v.reason; r_fence[r_count] := v_fence; r_element[r_count] := v_i;
        e_status[v_i] := status; e_reason[v_i] := v.reason; e_to[v_i] := v.credited; e_amount[v_i] := v.amount;
        e_detail[v_i] := v.detail;
        IF v_names THEN
            o_count := o_count + 1; o_id[o_count] := v_op;
            o[o_count] := ROW(v_op, p_request_hashes[v_i], v_from, v.credited, v.amount, p_currencies[v_i], status,
                              v.reason, v_fence, NULL, v_lease, v_kind, NULL)::transfers;
        END IF;
        outcome := status; reason := v.reason; fence := v_fence; wallet_fence := w_fence[v_fi];
        RETURN NEXT;
    END LOOP;

    v_j := decision_written(w_id, w_balance, w_held, w_fence, w_lease, w_touched, l_op, l_wallet, l_amount, l_fence,
                             l_lease, h, h_read, h_ended, s, s_read);
    v_j := decision_recorded(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_currencies, p_refs, p_fences,
                              p_lease_ids, e_status, e_reason, e_to, e_amount, e_detail, x_hold, d_op, d_hash);
END;
$$;

REVOKE EXECUTE ON FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/decision_answer.sql
-- The answer to an operation that already has a record: `duplicate` when the request carries the
-- body the record was decided from (the same request hash), `conflict` when it carries another.
-- The caller returns the record's own status, reason and fence with it. One rule for the single
-- and the batch decision; an expression the planner inlines into its caller.
CREATE OR REPLACE FUNCTION "decision_answer"(p_record_hash TEXT, p_request_hash TEXT) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN p_record_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END
$$;

REVOKE EXECUTE ON FUNCTION decision_answer(text,text) FROM PUBLIC;

-- prisma/sql/decision_arguments_checked.sql
-- The shape of a batch decision's call, refused whole (22023) before any lock: 1-1,000 operations
-- (TRANSFER_BATCH_MAX's upper limit, src/config/config.ts), parallel arrays of that length, every
-- id, hash, source, fence and lease given, amounts and fences positive, and each element a whole
-- operation of its kind. The worker never sends another; a direct caller learns what it got wrong.
-- Answers the number of operations.
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
       OR (0 < ALL (p_amounts)) IS FALSE OR (1 <= ALL (p_fences)) IS FALSE THEN
        RAISE EXCEPTION 'decision: ids, hashes, sources and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;
    IF 'transfer' = ALL (p_kinds) AND array_position(p_tos, NULL) IS NULL AND array_position(p_amounts, NULL) IS NULL THEN
        RETURN v_n;
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i];
        IF v_kind IS NULL OR v_kind NOT IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split')
           OR (v_kind IN ('transfer', 'hold') AND (p_tos[v_i] IS NULL OR p_amounts[v_i] IS NULL))
           OR (v_kind = 'hold' AND (p_expires_in_ms[v_i] IS NULL) = (p_expires_at[v_i] IS NULL))
           OR (v_kind IN ('capture', 'void', 'refund') AND p_refs[v_i] IS NULL)
           OR (v_kind = 'split' AND (jsonb_typeof(p_legs[v_i]) IS DISTINCT FROM 'array'
                                     OR jsonb_array_length(p_legs[v_i]) NOT BETWEEN 2 AND 16)) THEN
            RAISE EXCEPTION 'decision: element % is not a whole transfer, hold, capture, void, refund or split', v_i
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
    RETURN v_n;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_arguments_checked(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/decision_hold_ended.sql
-- A capture's or a void's checks (docs/reference/outcomes.md, in this order) and how the hold ends:
-- the whole held amount leaves the source's holding account, the captured part to the hold's
-- payee, the rest back to the source; a void gives it all back. A hold past its expiry and not
-- swept yet is released here, once, as the sweep would (the answer is still hold_expired; the
-- postings, with expiry_released, are the release's own, `$expiry:<hold>`, unfenced). p_hold is
-- the hold's row (NULL when it has none); p_original its record, which tells a refused hold from
-- no hold at all.
CREATE OR REPLACE FUNCTION "decision_hold_ended"(
    p_kind              TEXT,
    p_op                TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_hold              holds,
    p_original          transfers,
    p_now               TIMESTAMPTZ,
    OUT reason          TEXT,
    OUT amount          BIGINT,
    OUT credited        TEXT,
    OUT detail          JSONB,
    OUT wallets         TEXT[],
    OUT amounts         BIGINT[],
    OUT hold            holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_rest BIGINT;
BEGIN
    amount := p_amount;
    credited := CASE WHEN p_kind = 'void' THEN p_from ELSE p_to END;
    hold := p_hold;
    expiry_released := FALSE;
    IF p_hold.hold_id IS NULL AND p_original.kind = 'hold' AND p_original.status = 'rejected' THEN
        reason := 'hold_rejected';
    ELSIF p_hold.hold_id IS NULL THEN
        reason := 'hold_not_found';
    ELSIF p_hold.from_wallet <> p_from THEN
        reason := 'wallet_mismatch';
    ELSIF p_hold.state = 'captured' THEN
        reason := 'hold_already_captured';
    ELSIF p_hold.state = 'voided' THEN
        reason := 'hold_already_voided';
    ELSIF p_hold.state = 'expired' OR p_hold.expires_at <= p_now THEN
        reason := 'hold_expired';
        IF p_hold.state = 'active' THEN
            wallets := ARRAY['$held:' || p_hold.from_wallet, p_hold.from_wallet];
            amounts := ARRAY[-p_hold.amount, p_hold.amount];
            hold.state := 'expired';
            hold.released := p_hold.amount;
            hold.ended_at := p_now;
            expiry_released := TRUE;
        END IF;
    ELSIF p_kind = 'capture' AND coalesce(p_amount, p_hold.amount) > p_hold.amount THEN
        reason := 'exceeds_hold_amount';
    ELSE
        amount := CASE WHEN p_kind = 'capture' THEN coalesce(p_amount, p_hold.amount) ELSE p_hold.amount END;
        v_rest := p_hold.amount - CASE WHEN p_kind = 'capture' THEN amount ELSE 0 END;
        wallets := ARRAY['$held:' || p_from];
        amounts := ARRAY[-p_hold.amount];
        IF p_kind = 'capture' THEN
            credited := p_hold.to_wallet;
            wallets := wallets || p_hold.to_wallet;
            amounts := amounts || amount;
            detail := jsonb_build_object('released', v_rest::TEXT);
        END IF;
        IF v_rest > 0 THEN
            wallets := wallets || p_from;
            amounts := amounts || v_rest;
        END IF;
        hold.state := CASE WHEN p_kind = 'capture' THEN 'captured' ELSE 'voided' END;
        hold.captured := CASE WHEN p_kind = 'capture' THEN amount ELSE 0 END;
        hold.released := v_rest;
        hold.ended_by := p_op;
        hold.ended_at := p_now;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_hold_ended(text,text,text,text,bigint,holds,transfers,timestamp with time zone) FROM PUBLIC;

-- prisma/sql/decision_moved.sql
-- A transfer's or a hold's checks and what it moves: a transfer debits its source and credits its
-- payee; a hold moves the amount from its source's balance into the source's holding account
-- (`$held:<source>`, the `held` column of its row) until a capture, a void or its expiry ends it.
-- A hold's expiry (p_expires) must fall after now and no later than p_latest (expiry_out_of_range,
-- checked before the funds). Postings: parallel wallets and signed amounts; the new hold's row.
CREATE OR REPLACE FUNCTION "decision_moved"(
    p_kind          TEXT,
    p_op            TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_from_currency TEXT,
    p_to_currency   TEXT,
    p_balance       BIGINT,
    p_expires       TIMESTAMPTZ,
    p_now           TIMESTAMPTZ,
    p_latest        TIMESTAMPTZ,
    OUT reason      TEXT,
    OUT amount      BIGINT,
    OUT credited    TEXT,
    OUT detail      JSONB,
    OUT wallets     TEXT[],
    OUT amounts     BIGINT[],
    OUT hold        holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    expiry_released := FALSE;
    amount := p_amount;
    credited := p_to;
    IF p_kind = 'transfer' THEN
        reason := decision_refusal(p_from, p_to, p_from_currency, p_to_currency, p_currency, p_balance, p_amount);
        IF reason IS NULL THEN
            wallets := ARRAY[p_from, p_to];
            amounts := ARRAY[-p_amount, p_amount];
        END IF;
        RETURN;
    END IF;
    reason := decision_refusal(p_from, p_to, p_from_currency, p_to_currency, p_currency, p_balance, p_amount,
                               CASE WHEN p_expires <= p_now OR p_expires > p_latest THEN 'expiry_out_of_range' END);
    IF reason IS NULL THEN
        wallets := ARRAY[p_from, '$held:' || p_from];
        amounts := ARRAY[-p_amount, p_amount];
        hold := ROW(p_op, p_from, p_to, p_amount, p_currency, p_expires, 'active', 0, 0, NULL, NULL, NULL)::holds;
        detail := jsonb_build_object('expiresAt', to_char(p_expires AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_moved(text,text,text,text,bigint,text,text,text,bigint,timestamp with time zone,timestamp with time zone,timestamp with time zone) FROM PUBLIC;

-- prisma/sql/decision_operations_locked.sql
-- Every operation's advisory lock, taken in one global order (by key): twins across batches
-- queue there instead of racing into a unique violation, and two batches that cross wait for
-- each other but never deadlock. The intake takes the same keys in the same order
-- (src/intake/intake.ts). Answers how many locks it took.
CREATE OR REPLACE FUNCTION "decision_operations_locked"(p_operation_ids TEXT[]) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_key   BIGINT;
    v_count INTEGER := 0;
BEGIN
    FOR v_key IN
        SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(v_key);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_operations_locked(text[]) FROM PUBLIC;

-- prisma/sql/decision_recorded.sql
-- The records of a batch's decisions, and in the same statement what they decide: the intake's
-- request (when the operation came through it) is marked decided, and one outcome event per record
-- joins the feed's pending events (a request that asked for another body gets a conflict event).
-- Element i was decided here when p_statuses[i] is set; what it recorded as its payee and amount is
-- the decision's (p_credited, p_recorded_amounts). Then an `expired` event for each hold released
-- at its expiry here (p_expired), and the requests of operations answered from a record decided
-- before this batch (p_closed_ops, with that record's hash) are closed the same way. Answers how
-- many records' events it appended.
--
-- The records are a plain INSERT: every operation of the batch is under its advisory lock, none had
-- a record when the locks were held, and a twin inside the batch answered from the record decided
-- before it, so each row inserted here is new. A row that is there now was written by someone who
-- skipped the lock: the unique violation rolls back the whole batch, the money it moved included.
-- ON CONFLICT DO NOTHING would have kept that money unrecorded, and pays a speculative insertion
-- per record.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_recorded"(
    p_kinds            TEXT[],
    p_operation_ids    TEXT[],
    p_request_hashes   TEXT[],
    p_froms            TEXT[],
    p_currencies       TEXT[],
    p_refs             TEXT[],
    p_fences           BIGINT[],
    p_lease_ids        UUID[],
    p_statuses         TEXT[],
    p_reasons          TEXT[],
    p_credited         TEXT[],
    p_recorded_amounts BIGINT[],
    p_details          JSONB[],
    p_expired          TEXT[],
    p_closed_ops       TEXT[],
    p_closed_hashes    TEXT[]
) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_events INTEGER;
BEGIN
    WITH recorded AS (
        SELECT p_operation_ids[i] AS operation_id, p_request_hashes[i] AS request_hash, p_kinds[i] AS kind,
               CASE WHEN p_kinds[i] IN ('capture', 'void', 'refund') THEN p_refs[i] END AS original,
               p_froms[i] AS from_wallet, p_credited[i] AS to_wallet, p_recorded_amounts[i] AS amount,
               p_currencies[i] AS currency, p_statuses[i] AS status, p_reasons[i] AS reason, p_fences[i] AS fence,
               p_lease_ids[i] AS lease, p_details[i] AS detail, i AS element
          FROM generate_subscripts(p_statuses, 1) i
         WHERE p_statuses[i] IS NOT NULL
    ), inserted AS (
        INSERT INTO transfers (operation_id, request_hash, kind, original_id, from_wallet, to_wallet, amount,
                               currency, status, reason, fence, lease)
        SELECT d.operation_id, d.request_hash, d.kind, d.original, d.from_wallet, d.to_wallet, d.amount,
               d.currency, d.status, d.reason, d.fence, d.lease
          FROM recorded d
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
        RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                  q.amount, q.currency, d.request_hash AS decided_hash
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                 currency, detail)
    SELECT d.operation_id, d.status, d.reason, d.kind, d.original, d.from_wallet, d.to_wallet, d.amount, d.currency,
           d.detail
      FROM recorded d
    UNION ALL
    SELECT q.operation_id, 'conflict', NULL, q.kind, NULL, q.from_wallet, q.to_wallet, q.amount, q.currency, q.body
      FROM requested q WHERE q.request_hash <> q.decided_hash;
    GET DIAGNOSTICS v_events = ROW_COUNT;

    IF cardinality(p_expired) > 0 THEN
        -- The release credits the source, as the sweep's does (holds_expire()).
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT h.hold_id, 'expired', NULL, 'hold', NULL, h.from_wallet, h.from_wallet, h.amount, h.currency, NULL
          FROM holds h WHERE h.hold_id = ANY (p_expired);
    END IF;
    -- Requests of operations decided before this batch (through the other door while the request
    -- was open, or a request sent again after its decision) are decided too; one that asked for
    -- another body than the record's gets its conflict event. Only batches with such answers pay.
    IF cardinality(p_closed_ops) > 0 THEN
        WITH closed AS (
            UPDATE transfer_requests q SET decided_at = clock_timestamp()
              FROM (SELECT DISTINCT x.op, x.hash FROM unnest(p_closed_ops, p_closed_hashes) AS x(op, hash)) d
             WHERE q.operation_id = d.op AND q.decided_at IS NULL
            RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                      q.amount, q.currency, d.hash AS decided_hash
        )
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT c.operation_id, 'conflict', NULL, c.kind, NULL, c.from_wallet, c.to_wallet, c.amount, c.currency, c.body
          FROM closed c WHERE c.request_hash <> c.decided_hash;
    END IF;
    RETURN v_events;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_recorded(text[],text[],text[],text[],text[],text[],bigint[],uuid[],text[],text[],text[],bigint[],jsonb[],text[],text[],text[]) FROM PUBLIC;

-- prisma/sql/decision_records_found.sql
-- The idempotency records of the operations named, read once their advisory locks are held (so
-- none can appear before the batch commits): what the decision answers a duplicate or a conflict
-- with. Parallel arrays, one element per record found.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_records_found"(
    p_operation_ids TEXT[],
    OUT r_op        TEXT[],
    OUT r_hash      TEXT[],
    OUT r_status    TEXT[],
    OUT r_reason    TEXT[],
    OUT r_fence     BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
           coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'), coalesce(array_agg(t.fence), '{}')
      INTO r_op, r_hash, r_status, r_reason, r_fence
      FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_records_found(text[]) FROM PUBLIC;

-- prisma/sql/decision_refunded.sql
-- A refund's checks (docs/reference/outcomes.md, in this order) and what it moves: money back from
-- the wallet the original credited (p_from) to the wallet it debited, bounded per payer by what the
-- original credited p_from (a transfer's amount, a captured hold's captured part, a split's leg:
-- p_leg_amount) less what was refunded of it so far (p_refunded). Without an amount a refund takes
-- what is left. p_original is the original's record (NULL when it has none), p_hold its hold's row.
CREATE OR REPLACE FUNCTION "decision_refunded"(
    p_from           TEXT,
    p_to             TEXT,
    p_amount         BIGINT,
    p_original       transfers,
    p_hold           holds,
    p_leg_amount     BIGINT,
    p_refunded       BIGINT,
    p_from_currency  TEXT,
    p_payee_currency TEXT,
    p_balance        BIGINT,
    OUT reason       TEXT,
    OUT amount       BIGINT,
    OUT credited     TEXT,
    OUT detail       JSONB,
    OUT wallets      TEXT[],
    OUT amounts      BIGINT[],
    OUT hold         holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_limit  BIGINT;
    v_left   BIGINT;
    v_moved  BIGINT;
BEGIN
    expiry_released := FALSE;
    amount := p_amount;
    credited := p_to;
    IF p_original.operation_id IS NULL THEN
        reason := 'original_not_found';
    ELSIF p_original.status <> 'applied' OR p_original.kind NOT IN ('transfer', 'hold', 'split') THEN
        reason := 'original_not_refundable';
    ELSIF p_original.kind = 'transfer' THEN
        IF p_original.to_wallet <> p_from THEN reason := 'wallet_mismatch'; ELSE v_limit := p_original.amount; END IF;
    ELSIF p_original.kind = 'hold' THEN
        IF p_hold.hold_id IS NULL OR p_hold.state <> 'captured' THEN
            reason := 'original_not_refundable';
        ELSIF p_hold.to_wallet <> p_from THEN
            reason := 'wallet_mismatch';
        ELSE
            v_limit := p_hold.captured;
        END IF;
    ELSIF p_leg_amount IS NULL THEN
        reason := 'wallet_mismatch';
    ELSE
        v_limit := p_leg_amount;
    END IF;
    IF reason IS NOT NULL THEN
        RETURN;
    END IF;
    credited := p_original.from_wallet;
    v_left := v_limit - coalesce(p_refunded, 0);
    v_moved := coalesce(p_amount, v_left);
    -- The original checked the wallets' currencies and that they differ: a refund checks only that
    -- both still exist and the funds.
    IF v_moved > v_left OR v_moved <= 0 THEN
        reason := 'refund_exceeds_original';
    ELSIF p_from_currency IS NULL OR p_payee_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_balance < v_moved THEN
        reason := 'insufficient_funds';
    END IF;
    IF reason IS NULL THEN
        amount := v_moved;
        wallets := ARRAY[p_from, credited];
        amounts := ARRAY[-v_moved, v_moved];
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_refunded(text,text,bigint,transfers,holds,bigint,bigint,text,text,bigint) FROM PUBLIC;

-- prisma/sql/decision_refusal.sql
-- The checks of a movement of money from one wallet to another, in their one order
-- (docs/reference/outcomes.md): same_wallet, unknown_wallet (a wallet without a row has no
-- currency), currency_mismatch (the two wallets' currencies, and the one the request names), the
-- kind's own refusal when it has one (a hold's expiry_out_of_range), then insufficient_funds.
-- NULL when the money may move. A transfer, a hold, each leg of a split (no balance: the split
-- checks its total once) and a refund (after its bound) all ask it; inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_refusal"(
    p_from          TEXT,
    p_to            TEXT,
    p_from_currency TEXT,
    p_to_currency   TEXT,
    p_currency      TEXT,
    p_balance       BIGINT,
    p_amount        BIGINT,
    p_kind_refusal  TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_from = p_to THEN 'same_wallet'
        WHEN p_from_currency IS NULL OR p_to_currency IS NULL THEN 'unknown_wallet'
        WHEN p_from_currency <> p_to_currency OR p_currency <> p_from_currency THEN 'currency_mismatch'
        WHEN p_kind_refusal IS NOT NULL THEN p_kind_refusal
        WHEN p_balance < p_amount THEN 'insufficient_funds'
    END
$$;

REVOKE EXECUTE ON FUNCTION decision_refusal(text,text,text,text,text,bigint,bigint,text) FROM PUBLIC;

-- prisma/sql/decision_split.sql
-- A split's checks and what it moves: one debit of its source for the legs' total, one credit per
-- leg, all legs or none. Each leg is checked as a movement of its own (decision_refusal(): same
-- wallet, unknown wallet, currency), in leg order, then the total against the source's balance.
-- A leg without a wallet or a positive amount, or a wallet named in two legs, is a malformed
-- call (22023): the intake and the worker refuse such bodies before they get here.
CREATE OR REPLACE FUNCTION "decision_split"(
    p_op            TEXT,
    p_from          TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_legs          JSONB,
    p_wallet_ids    TEXT[],
    p_currencies    TEXT[],
    p_balance       BIGINT,
    OUT reason      TEXT,
    OUT amount      BIGINT,
    OUT credited    TEXT,
    OUT detail      JSONB,
    OUT wallets     TEXT[],
    OUT amounts     BIGINT[],
    OUT hold         holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_leg    JSONB;
    v_to     TEXT;
    v_total  BIGINT := 0;
    v_from_currency TEXT := p_currencies[array_position(p_wallet_ids, p_from)];
BEGIN
    expiry_released := FALSE;
    wallets := ARRAY[p_from];
    amounts := ARRAY[NULL::BIGINT];
    FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs) l LOOP
        IF (v_leg ->> 'amount') IS NULL OR (v_leg ->> 'amount') !~ '^[0-9]{1,19}$' OR (v_leg ->> 'amount')::NUMERIC <= 0
           OR (v_leg ->> 'to') IS NULL THEN
            RAISE EXCEPTION 'apply_payments: split % has a leg without a wallet or a positive amount', p_op
                USING ERRCODE = '22023';
        END IF;
        v_to := v_leg ->> 'to';
        v_total := v_total + (v_leg ->> 'amount')::BIGINT;
        wallets := wallets || v_to;
        amounts := amounts || (v_leg ->> 'amount')::BIGINT;
        reason := coalesce(reason, decision_refusal(p_from, v_to, v_from_currency,
            p_currencies[array_position(p_wallet_ids, v_to)], p_currency, NULL, NULL));
    END LOOP;
    IF reason IS NULL AND (SELECT count(DISTINCT l ->> 'to') FROM jsonb_array_elements(p_legs) l)
                            <> jsonb_array_length(p_legs) THEN
        RAISE EXCEPTION 'apply_payments: split % names one wallet in two legs', p_op USING ERRCODE = '22023';
    END IF;
    -- The total, as the balance check of a movement out of the source (no payee of its own).
    reason := coalesce(reason, decision_refusal(p_from, NULL, v_from_currency, v_from_currency, NULL, p_balance, v_total));
    amount := CASE WHEN reason IS NULL THEN v_total ELSE coalesce(p_amount, v_total) END;
    detail := jsonb_build_object('legs', p_legs);
    IF reason IS NULL THEN
        amounts[1] := -v_total;
    ELSE
        wallets := NULL;
        amounts := NULL;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_split(text,text,bigint,text,jsonb,text[],text[],bigint) FROM PUBLIC;

-- prisma/sql/decision_stale.sql
-- The fence check, for the wallet an operation debits (for a capture or a void, the hold's source,
-- whose money it is); credits are never fenced. A token below the wallet's fence is stale. An
-- equal token passes only for the lease that set it (the riders of one lease share its token):
-- after Redis lost increments another lease can carry the same number, and it is as stale as a
-- lower one. A wallet with no row (its fence NULL) is never stale: the decision refuses it as
-- unknown_wallet. One rule for the single and the batch decision; inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_stale"(p_wallet_fence BIGINT, p_wallet_lease UUID, p_fence BIGINT, p_lease UUID)
RETURNS BOOLEAN
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT coalesce(p_wallet_fence > p_fence OR (p_wallet_fence = p_fence AND p_wallet_lease IS DISTINCT FROM p_lease), FALSE)
$$;

REVOKE EXECUTE ON FUNCTION decision_stale(bigint,uuid,bigint,uuid) FROM PUBLIC;

-- prisma/sql/decision_state_read.sql
-- What a batch's decisions read, once its operations' advisory locks are held: every wallet it may
-- touch, row-locked (sources, whose held money is in their own row; payees; the payees of the
-- holds named; the refunds' payees, who paid the original; the splits' legs), the holds named, the
-- originals its captures, voids and refunds name, the legs of the splits refunds name and what was
-- refunded of each original so far, per payer (serialised by the payer's row lock). A batch of
-- transfers reads its wallets only.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_state_read"(
    p_kinds        TEXT[],
    p_froms        TEXT[],
    p_tos          TEXT[],
    p_refs         TEXT[],
    p_legs         JSONB[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[],
    OUT w_held     BIGINT[],
    OUT w_fence    BIGINT[],
    OUT w_lease    UUID[],
    OUT h_id       TEXT[],
    OUT h          holds[],
    OUT o_id       TEXT[],
    OUT o          transfers[],
    OUT s          split_legs[],
    OUT f_key      TEXT[],
    OUT f_sum      BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_wallets TEXT[] := p_froms || p_tos;
    v_late    TEXT[];
    v_locked  RECORD;
    v_names   BOOLEAN := 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds);
BEGIN
    h_id := '{}'; h := '{}'; o_id := '{}'; o := '{}'; s := '{}'; f_key := '{}'; f_sum := '{}';
    -- The refunds' originals, read before any row lock: who they moved money between never
    -- changes, and it says which wallets to lock. A captured hold's state is read below.
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t), '{}') INTO o_id, o
          FROM transfers t
         WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                            WHERE p_kinds[i] = 'refund'));
        v_wallets := v_wallets || ARRAY(SELECT (x).from_wallet FROM unnest(o) x);
    END IF;
    IF v_names THEN
        v_wallets := v_wallets || ARRAY(SELECT x.to_wallet FROM holds x WHERE x.hold_id = ANY (p_refs));
    END IF;
    IF 'split' = ANY (p_kinds) THEN
        v_wallets := v_wallets || ARRAY(SELECT l ->> 'to' FROM unnest(p_legs) g,
            jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l);
    END IF;
    v_locked := decision_wallets_locked(v_wallets);
    w_id := v_locked.w_id; w_currency := v_locked.w_currency; w_balance := v_locked.w_balance; w_held := v_locked.w_held;
    w_fence := v_locked.w_fence; w_lease := v_locked.w_lease;
    IF NOT v_names THEN
        RETURN;
    END IF;

    -- The holds named, read once the wallets are locked. No row lock of their own: whoever
    -- changes a hold (its capture, its void, the decision or the sweep that releases it, and the
    -- hold's own decision) holds its source wallet's row lock, which this batch now holds for
    -- every hold it may change (a capture or void that names another source is refused
    -- wallet_mismatch and changes nothing). So this statement, which starts after those locks,
    -- sees every change committed before and none can come before this batch commits.
    SELECT coalesce(array_agg(x.hold_id), '{}'), coalesce(array_agg(x), '{}') INTO h_id, h
      FROM holds x WHERE x.hold_id = ANY (p_refs);
    -- A hold whose own decision committed while this batch waited for its locks is read here,
    -- but it was not there to name its payee before them: those payees are locked now, in order
    -- among themselves. Out of order with the wallets above, so a cycle can close here; PostgreSQL
    -- then fails one of the two (40P01), and its batch is retried as a transient error.
    v_late := ARRAY(SELECT DISTINCT (x).to_wallet FROM unnest(h) x WHERE NOT ((x).to_wallet = ANY (w_id)) ORDER BY 1);
    IF cardinality(v_late) > 0 THEN
        v_locked := decision_wallets_locked(v_late);
        w_id := w_id || v_locked.w_id; w_currency := w_currency || v_locked.w_currency;
        w_balance := w_balance || v_locked.w_balance; w_held := w_held || v_locked.w_held;
        w_fence := w_fence || v_locked.w_fence; w_lease := w_lease || v_locked.w_lease;
    END IF;
    -- A capture or void whose hold has no row: a hold refused, or no hold at all. Its record says
    -- which (hold_rejected or hold_not_found).
    SELECT o_id || coalesce(array_agg(t.operation_id), '{}'), o || coalesce(array_agg(t), '{}') INTO o_id, o
      FROM transfers t
     WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                        WHERE p_kinds[i] IN ('capture', 'void') AND NOT (p_refs[i] = ANY (h_id))))
       AND NOT (t.operation_id = ANY (o_id));
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(x), '{}') INTO s FROM split_legs x WHERE x.operation_id = ANY (p_refs);
        SELECT coalesce(array_agg(t.original_id || E'\n' || t.from_wallet), '{}'), coalesce(array_agg(t.total), '{}')
          INTO f_key, f_sum
          FROM (SELECT r.original_id, r.from_wallet, sum(r.amount)::BIGINT AS total FROM transfers r
                 WHERE r.original_id = ANY (p_refs) AND r.kind = 'refund' AND r.status = 'applied'
                 GROUP BY r.original_id, r.from_wallet) t;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_state_read(text[],text[],text[],text[],jsonb[]) FROM PUBLIC;

-- prisma/sql/decision_verdict.sql
-- The verdict of an operation that names another or has legs: its kind's checks
-- (docs/reference/outcomes.md) and what it moves, from the batch's state as the decisions before it
-- left it (the locked wallets, the holds, originals, split legs and refunded sums decide_batch()
-- keeps; passed read-only). A capture and a void: decision_hold_ended(); a refund:
-- decision_refunded(); a split: decision_split(). A transfer's and a hold's is decision_moved(),
-- which decide_batch() asks itself; every kind's verdict has the same fields.
CREATE OR REPLACE FUNCTION "decision_verdict"(
    p_kind          TEXT,
    p_op            TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_ref           TEXT,
    p_legs          JSONB,
    p_now           TIMESTAMPTZ,
    w_id            TEXT[],
    w_currency      TEXT[],
    w_balance       BIGINT[],
    h_id            TEXT[],
    h               holds[],
    o_id            TEXT[],
    o               transfers[],
    s               split_legs[],
    f_key           TEXT[],
    f_sum           BIGINT[]
) RETURNS RECORD
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_fi INTEGER := array_position(w_id, p_from);
    v_k  INTEGER := array_position(h_id, p_ref);
    v_o  INTEGER := array_position(o_id, p_ref);
BEGIN
    IF p_kind IN ('capture', 'void') THEN
        RETURN decision_hold_ended(p_kind, p_op, p_from, p_to, p_amount, h[v_k], o[v_o], p_now);
    ELSIF p_kind = 'refund' THEN
        RETURN decision_refunded(p_from, p_to, p_amount, o[v_o], h[v_k],
                   (SELECT (x).amount FROM unnest(s) x WHERE (x).operation_id = p_ref AND (x).to_wallet = p_from),
                   f_sum[array_position(f_key, p_ref || E'\n' || p_from)], w_currency[v_fi],
                   w_currency[array_position(w_id, (o[v_o]).from_wallet)], w_balance[v_fi]);
    END IF;
    RETURN decision_split(p_op, p_from, p_amount, p_currency, p_legs, w_id, w_currency, w_balance[v_fi]);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_verdict(text,text,text,text,bigint,text,text,jsonb,timestamp with time zone,text[],text[],bigint[],text[],holds[],text[],transfers[],split_legs[],text[],bigint[]) FROM PUBLIC;

-- prisma/sql/decision_wallets_locked.sql
-- The wallets named, row-locked in id order (one global order: two decisions that cross wait for
-- each other, see the late payees in decision_state_read() for the one exception), as parallel
-- arrays sorted by id. A wallet without a row is simply absent.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_wallets_locked"(
    p_ids          TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[],
    OUT w_held     BIGINT[],
    OUT w_fence    BIGINT[],
    OUT w_lease    UUID[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.held ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'), coalesce(array_agg(l.last_lease ORDER BY l.id), '{}')
      INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease
      FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (p_ids) ORDER BY w.id FOR UPDATE) l;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_wallets_locked(text[]) FROM PUBLIC;

-- prisma/sql/decision_written.sql
-- What a batch's decisions did, written once per table: the wallets (every row that moved, or
-- nothing commits; CHECK (balance >= 0) and CHECK (held >= 0) stay the last line of defence), the
-- ledger in decision order (a negative amount is a debit), the holds placed (after p_holds_read in
-- p_holds) and those that ended, and the legs of the splits applied (after p_legs_read in p_legs).
-- The records and events follow (decision_recorded()). Answers how many wallet rows it wrote.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_written"(
    p_wallet_ids      TEXT[],
    p_balances        BIGINT[],
    p_helds           BIGINT[],
    p_fences          BIGINT[],
    p_leases          UUID[],
    p_touched         BOOLEAN[],
    p_entry_ops       TEXT[],
    p_entry_wallets   TEXT[],
    p_entry_amounts   BIGINT[],
    p_entry_fences    BIGINT[],
    p_entry_leases    UUID[],
    p_holds           holds[],
    p_holds_read      INTEGER,
    p_holds_ended     BOOLEAN[],
    p_legs            split_legs[],
    p_legs_read       INTEGER
) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_touched INTEGER := 0;
    v_rows    INTEGER;
BEGIN
    FOR v_rows IN 1 .. cardinality(p_touched) LOOP
        IF p_touched[v_rows] THEN v_touched := v_touched + 1; END IF;
    END LOOP;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, held = u.held, last_fence = u.last_fence, last_lease = u.last_lease,
               updated_at = CURRENT_TIMESTAMP
          FROM unnest(p_wallet_ids, p_balances, p_helds, p_fences, p_leases, p_touched)
               AS u(id, balance, held, last_fence, last_lease, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            -- Unreachable while the rows are locked; a credit that misses must never let the
            -- debit commit alone.
            RAISE EXCEPTION 'decision: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;
    IF cardinality(p_entry_ops) > 0 THEN
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT e.op, e.wallet, CASE WHEN e.amount < 0 THEN 'debit' ELSE 'credit' END, e.amount, e.fence, e.lease
          FROM unnest(p_entry_ops, p_entry_wallets, p_entry_amounts, p_entry_fences, p_entry_leases) WITH ORDINALITY
               AS e(op, wallet, amount, fence, lease, n)
         ORDER BY e.n;
    END IF;
    IF cardinality(p_holds) > p_holds_read THEN
        INSERT INTO holds (hold_id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released,
                           ended_by, ended_at)
        SELECT (x).hold_id, (x).from_wallet, (x).to_wallet, (x).amount, (x).currency, (x).expires_at, (x).state,
               (x).captured, (x).released, (x).ended_by, (x).ended_at
          FROM unnest(p_holds[p_holds_read + 1:]) x;
    END IF;
    IF p_holds_read > 0 AND TRUE = ANY (p_holds_ended[1:p_holds_read]) THEN
        UPDATE holds h
           SET state = (x).state, captured = (x).captured, released = (x).released, ended_by = (x).ended_by,
               ended_at = (x).ended_at
          FROM unnest(ARRAY(SELECT p_holds[i] FROM generate_subscripts(p_holds, 1) i
                             WHERE i <= p_holds_read AND p_holds_ended[i])) x
         WHERE h.hold_id = (x).hold_id;
    END IF;
    IF cardinality(p_legs) > p_legs_read THEN
        INSERT INTO split_legs (operation_id, leg, to_wallet, amount)
        SELECT (x).operation_id, (x).leg, (x).to_wallet, (x).amount FROM unnest(p_legs[p_legs_read + 1:]) x;
    END IF;
    RETURN v_touched;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_written(text[],bigint[],bigint[],bigint[],uuid[],boolean[],text[],text[],bigint[],bigint[],uuid[],holds[],integer,boolean[],split_legs[],integer) FROM PUBLIC;
