-- Credit limits (issue 43, item 3): each wallet has a credit limit (default 0), and every kind that
-- debits may take the wallet's balance down to minus its limit and never below, checked in the
-- decision (decision_refusal() is given the balance plus the limit) and by the table's CHECK.
--
-- Written by hand: the table, then the two functions whose result gains the limit (a change of
-- OUT parameters needs a DROP), then the files of prisma/sql/ as `npm run db:new-migration` writes
-- them: apply_transfer.sql, decide_batch.sql, decision_state_read.sql, decision_verdict.sql,
-- decision_wallets_locked.sql; drops function decision_verdict(…) (its balances array became the
-- source's spendable amount).

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

-- The limit, and the floor it sets: a wallet's balance never below minus its limit. Every wallet
-- written so far keeps limit 0, so the new CHECK holds for each row as the old one did.
ALTER TABLE wallets ADD COLUMN credit_limit BIGINT NOT NULL DEFAULT 0;
ALTER TABLE wallets ADD CONSTRAINT wallets_credit_limit_range CHECK (credit_limit >= 0 AND credit_limit <= 100000000000000000);
ALTER TABLE wallets DROP CONSTRAINT wallets_balance_non_negative;
ALTER TABLE wallets ADD CONSTRAINT wallets_balance_within_limit CHECK (balance >= -credit_limit);

DROP FUNCTION decision_state_read(text[],text[],text[],text[],jsonb[]);
DROP FUNCTION decision_wallets_locked(text[]);
DROP FUNCTION decision_verdict(text,text,text,text,bigint,text,text,jsonb,timestamp with time zone,text[],text[],bigint[],text[],holds[],text[],transfers[],split_legs[],text[],bigint[]);

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
    v_from_limit    BIGINT;
    v_from_fence    BIGINT;
    v_from_lease    UUID;
    v_to_currency   TEXT;
    v_to_balance    BIGINT;
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
        SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease, w.credit_limit
          FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE
    LOOP
        IF v_wallet.id = p_from THEN
            v_from_currency := v_wallet.currency; v_from_balance := v_wallet.balance; v_from_limit := v_wallet.credit_limit;
            v_from_fence := v_wallet.last_fence; v_from_lease := v_wallet.last_lease;
        END IF;
        IF v_wallet.id = p_to THEN v_to_currency := v_wallet.currency; v_to_balance := v_wallet.balance; END IF;
    END LOOP;

    IF decision_stale(v_from_fence, v_from_lease, p_fence, p_lease_id) THEN
        RETURN QUERY SELECT 'stale_fence'::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, v_from_fence;
        RETURN;
    END IF;
    v_reason := decision_refusal(p_from, p_to, v_from_currency, v_to_currency, p_currency,
                                 v_from_balance + v_from_limit, p_amount);
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
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, fence, lease, created_at) VALUES
            (p_operation_id, p_from, 'debit', -p_amount, v_from_balance - p_amount, p_fence, p_lease_id, clock_timestamp()),
            (p_operation_id, p_to, 'credit', p_amount, v_to_balance + p_amount, p_fence, p_lease_id, clock_timestamp());
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
    -- A debit may take a wallet's balance down to minus its credit limit (w_limit), never below.
    w_id TEXT[]; w_currency TEXT[]; w_balance BIGINT[]; w_held BIGINT[]; w_fence BIGINT[]; w_lease UUID[]; w_limit BIGINT[];
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
    -- Each entry's running balance: its account's balance after it (a `$held:` account's is the held amount).
    l_op TEXT[] := '{}'; l_wallet TEXT[] := '{}'; l_amount BIGINT[] := '{}'; l_fence BIGINT[] := '{}'; l_lease UUID[] := '{}';
    l_balance BIGINT[] := '{}'; l_count INTEGER := 0; x_hold TEXT[] := '{}'; d_op TEXT[] := '{}'; d_hash TEXT[] := '{}';
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
    w_lease := v.w_lease; w_limit := v.w_limit; h_id := v.h_id; h := v.h; o_id := v.o_id; o := v.o; s := v.s; f_key := v.f_key; f_sum := v.f_sum;
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
                     w_currency[v_ti], w_balance[v_fi] + w_limit[v_fi],
                     coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0)), v_now, v_latest);
        ELSE
            v := decision_verdict(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], v_ref, p_legs[v_i],
                     v_now, w_id, w_currency, w_balance[v_fi] + w_limit[v_fi], h_id, h, o_id, o, s, f_key, f_sum);
        END IF;
        v_entries := CASE WHEN v.expiry_released THEN '$expiry:' || v_ref ELSE v_op END;
        FOR v_j IN 1 .. coalesce(cardinality(v.wallets), 0) LOOP
            v_wallet := v.wallets[v_j];
            v_w := CASE WHEN v_wallet IN (v_from, '$held:' || v_from) THEN v_fi WHEN v_wallet = p_tos[v_i] THEN v_ti
                        ELSE array_position(w_id, v_wallet) END;
            l_count := l_count + 1;
            IF v_wallet LIKE '$held:%' THEN w_held[v_w] := w_held[v_w] + v.amounts[v_j]; l_balance[l_count] := w_held[v_w];
            ELSE w_balance[v_w] := w_balance[v_w] + v.amounts[v_j]; l_balance[l_count] := w_balance[v_w]; END IF;
            w_touched[v_w] := TRUE;
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

    v_j := decision_written(w_id, w_balance, w_held, w_fence, w_lease, w_touched, l_op, l_wallet, l_amount, l_balance,
                             l_fence, l_lease, h, h_read, h_ended, s, s_read);
    v_j := decision_recorded(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_currencies, p_refs, p_fences,
                              p_lease_ids, e_status, e_reason, e_to, e_amount, e_detail, x_hold, d_op, d_hash);
END;
$$;

REVOKE EXECUTE ON FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

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
    OUT w_limit    BIGINT[],
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
    w_fence := v_locked.w_fence; w_lease := v_locked.w_lease; w_limit := v_locked.w_limit;
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
        w_limit := w_limit || v_locked.w_limit;
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
-- which decide_batch() asks itself; every kind's verdict has the same fields. p_spendable is what the
-- source may still debit: its balance plus its credit limit.
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
    p_spendable     BIGINT,
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
                   w_currency[array_position(w_id, (o[v_o]).from_wallet)], p_spendable);
    END IF;
    RETURN decision_split(p_op, p_from, p_amount, p_currency, p_legs, w_id, w_currency, p_spendable);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_verdict(text,text,text,text,bigint,text,text,jsonb,timestamp with time zone,text[],text[],bigint,text[],holds[],text[],transfers[],split_legs[],text[],bigint[]) FROM PUBLIC;

-- prisma/sql/decision_wallets_locked.sql
-- The wallets named, row-locked in id order (one global order: two decisions that cross wait for
-- each other, see the late payees in decision_state_read() for the one exception), as parallel
-- arrays sorted by id, each wallet's credit limit last. A wallet without a row is simply absent.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_wallets_locked"(
    p_ids          TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[],
    OUT w_held     BIGINT[],
    OUT w_fence    BIGINT[],
    OUT w_lease    UUID[],
    OUT w_limit    BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.held ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'), coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'),
           coalesce(array_agg(l.credit_limit ORDER BY l.id), '{}')
      INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_limit
      FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease, w.credit_limit FROM wallets w
             WHERE w.id = ANY (p_ids) ORDER BY w.id FOR UPDATE) l;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_wallets_locked(text[]) FROM PUBLIC;
