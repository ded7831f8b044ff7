--
-- PostgreSQL database dump
--

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: apply_payments(text[], text[], text[], text[], text[], bigint[], text[], text[], bigint[], timestamp with time zone[], jsonb[], bigint[], uuid[], bigint, jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_payments(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[] DEFAULT NULL::jsonb[]) RETURNS TABLE(ord integer, outcome text, status text, reason text, fence bigint, wallet_fence bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    -- Raises 22023 for a ledger-account id, before any lock.
    v_ok BOOLEAN := decision_wallet_ids_checked(p_froms || p_tos, p_legs);
BEGIN
    RETURN QUERY
    SELECT * FROM decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts, p_currencies, p_refs,
        p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms, p_metadata);
END;
$$;

--
-- Name: apply_transfer(text, text, text, text, bigint, text, bigint, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_transfer(p_operation_id text, p_request_hash text, p_from text, p_to text, p_amount bigint, p_currency text, p_fence bigint, p_lease_id uuid) RETURNS TABLE(outcome text, status text, reason text, fence bigint, wallet_fence bigint)
    LANGUAGE plpgsql
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

--
-- Name: apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.apply_transfers(p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_fences bigint[], p_lease_ids uuid[]) RETURNS TABLE(ord integer, outcome text, status text, reason text, fence bigint, wallet_fence bigint)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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
                        v_none::TIMESTAMPTZ[], v_none::JSONB[], p_fences, p_lease_ids, 1, NULL) b;
END;
$$;

--
-- Name: decide_batch(text[], text[], text[], text[], text[], bigint[], text[], text[], bigint[], timestamp with time zone[], jsonb[], bigint[], uuid[], bigint, jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decide_batch(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[]) RETURNS TABLE(ord integer, outcome text, status text, reason text, fence bigint, wallet_fence bigint)
    LANGUAGE plpgsql
    SET enable_seqscan TO 'off'
    SET enable_hashjoin TO 'off'
    SET enable_mergejoin TO 'off'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $_$
DECLARE
    v_n        INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_names    BOOLEAN := 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds);
    -- The locked wallets, by id, as the batch's decisions leave them (w_read of them read, then those opened here); a
    -- debit may take a balance down to minus w_limit. v_all_open: no status to judge yet.
    w_id TEXT[]; w_currency TEXT[]; w_balance BIGINT[]; w_held BIGINT[]; w_fence BIGINT[]; w_lease UUID[]; w_limit BIGINT[];
    w_status TEXT[]; w_touched BOOLEAN[]; w_read INTEGER; v_all_open BOOLEAN;
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
    -- Ledger entries in decision order, each with its account's balance after it (a `$held:` account's is the held
    -- amount) and a wallet's limit in force then; holds released at expiry; requests to close.
    l_op TEXT[] := '{}'; l_wallet TEXT[] := '{}'; l_amount BIGINT[] := '{}'; l_fence BIGINT[] := '{}'; l_lease UUID[] := '{}';
    l_balance BIGINT[] := '{}'; l_limit BIGINT[] := '{}'; l_count INTEGER := 0; x_hold TEXT[] := '{}'; d_op TEXT[] := '{}'; d_hash TEXT[] := '{}';
    v_i INTEGER; v_j INTEGER; v_k INTEGER; v_f INTEGER; v_w INTEGER; v_fi INTEGER; v_ti INTEGER;
    v_kind TEXT; v_op TEXT; v_from TEXT; v_ref TEXT; v_fence BIGINT; v_lease UUID; v_entries TEXT; v_wallet TEXT;
    v_now TIMESTAMPTZ; v_latest TIMESTAMPTZ; v RECORD;
BEGIN
    v_n := decision_arguments_checked(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms);
    v_j := decision_operations_locked(p_operation_ids);
    v := decision_state_read(p_kinds, p_froms, p_tos, p_refs, p_legs);
    w_id := v.w_id; w_currency := v.w_currency; w_balance := v.w_balance; w_held := v.w_held; w_fence := v.w_fence;
    w_lease := v.w_lease; w_limit := v.w_limit; h_id := v.h_id; h := v.h; o_id := v.o_id; o := v.o; s := v.s; f_key := v.f_key; f_sum := v.f_sum;
    w_status := v.w_status; v_all_open := 'open' = ALL (w_status);
    v := decision_settlements_locked(p_kinds, p_currencies);
    w_id := w_id || v.w_id; w_currency := w_currency || v.w_currency; w_balance := w_balance || v.w_balance;
    v := decision_records_found(p_operation_ids);
    r_op := v.r_op; r_hash := v.r_hash; r_status := v.r_status; r_reason := v.r_reason; r_fence := v.r_fence;
    -- Every record found answers an element of the batch: the operation's open request is closed with it.
    d_op := r_op; d_hash := r_hash; w_read := cardinality(w_id); w_touched := array_fill(FALSE, ARRAY[w_read]);
    h_read := cardinality(h); h_ended := array_fill(FALSE, ARRAY[h_read]); s_read := cardinality(s);
    o_count := cardinality(o); r_count := cardinality(r_op); r_element := array_fill(NULL::INTEGER, ARRAY[r_count]);
    v_now := clock_timestamp(); v_latest := v_now + make_interval(secs => p_hold_expiry_max_ms / 1000.0);

    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i]; v_op := p_operation_ids[v_i]; v_from := p_froms[v_i]; v_ref := p_refs[v_i];
        v_fence := p_fences[v_i]; v_lease := p_lease_ids[v_i]; ord := v_i;
        v_k := array_position(r_op, v_op);
        IF v_k IS NOT NULL THEN
            outcome := decision_answer(r_hash[v_k], p_request_hashes[v_i]);
            status := r_status[v_k]; reason := r_reason[v_k]; fence := r_fence[v_k]; wallet_fence := NULL;
            RETURN NEXT; CONTINUE;
        END IF;
        v_fi := array_position(w_id, v_from); v_ti := array_position(w_id, p_tos[v_i]);
        IF decision_stale(w_fence[v_fi], w_lease[v_fi], v_fence, v_lease) THEN
            outcome := 'stale_fence'; status := NULL; reason := NULL; fence := NULL; wallet_fence := w_fence[v_fi];
            RETURN NEXT; CONTINUE;
        END IF;
        IF v_kind IN ('transfer', 'hold') THEN
            v := decision_moved(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], w_currency[v_fi],
                     w_currency[v_ti], w_balance[v_fi] + w_limit[v_fi],
                     coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0)), v_now, v_latest);
        ELSIF v_kind IN ('credit_limit', 'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet') THEN
            v := decision_wallet_changed(v_kind, p_currencies[v_i], p_amounts[v_i], v_ref, w_currency[v_fi], w_status[v_fi],
                     w_balance[v_fi], w_held[v_fi], w_limit[v_fi]);
        ELSE
            v := decision_verdict(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], v_ref, p_legs[v_i],
                     v_now, w_id, w_currency, w_balance[v_fi] + w_limit[v_fi], h_id, h, o_id, o, s, f_key, f_sum);
        END IF;
        IF NOT v_all_open AND v.reason IS NULL THEN
            v.reason := decision_status_refusal(v.wallets, v.amounts, w_id, w_status); v.wallets := CASE WHEN v.reason IS NULL THEN v.wallets END;
        END IF;
        v_entries := CASE WHEN v.expiry_released THEN '$expiry:' || v_ref ELSE v_op END;
        FOR v_j IN 1 .. coalesce(cardinality(v.wallets), 0) LOOP
            v_wallet := v.wallets[v_j];
            v_w := CASE WHEN v_wallet IN (v_from, '$held:' || v_from) THEN v_fi WHEN v_wallet = p_tos[v_i] THEN v_ti
                        ELSE array_position(w_id, v_wallet) END;
            l_count := l_count + 1; w_touched[v_w] := TRUE;
            l_limit[l_count] := CASE WHEN v_wallet LIKE '$held:%' THEN NULL ELSE w_limit[v_w] END;
            IF v_wallet LIKE '$held:%' THEN w_held[v_w] := w_held[v_w] + v.amounts[v_j]; l_balance[l_count] := w_held[v_w];
            ELSE w_balance[v_w] := w_balance[v_w] + v.amounts[v_j]; l_balance[l_count] := w_balance[v_w]; END IF;
            l_op[l_count] := v_entries; l_wallet[l_count] := v_wallet; l_amount[l_count] := v.amounts[v_j];
            l_fence[l_count] := CASE WHEN v.expiry_released OR v_wallet LIKE '$settlement:%' THEN NULL ELSE v_fence END;
            l_lease[l_count] := CASE WHEN v.expiry_released OR v_wallet LIKE '$settlement:%' THEN NULL ELSE v_lease END;
        END LOOP;
        IF v_kind = 'hold' AND v.reason IS NULL THEN h_id := h_id || v_op; h := h || v.hold;
        ELSIF v_kind IN ('capture', 'void') AND (v.reason IS NULL OR v.expiry_released) THEN
            v_k := array_position(h_id, v_ref); h[v_k] := v.hold;
            h_ended[v_k] := v_k <= h_read;
            IF v.expiry_released THEN x_hold := x_hold || v_ref; END IF;
        ELSIF v_kind = 'refund' AND v.reason IS NULL THEN
            v_f := array_position(f_key, v_ref || E'\n' || v_from);
            IF v_f IS NULL THEN f_key := f_key || (v_ref || E'\n' || v_from); f_sum := f_sum || v.amount;
            ELSE f_sum[v_f] := f_sum[v_f] + v.amount; END IF;
        ELSIF v_kind = 'open_wallet' AND v.reason IS NULL THEN
            v_fi := cardinality(w_id) + 1; w_id[v_fi] := v_from; w_currency[v_fi] := p_currencies[v_i]; w_status[v_fi] := 'open';
            w_balance[v_fi] := 0; w_held[v_fi] := 0; w_fence[v_fi] := 0; w_limit[v_fi] := p_amounts[v_i];
        ELSIF v_kind IN ('credit_limit', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet') AND v.reason IS NULL THEN
            w_limit[v_fi] := coalesce((v.detail ->> 'creditLimit')::BIGINT, w_limit[v_fi]); w_status[v_fi] := coalesce(v.detail ->> 'status', w_status[v_fi]);
            v_all_open := v_all_open AND w_status[v_fi] = 'open';
        ELSIF v_kind = 'split' AND v.reason IS NULL THEN
            FOR v_j IN 2 .. cardinality(v.wallets) LOOP
                s := s || ROW(v_op, v_j - 1, v.wallets[v_j], v.amounts[v_j], now())::split_legs;
            END LOOP;
        END IF;
        -- Every decision under our token raises the source's fence, refusals included (none without a row).
        IF v_fence >= w_fence[v_fi] THEN w_fence[v_fi] := v_fence; w_lease[v_fi] := v_lease; END IF;
        IF v_fi IS NOT NULL THEN w_touched[v_fi] := TRUE; END IF;

        status := CASE WHEN v.reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_count := r_count + 1; r_op[r_count] := v_op; r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := status; r_reason[r_count] := v.reason; r_fence[r_count] := v_fence; r_element[r_count] := v_i;
        e_status[v_i] := status; e_reason[v_i] := v.reason; e_to[v_i] := v.credited; e_amount[v_i] := v.amount; e_detail[v_i] := v.detail;
        IF v_names THEN
            o_count := o_count + 1; o_id[o_count] := v_op;
            o[o_count] := ROW(v_op, p_request_hashes[v_i], v_from, v.credited, v.amount, p_currencies[v_i], status,
                              v.reason, v_fence, NULL, v_lease, v_kind, NULL, v.detail ->> 'reference', NULL)::transfers;
        END IF;
        outcome := status; reason := v.reason; fence := v_fence; wallet_fence := w_fence[v_fi];
        RETURN NEXT;
    END LOOP;

    v_j := decision_written(w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_limit, w_status, w_touched, w_read,
                             l_op, l_wallet, l_amount, l_balance, l_limit, l_fence, l_lease, h, h_read, h_ended, s, s_read);
    v_j := decision_recorded(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_currencies, p_refs, p_fences,
                              p_lease_ids, e_status, e_reason, e_to, e_amount, e_detail, x_hold, d_op, d_hash, p_metadata);
END;
$_$;

--
-- Name: decision_answer(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_answer(p_record_hash text, p_request_hash text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN p_record_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END
$$;

--
-- Name: decision_arguments_checked(text[], text[], text[], text[], text[], bigint[], text[], text[], bigint[], timestamp with time zone[], jsonb[], bigint[], uuid[], bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_arguments_checked(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint) RETURNS integer
    LANGUAGE plpgsql IMMUTABLE
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

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: holds; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.holds (
    hold_id text NOT NULL,
    from_wallet text NOT NULL,
    to_wallet text NOT NULL,
    amount bigint NOT NULL,
    currency character(3),
    expires_at timestamp(6) with time zone NOT NULL,
    state text DEFAULT 'active'::text NOT NULL,
    captured bigint DEFAULT 0 NOT NULL,
    released bigint DEFAULT 0 NOT NULL,
    ended_by text,
    ended_at timestamp(6) with time zone,
    created_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    CONSTRAINT holds_amount_positive CHECK ((amount > 0)),
    CONSTRAINT holds_ended_once CHECK ((((state = 'active'::text) AND (captured = 0) AND (released = 0) AND (ended_at IS NULL) AND (ended_by IS NULL)) OR ((state <> 'active'::text) AND (captured >= 0) AND (released >= 0) AND ((captured + released) = amount) AND (ended_at IS NOT NULL) AND ((state = 'expired'::text) = (ended_by IS NULL))))),
    CONSTRAINT holds_state_known CHECK ((state = ANY (ARRAY['active'::text, 'captured'::text, 'voided'::text, 'expired'::text])))
);

--
-- Name: transfers; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.transfers (
    operation_id text NOT NULL,
    request_hash character(64) NOT NULL,
    from_wallet text NOT NULL,
    to_wallet text,
    amount bigint,
    currency character(3),
    status text NOT NULL,
    reason text,
    fence bigint NOT NULL,
    created_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    lease uuid,
    kind text DEFAULT 'transfer'::text NOT NULL,
    original_id text,
    reference text,
    metadata jsonb,
    CONSTRAINT transfers_amount_positive CHECK (((amount > 0) OR ((kind = 'credit_limit'::text) AND (amount = 0)))),
    CONSTRAINT transfers_kind_known CHECK ((kind = ANY (ARRAY['transfer'::text, 'hold'::text, 'capture'::text, 'void'::text, 'refund'::text, 'split'::text, 'credit_limit'::text, 'deposit'::text, 'withdrawal'::text, 'open_wallet'::text, 'freeze_wallet'::text, 'unfreeze_wallet'::text, 'close_wallet'::text]))),
    CONSTRAINT transfers_metadata_object CHECK (((metadata IS NULL) OR (jsonb_typeof(metadata) = 'object'::text))),
    CONSTRAINT transfers_original_by_kind CHECK (((kind = ANY (ARRAY['capture'::text, 'void'::text, 'refund'::text])) = (original_id IS NOT NULL))),
    CONSTRAINT transfers_reason_matches_status CHECK ((((status = 'applied'::text) AND (reason IS NULL)) OR ((status = 'rejected'::text) AND (reason = ANY (ARRAY['insufficient_funds'::text, 'unknown_wallet'::text, 'currency_mismatch'::text, 'same_wallet'::text, 'invalid_request'::text, 'hold_not_found'::text, 'hold_rejected'::text, 'hold_already_captured'::text, 'hold_already_voided'::text, 'hold_expired'::text, 'exceeds_hold_amount'::text, 'expiry_out_of_range'::text, 'original_not_found'::text, 'original_not_refundable'::text, 'refund_exceeds_original'::text, 'wallet_mismatch'::text, 'limit_below_used'::text, 'wallet_exists'::text, 'wallet_frozen'::text, 'wallet_closed'::text, 'wallet_not_empty'::text]))))),
    CONSTRAINT transfers_reference_by_kind CHECK (((kind = ANY (ARRAY['deposit'::text, 'withdrawal'::text])) = (reference IS NOT NULL))),
    CONSTRAINT transfers_status_known CHECK ((status = ANY (ARRAY['applied'::text, 'rejected'::text]))),
    CONSTRAINT transfers_transfer_complete CHECK (((kind <> 'transfer'::text) OR ((to_wallet IS NOT NULL) AND (amount IS NOT NULL))))
);

--
-- Name: decision_hold_ended(text, text, text, text, bigint, public.holds, public.transfers, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_hold_ended(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_hold public.holds, p_original public.transfers, p_now timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
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
$_$;

--
-- Name: decision_limit_changed(text, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_limit_changed(p_currency text, p_balance bigint, p_limit bigint, p_new_limit bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    expiry_released := FALSE;
    amount := p_new_limit;
    IF p_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_balance + p_new_limit < 0 THEN
        reason := 'limit_below_used';
    END IF;
    IF p_currency IS NOT NULL THEN
        detail := jsonb_build_object('creditLimit', p_new_limit::TEXT, 'previousCreditLimit', p_limit::TEXT,
                                     'used', GREATEST(-p_balance, 0)::TEXT);
    END IF;
END;
$$;

--
-- Name: decision_moved(text, text, text, text, bigint, text, text, text, bigint, timestamp with time zone, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_moved(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_from_currency text, p_to_currency text, p_balance bigint, p_expires timestamp with time zone, p_now timestamp with time zone, p_latest timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
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
$_$;

--
-- Name: decision_operations_locked(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_operations_locked(p_operation_ids text[]) RETURNS integer
    LANGUAGE plpgsql
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

--
-- Name: decision_recorded(text[], text[], text[], text[], text[], text[], bigint[], uuid[], text[], text[], text[], bigint[], jsonb[], text[], text[], text[], jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_recorded(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_currencies text[], p_refs text[], p_fences bigint[], p_lease_ids uuid[], p_statuses text[], p_reasons text[], p_credited text[], p_recorded_amounts bigint[], p_details jsonb[], p_expired text[], p_closed_ops text[], p_closed_hashes text[], p_metadata jsonb[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_events INTEGER;
BEGIN
    IF p_metadata IS NOT NULL AND cardinality(p_metadata) <> cardinality(p_statuses) THEN
        RAISE EXCEPTION 'decision: % metadata for % operations', cardinality(p_metadata), cardinality(p_statuses)
            USING ERRCODE = '22023';
    END IF;
    WITH recorded AS (
        SELECT p_operation_ids[i] AS operation_id, p_request_hashes[i] AS request_hash, p_kinds[i] AS kind,
               CASE WHEN p_kinds[i] IN ('capture', 'void', 'refund') THEN p_refs[i] END AS original,
               CASE WHEN p_kinds[i] IN ('deposit', 'withdrawal') THEN p_refs[i] END AS reference,
               p_froms[i] AS from_wallet, p_credited[i] AS to_wallet, p_recorded_amounts[i] AS amount,
               p_currencies[i] AS currency, p_statuses[i] AS status, p_reasons[i] AS reason, p_fences[i] AS fence,
               p_lease_ids[i] AS lease, p_details[i] AS detail, p_metadata[i] AS metadata, i AS element
          FROM generate_subscripts(p_statuses, 1) i
         WHERE p_statuses[i] IS NOT NULL
    ), inserted AS (
        INSERT INTO transfers (operation_id, request_hash, kind, original_id, reference, from_wallet, to_wallet, amount,
                               currency, status, reason, fence, lease, metadata)
        SELECT d.operation_id, d.request_hash, d.kind, d.original, d.reference, d.from_wallet, d.to_wallet, d.amount,
               d.currency, d.status, d.reason, d.fence, d.lease, d.metadata
          FROM recorded d
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
        RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                  q.amount, q.currency, d.request_hash AS decided_hash
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                 currency, detail, metadata)
    SELECT d.operation_id, d.status, d.reason, d.kind, d.original, d.from_wallet, d.to_wallet, d.amount, d.currency,
           d.detail, d.metadata
      FROM recorded d
    UNION ALL
    SELECT q.operation_id, 'conflict', NULL, q.kind, NULL, q.from_wallet, q.to_wallet, q.amount, q.currency, q.body, NULL
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

--
-- Name: decision_records_found(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_records_found(p_operation_ids text[], OUT r_op text[], OUT r_hash text[], OUT r_status text[], OUT r_reason text[], OUT r_fence bigint[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
           coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'), coalesce(array_agg(t.fence), '{}')
      INTO r_op, r_hash, r_status, r_reason, r_fence
      FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
END;
$$;

--
-- Name: decision_refunded(text, text, bigint, public.transfers, public.holds, bigint, bigint, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_refunded(p_from text, p_to text, p_amount bigint, p_original public.transfers, p_hold public.holds, p_leg_amount bigint, p_refunded bigint, p_from_currency text, p_payee_currency text, p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
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

--
-- Name: decision_refusal(text, text, text, text, text, bigint, bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_refusal(p_from text, p_to text, p_from_currency text, p_to_currency text, p_currency text, p_balance bigint, p_amount bigint, p_kind_refusal text DEFAULT NULL::text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE
        WHEN p_from = p_to THEN 'same_wallet'
        WHEN p_from_currency IS NULL OR p_to_currency IS NULL THEN 'unknown_wallet'
        WHEN p_from_currency <> p_to_currency OR p_currency <> p_from_currency THEN 'currency_mismatch'
        WHEN p_kind_refusal IS NOT NULL THEN p_kind_refusal
        WHEN p_balance < p_amount THEN 'insufficient_funds'
    END
$$;

--
-- Name: decision_settled(text, text, bigint, text, text, text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_settled(p_kind text, p_wallet text, p_amount bigint, p_currency text, p_reference text, p_wallet_currency text, p_spendable bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
DECLARE
    v_settlement TEXT := '$settlement:' || p_currency;
BEGIN
    expiry_released := FALSE;
    amount := p_amount;
    credited := CASE WHEN p_kind = 'deposit' THEN p_wallet END;
    detail := jsonb_build_object('reference', p_reference, 'settlement', v_settlement);
    IF p_wallet_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_wallet_currency <> p_currency THEN
        reason := 'currency_mismatch';
    ELSIF p_kind = 'withdrawal' AND p_spendable < p_amount THEN
        reason := 'insufficient_funds';
    ELSIF p_kind = 'deposit' THEN
        wallets := ARRAY[v_settlement, p_wallet];
        amounts := ARRAY[-p_amount, p_amount];
    ELSE
        wallets := ARRAY[p_wallet, v_settlement];
        amounts := ARRAY[-p_amount, p_amount];
    END IF;
END;
$_$;

--
-- Name: decision_settlements_locked(text[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_settlements_locked(p_kinds text[], p_currencies text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[]) RETURNS record
    LANGUAGE plpgsql
    AS $_$
BEGIN
    w_id := '{}'; w_currency := '{}'; w_balance := '{}';
    IF NOT ('deposit' = ANY (p_kinds) OR 'withdrawal' = ANY (p_kinds)) THEN
        RETURN;
    END IF;
    w_id := ARRAY(SELECT DISTINCT '$settlement:' || p_currencies[i] FROM generate_subscripts(p_kinds, 1) i
                   WHERE p_kinds[i] IN ('deposit', 'withdrawal') ORDER BY 1);
    PERFORM pg_advisory_xact_lock(hashtextextended(a.id, 0)) FROM unnest(w_id) WITH ORDINALITY AS a(id, n) ORDER BY a.n;
    SELECT array_agg(substr(a.id, 13) ORDER BY a.n),
           array_agg(coalesce((SELECT e.balance_after FROM ledger_entries e WHERE e.wallet_id = a.id
                                ORDER BY e.created_at DESC, e.id DESC LIMIT 1), 0) ORDER BY a.n)
      INTO w_currency, w_balance
      FROM unnest(w_id) WITH ORDINALITY AS a(id, n);
END;
$_$;

--
-- Name: decision_split(text, text, bigint, text, jsonb, text[], text[], bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_split(p_op text, p_from text, p_amount bigint, p_currency text, p_legs jsonb, p_wallet_ids text[], p_currencies text[], p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
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
$_$;

--
-- Name: decision_stale(bigint, uuid, bigint, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_stale(p_wallet_fence bigint, p_wallet_lease uuid, p_fence bigint, p_lease uuid) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT coalesce(p_wallet_fence > p_fence OR (p_wallet_fence = p_fence AND p_wallet_lease IS DISTINCT FROM p_lease), FALSE)
$$;

--
-- Name: split_legs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.split_legs (
    operation_id text NOT NULL,
    leg integer NOT NULL,
    to_wallet text NOT NULL,
    amount bigint NOT NULL,
    created_at timestamp(6) with time zone DEFAULT now() NOT NULL,
    CONSTRAINT split_legs_amount_positive CHECK ((amount > 0)),
    CONSTRAINT split_legs_leg_range CHECK (((leg >= 1) AND (leg <= 16)))
);

--
-- Name: decision_state_read(text[], text[], text[], text[], jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_state_read(p_kinds text[], p_froms text[], p_tos text[], p_refs text[], p_legs jsonb[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[], OUT h_id text[], OUT h public.holds[], OUT o_id text[], OUT o public.transfers[], OUT s public.split_legs[], OUT f_key text[], OUT f_sum bigint[]) RETURNS record
    LANGUAGE plpgsql
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
    w_fence := v_locked.w_fence; w_lease := v_locked.w_lease; w_limit := v_locked.w_limit; w_status := v_locked.w_status;
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
        w_limit := w_limit || v_locked.w_limit; w_status := w_status || v_locked.w_status;
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

--
-- Name: decision_status_refusal(text[], bigint[], text[], text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_status_refusal(p_wallets text[], p_amounts bigint[], w_id text[], w_status text[]) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $_$
    SELECT CASE WHEN bool_or(s = 'closed') THEN 'wallet_closed' WHEN bool_or(s IS NOT NULL) THEN 'wallet_frozen' END
      FROM (SELECT CASE WHEN (x.amount < 0 AND w_status[array_position(w_id, x.wallet)] <> 'open')
                          OR (x.amount > 0 AND w_status[array_position(w_id, x.wallet)] IN ('frozen', 'closed')
                              AND NOT ('$held:' || x.wallet) = ANY (p_wallets))
                        THEN w_status[array_position(w_id, x.wallet)] END AS s
              FROM unnest(p_wallets, p_amounts) AS x(wallet, amount)
             WHERE x.wallet NOT LIKE '$%') refused
$_$;

--
-- Name: decision_verdict(text, text, text, text, bigint, text, text, jsonb, timestamp with time zone, text[], text[], bigint, text[], public.holds[], text[], public.transfers[], public.split_legs[], text[], bigint[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_verdict(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_ref text, p_legs jsonb, p_now timestamp with time zone, w_id text[], w_currency text[], p_spendable bigint, h_id text[], h public.holds[], o_id text[], o public.transfers[], s public.split_legs[], f_key text[], f_sum bigint[]) RETURNS record
    LANGUAGE plpgsql STABLE
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
    ELSIF p_kind IN ('deposit', 'withdrawal') THEN
        RETURN decision_settled(p_kind, p_from, p_amount, p_currency, p_ref, w_currency[v_fi], p_spendable);
    END IF;
    RETURN decision_split(p_op, p_from, p_amount, p_currency, p_legs, w_id, w_currency, p_spendable);
END;
$$;

--
-- Name: decision_wallet_changed(text, text, bigint, text, text, text, bigint, bigint, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_wallet_changed(p_kind text, p_currency text, p_limit bigint, p_credits text, p_currency_now text, p_status text, p_balance bigint, p_held bigint, p_limit_now bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) RETURNS record
    LANGUAGE plpgsql IMMUTABLE
    AS $$
BEGIN
    expiry_released := FALSE;
    IF p_kind = 'open_wallet' THEN
        IF p_currency_now IS NOT NULL THEN
            reason := 'wallet_exists';
        END IF;
        detail := jsonb_build_object('status', 'open', 'currency', p_currency, 'creditLimit', p_limit::TEXT);
        RETURN;
    END IF;
    IF p_currency_now IS NULL THEN
        reason := 'unknown_wallet';
        RETURN;
    ELSIF p_status = 'closed' THEN
        reason := 'wallet_closed';
        RETURN;
    ELSIF p_kind = 'credit_limit' THEN
        SELECT l.reason, l.amount, l.detail INTO reason, amount, detail
          FROM decision_limit_changed(p_currency_now, p_balance, p_limit_now, p_limit) l;
        RETURN;
    END IF;
    detail := jsonb_build_object('previousStatus', p_status, 'status',
        CASE p_kind WHEN 'freeze_wallet' THEN CASE p_credits WHEN 'refused' THEN 'frozen' ELSE 'debits_frozen' END
                    WHEN 'unfreeze_wallet' THEN 'open'
                    ELSE 'closed' END);
    IF p_kind = 'close_wallet' AND (p_balance <> 0 OR p_held <> 0) THEN
        reason := 'wallet_not_empty';
        detail := jsonb_build_object('balance', p_balance::TEXT, 'held', p_held::TEXT);
    END IF;
END;
$$;

--
-- Name: decision_wallet_ids_checked(text[], jsonb[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_wallet_ids_checked(p_ids text[], p_legs jsonb[] DEFAULT NULL::jsonb[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_ids) i WHERE i LIKE '$%')
       OR EXISTS (SELECT 1 FROM unnest(p_legs) g, jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l
                   WHERE l ->> 'to' LIKE '$%') THEN
        RAISE EXCEPTION 'a wallet id starting with $ is the ledger''s own (a holding or funding account), never a message''s'
            USING ERRCODE = '22023';
    END IF;
    RETURN TRUE;
END;
$_$;

--
-- Name: decision_wallets_locked(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_wallets_locked(p_ids text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.held ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'), coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'),
           coalesce(array_agg(l.credit_limit ORDER BY l.id), '{}'), coalesce(array_agg(l.status ORDER BY l.id), '{}')
      INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_limit, w_status
      FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease, w.credit_limit, w.status FROM wallets w
             WHERE w.id = ANY (p_ids) ORDER BY w.id FOR UPDATE) l;
END;
$$;

--
-- Name: decision_written(text[], text[], bigint[], bigint[], bigint[], uuid[], bigint[], text[], boolean[], integer, text[], text[], bigint[], bigint[], bigint[], bigint[], uuid[], public.holds[], integer, boolean[], public.split_legs[], integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.decision_written(p_wallet_ids text[], p_currencies text[], p_balances bigint[], p_helds bigint[], p_fences bigint[], p_leases uuid[], p_limits bigint[], p_statuses text[], p_touched boolean[], p_wallets_read integer, p_entry_ops text[], p_entry_wallets text[], p_entry_amounts bigint[], p_entry_balances bigint[], p_entry_limits bigint[], p_entry_fences bigint[], p_entry_leases uuid[], p_holds public.holds[], p_holds_read integer, p_holds_ended boolean[], p_legs public.split_legs[], p_legs_read integer) RETURNS integer
    LANGUAGE plpgsql
    AS $_$
DECLARE
    v_touched INTEGER := 0;
    v_opened  INTEGER := cardinality(p_wallet_ids) - p_wallets_read;
    v_rows    INTEGER;
BEGIN
    IF v_opened > 0 THEN
        INSERT INTO wallets (id, currency, balance, held, credit_limit, status, last_fence, last_lease)
        SELECT u.id, u.currency, u.balance, u.held, u.credit_limit, u.status, u.last_fence, u.last_lease
          FROM unnest(p_wallet_ids[p_wallets_read + 1:], p_currencies[p_wallets_read + 1:],
                      p_balances[p_wallets_read + 1:], p_helds[p_wallets_read + 1:], p_limits[p_wallets_read + 1:],
                      p_statuses[p_wallets_read + 1:], p_fences[p_wallets_read + 1:], p_leases[p_wallets_read + 1:])
               AS u(id, currency, balance, held, credit_limit, status, last_fence, last_lease)
        ON CONFLICT (id) DO NOTHING;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_opened THEN
            RAISE EXCEPTION 'decision: % of the % wallets this batch opens were opened by another decision meanwhile',
                v_opened - v_rows, v_opened USING ERRCODE = '40001';
        END IF;
    END IF;
    -- A settlement account (`$settlement:`) has no row: its entries are all there is of it.
    FOR v_rows IN 1 .. p_wallets_read LOOP
        IF p_touched[v_rows] AND p_wallet_ids[v_rows] NOT LIKE '$%' THEN v_touched := v_touched + 1; END IF;
    END LOOP;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, held = u.held, last_fence = u.last_fence, last_lease = u.last_lease,
               credit_limit = u.credit_limit, status = u.status, updated_at = CURRENT_TIMESTAMP
          FROM unnest(p_wallet_ids[1:p_wallets_read], p_balances, p_helds, p_fences, p_leases, p_limits, p_statuses,
                      p_touched[1:p_wallets_read])
               AS u(id, balance, held, last_fence, last_lease, credit_limit, status, touched)
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
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, lease,
                                    created_at)
        SELECT e.op, e.wallet, CASE WHEN e.amount < 0 THEN 'debit' ELSE 'credit' END, e.amount, e.balance, e.credit_limit,
               e.fence, e.lease, clock_timestamp()
          FROM unnest(p_entry_ops, p_entry_wallets, p_entry_amounts, p_entry_balances, p_entry_limits, p_entry_fences,
                      p_entry_leases)
               WITH ORDINALITY AS e(op, wallet, amount, balance, credit_limit, fence, lease, n)
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
$_$;

--
-- Name: give_up_send_count(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.give_up_send_count(p_operation_id text, p_request_hash text) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT q.send_count FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.request_hash = p_request_hash
       AND q.decided_at IS NULL AND q.given_up_at IS NULL;
$$;

--
-- Name: holds_expire(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.holds_expire(p_limit integer DEFAULT 1000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
DECLARE
    v_ids      TEXT[];
    v_now      TIMESTAMPTZ := clock_timestamp();
    v_count    INTEGER;
    v_sources  INTEGER;
    v_rows     INTEGER;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'holds_expire: the limit must be from 1 to 10000' USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(c.hold_id) INTO v_ids FROM (
        SELECT h.hold_id FROM holds h WHERE h.state = 'active' AND h.expires_at <= v_now
         ORDER BY h.expires_at LIMIT p_limit) c;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM wallets w
     WHERE w.id IN (SELECT h.from_wallet FROM holds h WHERE h.hold_id = ANY (v_ids))
     ORDER BY w.id FOR UPDATE;
    PERFORM 1 FROM holds h WHERE h.hold_id = ANY (v_ids) ORDER BY h.hold_id FOR UPDATE;
    WITH ended AS (
        UPDATE holds h SET state = 'expired', released = h.amount, ended_at = v_now
         WHERE h.hold_id = ANY (v_ids) AND h.state = 'active' AND h.expires_at <= v_now
        RETURNING h.hold_id, h.from_wallet, h.to_wallet, h.amount, h.currency
    ), moved AS (
        UPDATE wallets w SET balance = w.balance + m.delta, held = w.held - m.delta, updated_at = CURRENT_TIMESTAMP
          FROM (SELECT e.from_wallet AS id, sum(e.amount)::BIGINT AS delta FROM ended e GROUP BY e.from_wallet) m
         WHERE w.id = m.id
        RETURNING w.id, w.balance, w.held, w.credit_limit
    ), released AS (
        -- A source's holds in hold-id order; each entry carries its account's balance after it,
        -- counted back from the row as written (the later releases taken off).
        SELECT e.hold_id, e.from_wallet, e.amount, m.balance, m.held, m.credit_limit,
               sum(e.amount) OVER (PARTITION BY e.from_wallet ORDER BY e.hold_id
                                   ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
          FROM ended e JOIN moved m ON m.id = e.from_wallet
    ), entries AS (
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, lease,
                                    created_at)
        SELECT '$expiry:' || r.hold_id, x.wallet, x.kind, x.amount, x.after, x.credit_limit, NULL, NULL, clock_timestamp()
          FROM released r
         CROSS JOIN LATERAL (VALUES (1, '$held:' || r.from_wallet, 'debit', -r.amount, r.held + coalesce(r.later, 0), NULL),
                                    (2, r.from_wallet, 'credit', r.amount, r.balance - coalesce(r.later, 0), r.credit_limit))
               AS x(n, wallet, kind, amount, after, credit_limit)
         ORDER BY r.from_wallet, r.hold_id, x.n
        RETURNING 1
    ), events AS (
        -- The release debits the source's holding account and credits the source: both are its
        -- `from`, and its `to` (docs/reference/wire-format.md).
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT e.hold_id, 'expired', NULL, 'hold', NULL, e.from_wallet, e.from_wallet, e.amount, e.currency, NULL
          FROM ended e
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM events), (SELECT count(DISTINCT e.from_wallet) FROM ended e), (SELECT count(*) FROM moved)
      INTO v_count, v_sources, v_rows;
    -- As the decisions check theirs: every source released into has its row written, or the whole
    -- sweep rolls back (a hold marked expired whose money stayed held is a broken ledger).
    IF v_rows <> v_sources THEN
        RAISE EXCEPTION 'holds_expire: % wallets to release into but % rows were written', v_sources, v_rows
            USING ERRCODE = 'XX000';
    END IF;
    RETURN v_count;
END;
$_$;

--
-- Name: ledger_entries_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.ledger_entries_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
        USING ERRCODE = '42501',
              HINT = 'post a correcting entry instead of changing or removing one';
END;
$$;

--
-- Name: lock_epoch_current(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lock_epoch_current() RETURNS TABLE(epoch integer, backend text)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT e.epoch, e.backend FROM lock_epochs e ORDER BY e.epoch DESC LIMIT 1;
$$;

--
-- Name: lock_epoch_open(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lock_epoch_open(p_backend text, p_note text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_epoch INTEGER;
BEGIN
    IF p_backend IS NULL OR p_backend NOT IN ('redis', 'etcd', 'postgres') THEN
        RAISE EXCEPTION 'lock_epoch_open: backend must be redis, etcd or postgres, got %', coalesce(p_backend, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    LOCK TABLE lock_epochs IN EXCLUSIVE MODE;
    SELECT coalesce(max(e.epoch), -1) + 1 INTO v_epoch FROM lock_epochs e;
    IF v_epoch > 1023 THEN
        RAISE EXCEPTION 'lock_epoch_open: the 1,024 lock epochs are spent' USING ERRCODE = '54000';
    END IF;
    INSERT INTO lock_epochs (epoch, backend, note) VALUES (v_epoch, p_backend, left(p_note, 200));
    RETURN v_epoch;
END
$$;

--
-- Name: lock_release(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lock_release(p_keys text[]) RETURNS boolean[]
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT coalesce(array_agg(pg_advisory_unlock(hashtextextended(k, 0)) ORDER BY i), '{}')
      FROM unnest(p_keys) WITH ORDINALITY AS u(k, i);
$$;

--
-- Name: lock_tokens_last(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lock_tokens_last() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT s.last_value FROM lock_tokens s;
$$;

--
-- Name: lock_try_acquire(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.lock_try_acquire(p_keys text[]) RETURNS bigint[]
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_tokens BIGINT[] := '{}';
    v_key TEXT;
BEGIN
    IF p_keys IS NULL OR cardinality(p_keys) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'lock_try_acquire: 1-256 keys' USING ERRCODE = '22023';
    END IF;
    FOREACH v_key IN ARRAY p_keys LOOP
        IF v_key IS NULL OR length(v_key) NOT BETWEEN 1 AND 256 THEN
            RAISE EXCEPTION 'lock_try_acquire: a key is 1-256 characters' USING ERRCODE = '22023';
        END IF;
        v_tokens := v_tokens || CASE WHEN pg_try_advisory_lock(hashtextextended(v_key, 0))
                                     THEN nextval('lock_tokens') END;
    END LOOP;
    RETURN v_tokens;
END
$$;

--
-- Name: operations_matching(text, text, text, text, timestamp with time zone, timestamp with time zone, jsonb, timestamp with time zone, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.operations_matching(p_wallet text, p_side text, p_kind text, p_status text, p_from timestamp with time zone, p_to timestamp with time zone, p_metadata jsonb, p_after_at timestamp with time zone, p_after_id text, p_limit integer) RETURNS TABLE(operation_id text, kind text, status text, reason text, from_wallet text, to_wallet text, amount bigint, currency text, original_id text, reference text, created_at timestamp with time zone, metadata jsonb, legs jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_kinds    TEXT[] := ARRAY['transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit',
                               'withdrawal', 'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet'];
    v_statuses TEXT[] := ARRAY['applied', 'rejected'];
    v_from     TIMESTAMPTZ := coalesce(p_from, '-infinity');
    v_to       TIMESTAMPTZ := coalesce(p_to, 'infinity');
    v_at       TIMESTAMPTZ := coalesce(p_after_at, '-infinity');
    v_id       TEXT := coalesce(p_after_id, '');
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 OR (p_after_at IS NULL) <> (p_after_id IS NULL)
       OR (p_wallet IS NULL) <> (p_side IS NULL) OR p_side NOT IN ('from', 'to', 'any')
       OR p_kind <> ALL (v_kinds) OR p_status <> ALL (v_statuses) OR v_from >= v_to
       OR jsonb_typeof(p_metadata) <> 'object' OR p_metadata = '{}' THEN
        RAISE EXCEPTION 'operations_matching: a limit from 1 to 1000, a whole cursor or none, a wallet with its side (from, to, any), a known kind and status, a range from before to, metadata pairs'
            USING ERRCODE = '22023';
    END IF;
    IF p_kind IS NOT NULL THEN v_kinds := ARRAY[p_kind]; END IF;
    IF p_status IS NOT NULL THEN v_statuses := ARRAY[p_status]; END IF;
    RETURN QUERY
        -- metadata: what the GIN index finds, alone (a fence: a generic plan, blind to the
        -- arguments, would otherwise AND it with a whole index's time range)
        WITH tagged AS MATERIALIZED (
            SELECT t.operation_id, t.created_at, t.kind, t.status, t.from_wallet, t.to_wallet FROM transfers t
             WHERE p_metadata IS NOT NULL AND t.metadata IS NOT NULL AND t.metadata @> p_metadata
        ), found AS MATERIALIZED (
            -- every other filter checked on what it found
            SELECT t.operation_id, t.created_at FROM tagged t
             WHERE (p_kind IS NULL OR t.kind = p_kind) AND (p_status IS NULL OR t.status = p_status)
               AND t.created_at >= v_from AND t.created_at < v_to AND (t.created_at, t.operation_id) > (v_at, v_id)
               AND (p_wallet IS NULL
                    OR (p_side <> 'to' AND t.from_wallet = p_wallet AND t.kind <> 'deposit')
                    OR (p_side <> 'from' AND (t.to_wallet = p_wallet
                        OR EXISTS (SELECT 1 FROM split_legs l WHERE l.operation_id = t.operation_id AND l.to_wallet = p_wallet))))
            UNION
            -- a wallet: one ordered range scan per side, each cut at the limit
            SELECT x.operation_id, x.created_at FROM (
                 SELECT t.operation_id, t.created_at FROM transfers t
                  WHERE t.from_wallet = p_wallet AND t.kind <> 'deposit'
                    AND t.created_at >= v_from AND t.created_at < v_to AND (t.created_at, t.operation_id) > (v_at, v_id)
                    AND (p_kind IS NULL OR t.kind = p_kind) AND (p_status IS NULL OR t.status = p_status)
                  ORDER BY t.created_at, t.operation_id LIMIT p_limit) x
             WHERE p_metadata IS NULL AND p_wallet IS NOT NULL AND p_side <> 'to'
            UNION
            SELECT x.operation_id, x.created_at FROM (
                 SELECT t.operation_id, t.created_at FROM transfers t
                  WHERE t.to_wallet = p_wallet
                    AND t.created_at >= v_from AND t.created_at < v_to AND (t.created_at, t.operation_id) > (v_at, v_id)
                    AND (p_kind IS NULL OR t.kind = p_kind) AND (p_status IS NULL OR t.status = p_status)
                  ORDER BY t.created_at, t.operation_id LIMIT p_limit) x
             WHERE p_metadata IS NULL AND p_wallet IS NOT NULL AND p_side <> 'from'
            UNION
            SELECT x.operation_id, x.created_at FROM (
                 SELECT DISTINCT l.operation_id, l.created_at FROM split_legs l
                  WHERE l.to_wallet = p_wallet
                    AND coalesce(p_kind, 'split') = 'split' AND coalesce(p_status, 'applied') = 'applied'
                    AND l.created_at >= v_from AND l.created_at < v_to AND (l.created_at, l.operation_id) > (v_at, v_id)
                  ORDER BY l.created_at, l.operation_id LIMIT p_limit) x
             WHERE p_metadata IS NULL AND p_wallet IS NOT NULL AND p_side <> 'from'
            UNION
            -- else: one ordered range scan per kind and status
            SELECT x.operation_id, x.created_at FROM unnest(v_kinds) k(kind) CROSS JOIN unnest(v_statuses) st(status)
             CROSS JOIN LATERAL (
                 SELECT t.operation_id, t.created_at FROM transfers t
                  WHERE t.kind = k.kind AND t.status = st.status
                    AND t.created_at >= v_from AND t.created_at < v_to AND (t.created_at, t.operation_id) > (v_at, v_id)
                  ORDER BY t.created_at, t.operation_id LIMIT p_limit) x
             WHERE p_metadata IS NULL AND p_wallet IS NULL
        ), page AS (
            SELECT f.operation_id FROM found f ORDER BY f.created_at, f.operation_id LIMIT p_limit
        )
        SELECT t.operation_id, t.kind, t.status, t.reason,
               CASE WHEN t.kind = 'deposit' THEN NULL ELSE t.from_wallet END, t.to_wallet,
               t.amount, trim(t.currency), t.original_id, t.reference, t.created_at, t.metadata,
               CASE WHEN t.kind = 'split' THEN (
                   SELECT jsonb_agg(jsonb_build_object('to', l.to_wallet, 'amount', l.amount::TEXT) ORDER BY l.leg)
                     FROM split_legs l WHERE l.operation_id = t.operation_id) END
          FROM page p JOIN transfers t ON t.operation_id = p.operation_id
         ORDER BY t.created_at, t.operation_id;
END;
$$;

--
-- Name: outcome_cursor_move(text, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_cursor_move(p_name text, p_position bigint) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH moved AS (
        UPDATE outcome_cursors c SET position = p_position, updated_at = now()
         WHERE c.name = outcome_cursor_name_checked(p_name) AND c.position <= p_position
           AND p_position <= (SELECT coalesce(max(e.position), 0) FROM outcome_events e)
        RETURNING 1
    )
    SELECT count(*) = 1 FROM moved;
$$;

--
-- Name: outcome_cursor_name_checked(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_cursor_name_checked(p_name text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
    IF p_name IS NULL OR p_name !~ '^outcomes-[a-z0-9][a-z0-9-]{0,54}$' THEN
        RAISE EXCEPTION 'outcome cursor: a name is outcomes- and 1 to 55 of [a-z0-9-], not %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    RETURN p_name;
END;
$_$;

--
-- Name: outcome_cursor_open(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_cursor_open(p_name text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
DECLARE
    v_name TEXT := outcome_cursor_name_checked(p_name);
BEGIN
    IF EXISTS (SELECT 1 FROM outcome_cursors c WHERE c.name = v_name) THEN
        RETURN FALSE;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('outcome_cursors:open', 0));
    IF (SELECT count(*) FROM outcome_cursors c WHERE c.name ~ '^outcomes-[a-z0-9][a-z0-9-]{0,54}$') >= 8 THEN
        RAISE EXCEPTION 'outcome_cursor_open: 8 outcome cursors exist already; the owner deletes one no publisher uses'
            USING ERRCODE = '54000';
    END IF;
    INSERT INTO outcome_cursors (name, position)
    VALUES (v_name, coalesce((SELECT min(e.position) - 1 FROM outcome_events e), 0))
    ON CONFLICT (name) DO NOTHING;
    RETURN FOUND;
END;
$_$;

--
-- Name: outcome_cursor_position(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_cursor_position(p_name text) RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT coalesce((SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name)), 0);
$$;

--
-- Name: outcome_cursor_take(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_cursor_take(p_name text) RETURNS bigint
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT c.position FROM outcome_cursors c WHERE c.name = outcome_cursor_name_checked(p_name) FOR UPDATE SKIP LOCKED;
$$;

--
-- Name: outcome_events_after(bigint, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_events_after(p_after bigint, p_limit integer DEFAULT 1000) RETURNS TABLE("position" bigint, operation_id text, kind text, reason text, from_wallet text, to_wallet text, amount bigint, currency text, decided_at timestamp with time zone, operation text, original_id text, detail jsonb, metadata jsonb)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_first BIGINT;
BEGIN
    IF p_after IS NULL OR p_after < 0 OR p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'outcome_events_after: position must be 0 or more and the limit from 1 to 10000'
            USING ERRCODE = '22023';
    END IF;
    SELECT min(e.position) INTO v_first FROM outcome_events e;
    IF v_first IS NOT NULL AND p_after < v_first - 1 THEN
        RAISE EXCEPTION 'outcome_events_after: positions before % were pruned; position % is gone', v_first, p_after + 1
            USING ERRCODE = 'FT001',
                  DETAIL = format('first kept position: %s', v_first),
                  HINT = format('read after %s to start at the first event kept', v_first - 1);
    END IF;
    RETURN QUERY
        SELECT e.position, e.operation_id, e.kind, e.reason, e.from_wallet, e.to_wallet, e.amount,
               e.currency::TEXT, e.decided_at, e.operation, e.original_id, e.detail, e.metadata
          FROM outcome_events e
         WHERE e.position > p_after
         ORDER BY e.position
         LIMIT p_limit;
END;
$$;

--
-- Name: outcome_feed_sequence(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.outcome_feed_sequence(p_limit integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_moved INTEGER;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outcome_feed_sequence: runs only in READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = '25000',
                  HINT = 'call it in a statement of its own, or set default_transaction_isolation to read committed for the role';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('outcome_feed:sequencer', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM outcome_pending p
         WHERE p.ctid = ANY (ARRAY(SELECT ctid FROM outcome_pending LIMIT greatest(1, least(p_limit, 100000))))
        RETURNING p.*
    ), base AS (
        SELECT coalesce(max(e.position), 0) AS last FROM outcome_events e
    )
    INSERT INTO outcome_events (position, operation_id, kind, reason, from_wallet, to_wallet, amount, currency, decided_at,
                                operation, original_id, detail, metadata)
    SELECT b.last + row_number() OVER (ORDER BY m.id), m.operation_id, m.kind, m.reason, m.from_wallet, m.to_wallet,
           m.amount, m.currency, m.decided_at, m.operation, m.original_id, m.detail, m.metadata
      FROM moved m CROSS JOIN base b;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;

--
-- Name: record_transfer_given_up(text, text, text, integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.record_transfer_given_up(p_operation_id text, p_request_hash text, p_reason text, p_send_count integer) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
DECLARE
    v_reason TEXT := left(coalesce(p_reason, 'no reason given'), 500);
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_request_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_transfer_given_up: an operation and the 64-hex-digit hash of its body must be given'
            USING ERRCODE = '22023';
    END IF;
    IF p_send_count IS NULL OR p_send_count < 0 THEN
        RAISE EXCEPTION 'record_transfer_given_up: the send the give-up belongs to (send_count, 0 or more) must be given'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    WITH parked AS (
        UPDATE transfer_requests q
           SET given_up_at = clock_timestamp(), give_up_count = q.give_up_count + 1, give_up_reason = v_reason
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL AND q.given_up_at IS NULL
           AND q.request_hash = p_request_hash AND q.send_count = p_send_count
        RETURNING q.operation_id, q.kind, q.body, q.from_wallet, q.to_wallet, q.amount, q.currency
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, from_wallet, to_wallet, amount, currency, detail)
    SELECT p.operation_id, 'given_up', v_reason, p.kind, p.from_wallet, p.to_wallet, p.amount, p.currency, p.body
      FROM parked p;
    RETURN FOUND;
END;
$_$;

--
-- Name: relay_claim_first_sends(integer); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_claim_first_sends(p_limit integer) RETURNS TABLE(operation_id text, request_hash text, from_wallet text, to_wallet text, amount bigint, currency text, send_count integer, kind text, body jsonb, trace_context jsonb, claim uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_claim UUID := gen_random_uuid();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'relay_claim_first_sends: the limit must be from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL AND r.sent_at IS NULL
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q
           SET sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = v_claim
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context, q.relay_claim;
END;
$$;

--
-- Name: relay_claim_resends(integer, double precision); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_claim_resends(p_limit integer, p_due_after_ms double precision) RETURNS TABLE(operation_id text, request_hash text, from_wallet text, to_wallet text, amount bigint, currency text, send_count integer, kind text, body jsonb, trace_context jsonb, claim uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
DECLARE
    v_claim UUID := gen_random_uuid();
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
        RAISE EXCEPTION 'relay_claim_resends: the limit must be from 1 to 1000' USING ERRCODE = '22023';
    END IF;
    IF p_due_after_ms IS NULL OR p_due_after_ms < 0 THEN
        RAISE EXCEPTION 'relay_claim_resends: the wait before a re-send must be 0 ms or more' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        WITH picked AS (
            SELECT r.operation_id FROM transfer_requests r
             WHERE r.decided_at IS NULL AND r.given_up_at IS NULL
               AND r.sent_at < now() - make_interval(secs => p_due_after_ms / 1000)
             ORDER BY r.sent_at NULLS FIRST
             LIMIT p_limit
             FOR UPDATE SKIP LOCKED
        )
        UPDATE transfer_requests q
           SET sent_at = clock_timestamp(), send_count = q.send_count + 1, relay_claim = v_claim
          FROM picked p WHERE q.operation_id = p.operation_id
        RETURNING q.operation_id, q.request_hash::TEXT, q.from_wallet, q.to_wallet, q.amount, q.currency::TEXT,
                  q.send_count, q.kind, q.body, q.trace_context, q.relay_claim;
END;
$$;

--
-- Name: relay_count_lost(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_count_lost(p_operation_ids text[]) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    WITH counted AS (
        UPDATE transfer_requests q SET lost_count = q.lost_count + 1
         WHERE q.operation_id = ANY (p_operation_ids) AND q.send_count > 1
        RETURNING 1
    )
    SELECT count(*)::INTEGER FROM counted;
$$;

--
-- Name: relay_intake_backlog(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_intake_backlog() RETURNS TABLE(open bigint, unsent bigint, given_up bigint, lag_seconds double precision)
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
    SELECT count(*),
           count(*) FILTER (WHERE r.sent_at IS NULL),
           count(*) FILTER (WHERE r.given_up_at IS NOT NULL),
           extract(epoch FROM clock_timestamp() - min(r.requested_at) FILTER (WHERE r.sent_at IS NULL))::DOUBLE PRECISION
      FROM transfer_requests r WHERE r.decided_at IS NULL;
$$;

--
-- Name: relay_record_given_up(text, text, integer, uuid); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_record_given_up(p_operation_id text, p_reason text, p_send_count integer, p_claim uuid) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_hash TEXT;
BEGIN
    IF p_operation_id IS NULL OR p_send_count IS NULL OR p_claim IS NULL THEN
        RAISE EXCEPTION 'relay_record_given_up: an operation, the send_count and the claim of its re-send must be given'
            USING ERRCODE = '22023';
    END IF;
    SELECT q.request_hash::TEXT INTO v_hash FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.relay_claim = p_claim AND q.send_count = p_send_count
       AND q.send_count > 1;
    IF v_hash IS NULL THEN
        RETURN FALSE;
    END IF;
    -- Checks the send again under the operation's lock: a claim moves send_count, so the same
    -- send is the same claim.
    RETURN record_transfer_given_up(p_operation_id, v_hash, p_reason, p_send_count);
END;
$$;

--
-- Name: relay_requests_decided(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_requests_decided(p_operation_ids text[]) RETURNS SETOF text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    IF p_operation_ids IS NULL OR cardinality(p_operation_ids) > 10000 THEN
        RAISE EXCEPTION 'relay_requests_decided: from 0 to 10000 operation ids' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.operation_id FROM transfer_requests r
         WHERE r.operation_id = ANY (p_operation_ids) AND r.decided_at IS NOT NULL;
END;
$$;

--
-- Name: relay_trace_contexts(text[]); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.relay_trace_contexts(p_operation_ids text[]) RETURNS TABLE(operation_id text, trace_context jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
#variable_conflict use_column
BEGIN
    IF p_operation_ids IS NULL OR cardinality(p_operation_ids) > 10000 THEN
        RAISE EXCEPTION 'relay_trace_contexts: from 0 to 10000 operation ids' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT r.operation_id, r.trace_context FROM transfer_requests r
         WHERE r.operation_id = ANY (p_operation_ids) AND r.trace_context IS NOT NULL;
END
$$;

--
-- Name: request_amount_valid(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_amount_valid(p_amount jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
    SELECT CASE
        WHEN p_amount IS NULL OR jsonb_typeof(p_amount) <> 'string' OR (p_amount #>> '{}') !~ '^[0-9]{1,19}$' THEN FALSE
        ELSE (p_amount #>> '{}')::NUMERIC BETWEEN 1 AND 999999999999999999
    END
$_$;

--
-- Name: request_decide_invalid(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_decide_invalid(p_operation_id text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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

--
-- Name: request_hold_expiry_problem(jsonb, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_hold_expiry_problem(p_body jsonb, p_max bigint) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
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
$_$;

--
-- Name: request_metadata_lines(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_metadata_lines(p_metadata jsonb) RETURNS text[]
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT coalesce(ARRAY(SELECT e.key || '=' || e.value FROM jsonb_each_text(p_metadata) e ORDER BY e.key COLLATE "C"),
                    '{}'::TEXT[])
$$;

--
-- Name: request_metadata_problem(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_metadata_problem(p_metadata jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
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
$_$;

--
-- Name: request_operation(jsonb, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_operation(p_body jsonb, p_hold_expiry_max_ms bigint DEFAULT 604800000) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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
    -- A transfer without metadata is request_transfer()'s (no body kept); with it, its body is kept.
    IF v_kind = 'transfer' AND NOT p_body ? 'metadata' THEN
        RETURN request_transfer(p_body ->> 'operationId', p_body ->> 'from', p_body ->> 'to',
                                (p_body ->> 'amount')::BIGINT, p_body ->> 'currency');
    END IF;
    v_op := p_body ->> 'operationId';
    v_from := p_body ->> 'from';
    v_to := p_body ->> 'to';
    v_amount := (p_body ->> 'amount')::BIGINT;
    v_currency := p_body ->> 'currency';

    IF v_kind = 'transfer' THEN
        v_lines := ARRAY['v1', v_from, v_to, v_amount::TEXT, coalesce(v_currency, '')];
    ELSIF v_kind = 'hold' THEN
        v_lines := ARRAY['v2', 'hold', v_from, v_to, v_amount::TEXT, coalesce(v_currency, ''),
                         coalesce(p_body ->> 'expiresInMs', ''), coalesce(p_body ->> 'expiresAt', '')];
    ELSIF v_kind = 'capture' THEN
        v_lines := ARRAY['v2', 'capture', v_from, p_body ->> 'hold', coalesce(v_amount::TEXT, '')];
    ELSIF v_kind = 'void' THEN
        v_lines := ARRAY['v2', 'void', v_from, p_body ->> 'hold'];
    ELSIF v_kind = 'refund' THEN
        v_lines := ARRAY['v2', 'refund', v_from, p_body ->> 'original', coalesce(v_amount::TEXT, '')];
    ELSIF v_kind = 'credit_limit' THEN
        v_lines := ARRAY['v2', 'credit_limit', v_from, ((p_body ->> 'limit')::NUMERIC)::TEXT];
    ELSIF v_kind IN ('deposit', 'withdrawal') THEN
        -- A deposit is decided on the wallet it credits: its `to` is the request's wallet.
        v_from := coalesce(v_from, v_to);
        v_lines := ARRAY['v2', v_kind, v_from, v_amount::TEXT, v_currency, p_body ->> 'reference'];
    ELSIF v_kind LIKE '%\_wallet' THEN
        -- A wallet operation is decided on its `wallet`; absent fields hash as their defaults.
        v_from := p_body ->> 'wallet';
        v_lines := ARRAY['v2', v_kind, v_from] || CASE v_kind
            WHEN 'open_wallet' THEN ARRAY[v_currency, coalesce((p_body ->> 'creditLimit')::NUMERIC, 0)::TEXT]
            WHEN 'freeze_wallet' THEN ARRAY[coalesce(p_body ->> 'credits', 'allowed')]
            ELSE ARRAY[]::TEXT[] END;
    ELSE
        FOR v_leg IN SELECT l FROM jsonb_array_elements(p_body -> 'legs') l LOOP
            v_legs := v_legs || (v_leg ->> 'to') || ((v_leg ->> 'amount')::NUMERIC::TEXT);
            v_total := v_total + (v_leg ->> 'amount')::NUMERIC;
        END LOOP;
        v_amount := v_total::BIGINT;
        v_lines := ARRAY['v2', 'split', v_from, coalesce(v_currency, '')] || v_legs;
    END IF;
    v_lines := v_lines || request_metadata_lines(p_body -> 'metadata');
    v_hash := encode(sha256(convert_to(array_to_string(v_lines, E'\n'), 'UTF8')), 'hex');

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || v_op, 0));
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = v_op;
    INSERT INTO transfer_requests (operation_id, request_hash, kind, body, from_wallet, to_wallet, amount, currency,
                                   decided_at)
    VALUES (v_op, v_hash, v_kind, p_body, v_from, CASE WHEN v_kind IN ('transfer', 'hold') THEN v_to END, v_amount,
            v_currency, v_decided)
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

--
-- Name: request_operation(jsonb, bigint, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_operation(p_body jsonb, p_hold_expiry_max_ms bigint, p_trace_context jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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

--
-- Name: request_operation_problem(jsonb, bigint); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_operation_problem(p_body jsonb, p_hold_expiry_max_ms bigint) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
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
$_$;

--
-- Name: request_trace_context_check(jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_trace_context_check(p_trace_context jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    AS $_$
BEGIN
    IF p_trace_context IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(p_trace_context) <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_object_keys(p_trace_context) k WHERE k NOT IN ('traceparent', 'tracestate'))
       OR jsonb_typeof(p_trace_context -> 'traceparent') IS DISTINCT FROM 'string'
       OR (p_trace_context ->> 'traceparent') !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       OR (p_trace_context ? 'tracestate' AND jsonb_typeof(p_trace_context -> 'tracestate') <> 'string') THEN
        RAISE EXCEPTION 'request: the trace context must be {traceparent, tracestate?} with a W3C traceparent'
            USING ERRCODE = '22023';
    END IF;
END;
$_$;

--
-- Name: request_transfer(text, text, text, bigint, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text DEFAULT NULL::text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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

--
-- Name: request_transfer(text, text, text, bigint, text, jsonb); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text, p_trace_context jsonb) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    v_answer TEXT;
BEGIN
    PERFORM request_trace_context_check(p_trace_context);
    v_answer := request_transfer(p_operation_id, p_from, p_to, p_amount, p_currency);
    IF v_answer = 'requested' AND p_trace_context IS NOT NULL THEN
        UPDATE transfer_requests q SET trace_context = p_trace_context
         WHERE q.operation_id = p_operation_id AND q.trace_context IS NULL;
    END IF;
    RETURN v_answer;
END;
$$;

--
-- Name: wallet_balance_at(text, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wallet_balance_at(p_wallet text, p_at timestamp with time zone) RETURNS TABLE(wallet_id text, currency text, balance bigint, held bigint, last_entry bigint, at timestamp with time zone)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
BEGIN
    IF p_wallet IS NULL OR p_at IS NULL THEN
        RAISE EXCEPTION 'wallet_balance_at: the wallet and the instant are required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT w.id, w.currency::TEXT, coalesce(b.balance_after, 0), coalesce(h.balance_after, 0),
               GREATEST(b.id, h.id), p_at
          FROM wallets w
          LEFT JOIN LATERAL (
              SELECT e.id, e.balance_after FROM ledger_entries e
               WHERE e.wallet_id = w.id AND e.created_at <= p_at
               ORDER BY e.created_at DESC, e.id DESC LIMIT 1) b ON TRUE
          LEFT JOIN LATERAL (
              SELECT e.id, e.balance_after FROM ledger_entries e
               WHERE e.wallet_id = '$held:' || w.id AND e.created_at <= p_at
               ORDER BY e.created_at DESC, e.id DESC LIMIT 1) h ON TRUE
         WHERE w.id = p_wallet;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'wallet_balance_at: no wallet %', p_wallet USING ERRCODE = 'P0002';
    END IF;
END;
$_$;

--
-- Name: wallet_statement(text, timestamp with time zone, timestamp with time zone, timestamp with time zone, bigint, integer, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.wallet_statement(p_wallet text, p_from timestamp with time zone, p_to timestamp with time zone, p_after_at timestamp with time zone, p_after_id bigint, p_limit integer, p_held boolean DEFAULT false) RETURNS TABLE(entry_id bigint, at timestamp with time zone, operation_id text, account text, kind text, amount bigint, balance_after bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $_$
BEGIN
    IF p_wallet IS NULL OR p_from IS NULL OR p_to IS NULL OR p_limit IS NULL OR p_limit < 1 OR p_limit > 1000
       OR (p_after_at IS NULL) <> (p_after_id IS NULL) OR p_held IS NULL THEN
        RAISE EXCEPTION 'wallet_statement: a wallet, a range, a limit from 1 to 1000 and a whole cursor or none'
            USING ERRCODE = '22023';
    END IF;
    PERFORM 1 FROM wallets w WHERE w.id = p_wallet;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'wallet_statement: no wallet %', p_wallet USING ERRCODE = 'P0002';
    END IF;
    RETURN QUERY
        SELECT x.id, x.created_at, x.operation_id, x.wallet_id, x.kind, x.amount, x.balance_after
          FROM (
              SELECT e.id, e.created_at, e.operation_id, e.wallet_id, e.kind, e.amount, e.balance_after
                FROM ledger_entries e
               WHERE e.wallet_id = p_wallet AND e.created_at >= p_from AND e.created_at < p_to
                 AND (p_after_at IS NULL OR (e.created_at, e.id) > (p_after_at, p_after_id))
               ORDER BY e.created_at, e.id LIMIT p_limit
          ) x
        UNION ALL
        SELECT y.id, y.created_at, y.operation_id, y.wallet_id, y.kind, y.amount, y.balance_after
          FROM (
              SELECT e.id, e.created_at, e.operation_id, e.wallet_id, e.kind, e.amount, e.balance_after
                FROM ledger_entries e
               WHERE p_held AND e.wallet_id = '$held:' || p_wallet AND e.created_at >= p_from AND e.created_at < p_to
                 AND (p_after_at IS NULL OR (e.created_at, e.id) > (p_after_at, p_after_id))
               ORDER BY e.created_at, e.id LIMIT p_limit
          ) y
         ORDER BY 2, 1
         LIMIT p_limit;
END;
$_$;

--
-- Name: ledger_entries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ledger_entries (
    id bigint NOT NULL,
    operation_id text NOT NULL,
    wallet_id text NOT NULL,
    kind text NOT NULL,
    amount bigint NOT NULL,
    fence bigint,
    created_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    lease uuid,
    balance_after bigint NOT NULL,
    credit_limit bigint,
    CONSTRAINT ledger_entries_kind_known CHECK ((kind = ANY (ARRAY['opening'::text, 'funding'::text, 'debit'::text, 'credit'::text]))),
    CONSTRAINT ledger_entries_sign_matches_kind CHECK ((((kind = ANY (ARRAY['opening'::text, 'credit'::text])) AND (amount > 0)) OR ((kind = ANY (ARRAY['funding'::text, 'debit'::text])) AND (amount < 0))))
);

--
-- Name: ledger_entries_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.ledger_entries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: ledger_entries_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.ledger_entries_id_seq OWNED BY public.ledger_entries.id;

--
-- Name: lock_epochs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.lock_epochs (
    epoch integer NOT NULL,
    backend text NOT NULL,
    opened_at timestamp(6) with time zone DEFAULT now() NOT NULL,
    note text,
    CONSTRAINT lock_epochs_backend_check CHECK ((backend = ANY (ARRAY['redis'::text, 'etcd'::text, 'postgres'::text]))),
    CONSTRAINT lock_epochs_epoch_check CHECK (((epoch >= 0) AND (epoch <= 1023))),
    CONSTRAINT lock_epochs_note_check CHECK ((length(note) <= 200))
);

--
-- Name: lock_tokens; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.lock_tokens
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    MAXVALUE 9007199254740991
    CACHE 1;

--
-- Name: outcome_cursors; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outcome_cursors (
    name text NOT NULL,
    "position" bigint DEFAULT 0 NOT NULL,
    updated_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL
);

--
-- Name: outcome_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outcome_events (
    "position" bigint NOT NULL,
    operation_id text NOT NULL,
    kind text NOT NULL,
    reason text,
    from_wallet text NOT NULL,
    to_wallet text,
    amount bigint,
    currency character(3),
    decided_at timestamp(6) with time zone NOT NULL,
    sequenced_at timestamp(6) with time zone DEFAULT clock_timestamp() NOT NULL,
    operation text DEFAULT 'transfer'::text NOT NULL,
    original_id text,
    detail jsonb,
    metadata jsonb,
    CONSTRAINT outcome_events_kind_known CHECK ((kind = ANY (ARRAY['applied'::text, 'rejected'::text, 'given_up'::text, 'conflict'::text, 'expired'::text]))),
    CONSTRAINT outcome_events_operation_known CHECK ((operation = ANY (ARRAY['transfer'::text, 'hold'::text, 'capture'::text, 'void'::text, 'refund'::text, 'split'::text, 'credit_limit'::text, 'deposit'::text, 'withdrawal'::text, 'open_wallet'::text, 'freeze_wallet'::text, 'unfreeze_wallet'::text, 'close_wallet'::text]))),
    CONSTRAINT outcome_events_position_positive CHECK (("position" > 0))
);

--
-- Name: outcome_pending; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.outcome_pending (
    id bigint NOT NULL,
    operation_id text NOT NULL,
    kind text NOT NULL,
    reason text,
    from_wallet text NOT NULL,
    to_wallet text,
    amount bigint,
    currency character(3),
    decided_at timestamp(6) with time zone DEFAULT clock_timestamp() NOT NULL,
    operation text DEFAULT 'transfer'::text NOT NULL,
    original_id text,
    detail jsonb,
    metadata jsonb,
    CONSTRAINT outcome_pending_kind_known CHECK ((kind = ANY (ARRAY['applied'::text, 'rejected'::text, 'given_up'::text, 'conflict'::text, 'expired'::text])))
);

--
-- Name: outcome_pending_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.outcome_pending_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: outcome_pending_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.outcome_pending_id_seq OWNED BY public.outcome_pending.id;

--
-- Name: transfer_requests; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.transfer_requests (
    operation_id text NOT NULL,
    request_hash character(64) NOT NULL,
    from_wallet text NOT NULL,
    to_wallet text,
    amount bigint,
    currency character(3),
    requested_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    sent_at timestamp(6) with time zone,
    send_count integer DEFAULT 0 NOT NULL,
    lost_count integer DEFAULT 0 NOT NULL,
    decided_at timestamp(6) with time zone,
    given_up_at timestamp(6) with time zone,
    give_up_count integer DEFAULT 0 NOT NULL,
    give_up_reason text,
    kind text DEFAULT 'transfer'::text NOT NULL,
    body jsonb,
    trace_context jsonb,
    relay_claim uuid,
    CONSTRAINT transfer_requests_amount_positive CHECK ((amount > 0)),
    CONSTRAINT transfer_requests_body_by_kind CHECK ((((kind = 'transfer'::text) AND (to_wallet IS NOT NULL) AND (amount IS NOT NULL) AND ((body IS NULL) OR (jsonb_typeof(body) = 'object'::text))) OR ((kind <> 'transfer'::text) AND (jsonb_typeof(body) = 'object'::text)))),
    CONSTRAINT transfer_requests_counts_non_negative CHECK (((send_count >= 0) AND (lost_count >= 0) AND (give_up_count >= 0))),
    CONSTRAINT transfer_requests_kind_known CHECK ((kind = ANY (ARRAY['transfer'::text, 'hold'::text, 'capture'::text, 'void'::text, 'refund'::text, 'split'::text, 'credit_limit'::text, 'deposit'::text, 'withdrawal'::text, 'open_wallet'::text, 'freeze_wallet'::text, 'unfreeze_wallet'::text, 'close_wallet'::text]))),
    CONSTRAINT transfer_requests_trace_context_bounded CHECK (((trace_context IS NULL) OR ((jsonb_typeof(trace_context) = 'object'::text) AND (octet_length((trace_context)::text) <= 1024))))
);

--
-- Name: wallets; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.wallets (
    id text NOT NULL,
    currency character(3) NOT NULL,
    balance bigint DEFAULT 0 NOT NULL,
    last_fence bigint DEFAULT 0 NOT NULL,
    created_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    updated_at timestamp(6) with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL,
    last_lease uuid,
    held bigint DEFAULT 0 NOT NULL,
    credit_limit bigint DEFAULT 0 NOT NULL,
    status text DEFAULT 'open'::text NOT NULL,
    CONSTRAINT wallets_balance_within_limit CHECK ((balance >= (- credit_limit))),
    CONSTRAINT wallets_closed_empty CHECK (((status <> 'closed'::text) OR ((balance = 0) AND (held = 0)))),
    CONSTRAINT wallets_credit_limit_range CHECK (((credit_limit >= 0) AND (credit_limit <= '100000000000000000'::bigint))),
    CONSTRAINT wallets_currency_format CHECK ((currency ~ '^[A-Z]{3}$'::text)),
    CONSTRAINT wallets_held_non_negative CHECK ((held >= 0)),
    CONSTRAINT wallets_last_fence_non_negative CHECK ((last_fence >= 0)),
    CONSTRAINT wallets_status_known CHECK ((status = ANY (ARRAY['open'::text, 'debits_frozen'::text, 'frozen'::text, 'closed'::text])))
);

--
-- Name: ledger_entries id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries ALTER COLUMN id SET DEFAULT nextval('public.ledger_entries_id_seq'::regclass);

--
-- Name: outcome_pending id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outcome_pending ALTER COLUMN id SET DEFAULT nextval('public.outcome_pending_id_seq'::regclass);

--
-- Name: holds holds_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.holds
    ADD CONSTRAINT holds_pkey PRIMARY KEY (hold_id);

--
-- Name: ledger_entries ledger_entries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ledger_entries
    ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (id);

--
-- Name: lock_epochs lock_epochs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.lock_epochs
    ADD CONSTRAINT lock_epochs_pkey PRIMARY KEY (epoch);

--
-- Name: outcome_cursors outcome_cursors_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outcome_cursors
    ADD CONSTRAINT outcome_cursors_pkey PRIMARY KEY (name);

--
-- Name: outcome_events outcome_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.outcome_events
    ADD CONSTRAINT outcome_events_pkey PRIMARY KEY ("position");

--
-- Name: split_legs split_legs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.split_legs
    ADD CONSTRAINT split_legs_pkey PRIMARY KEY (operation_id, leg);

--
-- Name: transfer_requests transfer_requests_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.transfer_requests
    ADD CONSTRAINT transfer_requests_pkey PRIMARY KEY (operation_id);

--
-- Name: transfers transfers_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.transfers
    ADD CONSTRAINT transfers_pkey PRIMARY KEY (operation_id);

--
-- Name: wallets wallets_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.wallets
    ADD CONSTRAINT wallets_pkey PRIMARY KEY (id);

--
-- Name: holds_active_expiry_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX holds_active_expiry_idx ON public.holds USING btree (expires_at) WHERE (state = 'active'::text);

--
-- Name: ledger_entries_operation_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_entries_operation_id_idx ON public.ledger_entries USING btree (operation_id);

--
-- Name: ledger_entries_wallet_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ledger_entries_wallet_time_idx ON public.ledger_entries USING btree (wallet_id, created_at, id);

--
-- Name: outcome_events_operation_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX outcome_events_operation_id_idx ON public.outcome_events USING btree (operation_id);

--
-- Name: split_legs_to_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX split_legs_to_time_idx ON public.split_legs USING btree (to_wallet, created_at, operation_id);

--
-- Name: transfer_requests_open_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfer_requests_open_idx ON public.transfer_requests USING btree (sent_at NULLS FIRST) WHERE (decided_at IS NULL);

--
-- Name: transfers_from_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfers_from_time_idx ON public.transfers USING btree (from_wallet, created_at, operation_id);

--
-- Name: transfers_kind_status_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfers_kind_status_time_idx ON public.transfers USING btree (kind, status, created_at, operation_id);

--
-- Name: transfers_metadata_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfers_metadata_idx ON public.transfers USING gin (metadata jsonb_path_ops) WHERE (metadata IS NOT NULL);

--
-- Name: transfers_original_id_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfers_original_id_idx ON public.transfers USING btree (original_id) WHERE (kind = 'refund'::text);

--
-- Name: transfers_to_time_idx; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX transfers_to_time_idx ON public.transfers USING btree (to_wallet, created_at, operation_id) WHERE (to_wallet IS NOT NULL);

--
-- Name: ledger_entries ledger_entries_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON public.ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_entries_append_only();

--
-- Name: ledger_entries ledger_entries_no_update_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER ledger_entries_no_update_delete BEFORE DELETE OR UPDATE ON public.ledger_entries FOR EACH STATEMENT EXECUTE FUNCTION public.ledger_entries_append_only();

--
-- Name: FUNCTION apply_payments(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.apply_payments(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[]) FROM PUBLIC;

--
-- Name: FUNCTION apply_transfer(p_operation_id text, p_request_hash text, p_from text, p_to text, p_amount bigint, p_currency text, p_fence bigint, p_lease_id uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.apply_transfer(p_operation_id text, p_request_hash text, p_from text, p_to text, p_amount bigint, p_currency text, p_fence bigint, p_lease_id uuid) FROM PUBLIC;

--
-- Name: FUNCTION apply_transfers(p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_fences bigint[], p_lease_ids uuid[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.apply_transfers(p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_fences bigint[], p_lease_ids uuid[]) FROM PUBLIC;

--
-- Name: FUNCTION decide_batch(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decide_batch(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint, p_metadata jsonb[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_answer(p_record_hash text, p_request_hash text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_answer(p_record_hash text, p_request_hash text) FROM PUBLIC;

--
-- Name: FUNCTION decision_arguments_checked(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_arguments_checked(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_tos text[], p_amounts bigint[], p_currencies text[], p_refs text[], p_expires_in_ms bigint[], p_expires_at timestamp with time zone[], p_legs jsonb[], p_fences bigint[], p_lease_ids uuid[], p_hold_expiry_max_ms bigint) FROM PUBLIC;

--
-- Name: FUNCTION decision_hold_ended(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_hold public.holds, p_original public.transfers, p_now timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_hold_ended(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_hold public.holds, p_original public.transfers, p_now timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_limit_changed(p_currency text, p_balance bigint, p_limit bigint, p_new_limit bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_limit_changed(p_currency text, p_balance bigint, p_limit bigint, p_new_limit bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_moved(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_from_currency text, p_to_currency text, p_balance bigint, p_expires timestamp with time zone, p_now timestamp with time zone, p_latest timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_moved(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_from_currency text, p_to_currency text, p_balance bigint, p_expires timestamp with time zone, p_now timestamp with time zone, p_latest timestamp with time zone, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_operations_locked(p_operation_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_operations_locked(p_operation_ids text[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_recorded(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_currencies text[], p_refs text[], p_fences bigint[], p_lease_ids uuid[], p_statuses text[], p_reasons text[], p_credited text[], p_recorded_amounts bigint[], p_details jsonb[], p_expired text[], p_closed_ops text[], p_closed_hashes text[], p_metadata jsonb[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_recorded(p_kinds text[], p_operation_ids text[], p_request_hashes text[], p_froms text[], p_currencies text[], p_refs text[], p_fences bigint[], p_lease_ids uuid[], p_statuses text[], p_reasons text[], p_credited text[], p_recorded_amounts bigint[], p_details jsonb[], p_expired text[], p_closed_ops text[], p_closed_hashes text[], p_metadata jsonb[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_records_found(p_operation_ids text[], OUT r_op text[], OUT r_hash text[], OUT r_status text[], OUT r_reason text[], OUT r_fence bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_records_found(p_operation_ids text[], OUT r_op text[], OUT r_hash text[], OUT r_status text[], OUT r_reason text[], OUT r_fence bigint[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_refunded(p_from text, p_to text, p_amount bigint, p_original public.transfers, p_hold public.holds, p_leg_amount bigint, p_refunded bigint, p_from_currency text, p_payee_currency text, p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_refunded(p_from text, p_to text, p_amount bigint, p_original public.transfers, p_hold public.holds, p_leg_amount bigint, p_refunded bigint, p_from_currency text, p_payee_currency text, p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_refusal(p_from text, p_to text, p_from_currency text, p_to_currency text, p_currency text, p_balance bigint, p_amount bigint, p_kind_refusal text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_refusal(p_from text, p_to text, p_from_currency text, p_to_currency text, p_currency text, p_balance bigint, p_amount bigint, p_kind_refusal text) FROM PUBLIC;

--
-- Name: FUNCTION decision_settled(p_kind text, p_wallet text, p_amount bigint, p_currency text, p_reference text, p_wallet_currency text, p_spendable bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_settled(p_kind text, p_wallet text, p_amount bigint, p_currency text, p_reference text, p_wallet_currency text, p_spendable bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_settlements_locked(p_kinds text[], p_currencies text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_settlements_locked(p_kinds text[], p_currencies text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_split(p_op text, p_from text, p_amount bigint, p_currency text, p_legs jsonb, p_wallet_ids text[], p_currencies text[], p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_split(p_op text, p_from text, p_amount bigint, p_currency text, p_legs jsonb, p_wallet_ids text[], p_currencies text[], p_balance bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_stale(p_wallet_fence bigint, p_wallet_lease uuid, p_fence bigint, p_lease uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_stale(p_wallet_fence bigint, p_wallet_lease uuid, p_fence bigint, p_lease uuid) FROM PUBLIC;

--
-- Name: FUNCTION decision_state_read(p_kinds text[], p_froms text[], p_tos text[], p_refs text[], p_legs jsonb[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[], OUT h_id text[], OUT h public.holds[], OUT o_id text[], OUT o public.transfers[], OUT s public.split_legs[], OUT f_key text[], OUT f_sum bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_state_read(p_kinds text[], p_froms text[], p_tos text[], p_refs text[], p_legs jsonb[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[], OUT h_id text[], OUT h public.holds[], OUT o_id text[], OUT o public.transfers[], OUT s public.split_legs[], OUT f_key text[], OUT f_sum bigint[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_status_refusal(p_wallets text[], p_amounts bigint[], w_id text[], w_status text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_status_refusal(p_wallets text[], p_amounts bigint[], w_id text[], w_status text[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_verdict(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_ref text, p_legs jsonb, p_now timestamp with time zone, w_id text[], w_currency text[], p_spendable bigint, h_id text[], h public.holds[], o_id text[], o public.transfers[], s public.split_legs[], f_key text[], f_sum bigint[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_verdict(p_kind text, p_op text, p_from text, p_to text, p_amount bigint, p_currency text, p_ref text, p_legs jsonb, p_now timestamp with time zone, w_id text[], w_currency text[], p_spendable bigint, h_id text[], h public.holds[], o_id text[], o public.transfers[], s public.split_legs[], f_key text[], f_sum bigint[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_wallet_changed(p_kind text, p_currency text, p_limit bigint, p_credits text, p_currency_now text, p_status text, p_balance bigint, p_held bigint, p_limit_now bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_wallet_changed(p_kind text, p_currency text, p_limit bigint, p_credits text, p_currency_now text, p_status text, p_balance bigint, p_held bigint, p_limit_now bigint, OUT reason text, OUT amount bigint, OUT credited text, OUT detail jsonb, OUT wallets text[], OUT amounts bigint[], OUT hold public.holds, OUT expiry_released boolean) FROM PUBLIC;

--
-- Name: FUNCTION decision_wallet_ids_checked(p_ids text[], p_legs jsonb[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_wallet_ids_checked(p_ids text[], p_legs jsonb[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_wallets_locked(p_ids text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_wallets_locked(p_ids text[], OUT w_id text[], OUT w_currency text[], OUT w_balance bigint[], OUT w_held bigint[], OUT w_fence bigint[], OUT w_lease uuid[], OUT w_limit bigint[], OUT w_status text[]) FROM PUBLIC;

--
-- Name: FUNCTION decision_written(p_wallet_ids text[], p_currencies text[], p_balances bigint[], p_helds bigint[], p_fences bigint[], p_leases uuid[], p_limits bigint[], p_statuses text[], p_touched boolean[], p_wallets_read integer, p_entry_ops text[], p_entry_wallets text[], p_entry_amounts bigint[], p_entry_balances bigint[], p_entry_limits bigint[], p_entry_fences bigint[], p_entry_leases uuid[], p_holds public.holds[], p_holds_read integer, p_holds_ended boolean[], p_legs public.split_legs[], p_legs_read integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.decision_written(p_wallet_ids text[], p_currencies text[], p_balances bigint[], p_helds bigint[], p_fences bigint[], p_leases uuid[], p_limits bigint[], p_statuses text[], p_touched boolean[], p_wallets_read integer, p_entry_ops text[], p_entry_wallets text[], p_entry_amounts bigint[], p_entry_balances bigint[], p_entry_limits bigint[], p_entry_fences bigint[], p_entry_leases uuid[], p_holds public.holds[], p_holds_read integer, p_holds_ended boolean[], p_legs public.split_legs[], p_legs_read integer) FROM PUBLIC;

--
-- Name: FUNCTION give_up_send_count(p_operation_id text, p_request_hash text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.give_up_send_count(p_operation_id text, p_request_hash text) FROM PUBLIC;

--
-- Name: FUNCTION holds_expire(p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.holds_expire(p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION ledger_entries_append_only(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.ledger_entries_append_only() FROM PUBLIC;

--
-- Name: FUNCTION lock_epoch_current(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.lock_epoch_current() FROM PUBLIC;

--
-- Name: FUNCTION lock_epoch_open(p_backend text, p_note text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.lock_epoch_open(p_backend text, p_note text) FROM PUBLIC;

--
-- Name: FUNCTION lock_release(p_keys text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.lock_release(p_keys text[]) FROM PUBLIC;

--
-- Name: FUNCTION lock_tokens_last(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.lock_tokens_last() FROM PUBLIC;

--
-- Name: FUNCTION lock_try_acquire(p_keys text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.lock_try_acquire(p_keys text[]) FROM PUBLIC;

--
-- Name: FUNCTION operations_matching(p_wallet text, p_side text, p_kind text, p_status text, p_from timestamp with time zone, p_to timestamp with time zone, p_metadata jsonb, p_after_at timestamp with time zone, p_after_id text, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.operations_matching(p_wallet text, p_side text, p_kind text, p_status text, p_from timestamp with time zone, p_to timestamp with time zone, p_metadata jsonb, p_after_at timestamp with time zone, p_after_id text, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION outcome_cursor_move(p_name text, p_position bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_cursor_move(p_name text, p_position bigint) FROM PUBLIC;

--
-- Name: FUNCTION outcome_cursor_name_checked(p_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_cursor_name_checked(p_name text) FROM PUBLIC;

--
-- Name: FUNCTION outcome_cursor_open(p_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_cursor_open(p_name text) FROM PUBLIC;

--
-- Name: FUNCTION outcome_cursor_position(p_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_cursor_position(p_name text) FROM PUBLIC;

--
-- Name: FUNCTION outcome_cursor_take(p_name text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_cursor_take(p_name text) FROM PUBLIC;

--
-- Name: FUNCTION outcome_events_after(p_after bigint, p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_events_after(p_after bigint, p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION outcome_feed_sequence(p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.outcome_feed_sequence(p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION record_transfer_given_up(p_operation_id text, p_request_hash text, p_reason text, p_send_count integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.record_transfer_given_up(p_operation_id text, p_request_hash text, p_reason text, p_send_count integer) FROM PUBLIC;

--
-- Name: FUNCTION relay_claim_first_sends(p_limit integer); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_claim_first_sends(p_limit integer) FROM PUBLIC;

--
-- Name: FUNCTION relay_claim_resends(p_limit integer, p_due_after_ms double precision); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_claim_resends(p_limit integer, p_due_after_ms double precision) FROM PUBLIC;

--
-- Name: FUNCTION relay_count_lost(p_operation_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_count_lost(p_operation_ids text[]) FROM PUBLIC;

--
-- Name: FUNCTION relay_intake_backlog(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_intake_backlog() FROM PUBLIC;

--
-- Name: FUNCTION relay_record_given_up(p_operation_id text, p_reason text, p_send_count integer, p_claim uuid); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_record_given_up(p_operation_id text, p_reason text, p_send_count integer, p_claim uuid) FROM PUBLIC;

--
-- Name: FUNCTION relay_requests_decided(p_operation_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_requests_decided(p_operation_ids text[]) FROM PUBLIC;

--
-- Name: FUNCTION relay_trace_contexts(p_operation_ids text[]); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.relay_trace_contexts(p_operation_ids text[]) FROM PUBLIC;

--
-- Name: FUNCTION request_amount_valid(p_amount jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_amount_valid(p_amount jsonb) FROM PUBLIC;

--
-- Name: FUNCTION request_decide_invalid(p_operation_id text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_decide_invalid(p_operation_id text) FROM PUBLIC;

--
-- Name: FUNCTION request_hold_expiry_problem(p_body jsonb, p_max bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_hold_expiry_problem(p_body jsonb, p_max bigint) FROM PUBLIC;

--
-- Name: FUNCTION request_metadata_lines(p_metadata jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_metadata_lines(p_metadata jsonb) FROM PUBLIC;

--
-- Name: FUNCTION request_metadata_problem(p_metadata jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_metadata_problem(p_metadata jsonb) FROM PUBLIC;

--
-- Name: FUNCTION request_operation(p_body jsonb, p_hold_expiry_max_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_operation(p_body jsonb, p_hold_expiry_max_ms bigint) FROM PUBLIC;

--
-- Name: FUNCTION request_operation(p_body jsonb, p_hold_expiry_max_ms bigint, p_trace_context jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_operation(p_body jsonb, p_hold_expiry_max_ms bigint, p_trace_context jsonb) FROM PUBLIC;

--
-- Name: FUNCTION request_operation_problem(p_body jsonb, p_hold_expiry_max_ms bigint); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_operation_problem(p_body jsonb, p_hold_expiry_max_ms bigint) FROM PUBLIC;

--
-- Name: FUNCTION request_trace_context_check(p_trace_context jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_trace_context_check(p_trace_context jsonb) FROM PUBLIC;

--
-- Name: FUNCTION request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text) FROM PUBLIC;

--
-- Name: FUNCTION request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text, p_trace_context jsonb); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.request_transfer(p_operation_id text, p_from text, p_to text, p_amount bigint, p_currency text, p_trace_context jsonb) FROM PUBLIC;

--
-- Name: FUNCTION wallet_balance_at(p_wallet text, p_at timestamp with time zone); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.wallet_balance_at(p_wallet text, p_at timestamp with time zone) FROM PUBLIC;

--
-- Name: FUNCTION wallet_statement(p_wallet text, p_from timestamp with time zone, p_to timestamp with time zone, p_after_at timestamp with time zone, p_after_id bigint, p_limit integer, p_held boolean); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.wallet_statement(p_wallet text, p_from timestamp with time zone, p_to timestamp with time zone, p_after_at timestamp with time zone, p_after_id bigint, p_limit integer, p_held boolean) FROM PUBLIC;

--
-- Name: DEFAULT PRIVILEGES FOR FUNCTIONS; Type: DEFAULT ACL; Schema: -; Owner: -
--

ALTER DEFAULT PRIVILEGES FOR ROLE postgres REVOKE ALL ON FUNCTIONS  FROM PUBLIC;

--
-- PostgreSQL database dump complete
--
