-- Wallets through the API (issue 43, item 1): open_wallet, freeze_wallet, unfreeze_wallet and
-- close_wallet, decided and fenced on their wallet in decide_batch() like every operation, with
-- their records and events. A wallet's status says what it takes: `open` everything,
-- `debits_frozen` credits only, `frozen` nothing, `closed` nothing ever again (and only when empty).
-- Every wallet so far is open. The statuses are judged on the postings a decision would write
-- (decision_status_refusal()), so every kind answers wallet_frozen or wallet_closed by one rule.
--
-- Written by hand: the tables (below), then the files of prisma/sql/ as `npm run db:new-migration`
-- writes them.

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

ALTER TABLE "wallets" ADD COLUMN "status" TEXT NOT NULL DEFAULT 'open';
ALTER TABLE "wallets" ADD CONSTRAINT "wallets_status_known" CHECK (
    "status" IN ('open', 'debits_frozen', 'frozen', 'closed'));
-- The last line of defence behind close_wallet's wallet_not_empty.
ALTER TABLE "wallets" ADD CONSTRAINT "wallets_closed_empty" CHECK (
    "status" <> 'closed' OR ("balance" = 0 AND "held" = 0));

ALTER TABLE "transfers" DROP CONSTRAINT "transfers_kind_known";
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_kind_known" CHECK (
    "kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal',
               'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet'));
ALTER TABLE "transfers" DROP CONSTRAINT "transfers_reason_matches_status";
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_reason_matches_status" CHECK (
    ("status" = 'applied' AND "reason" IS NULL) OR
    ("status" = 'rejected' AND "reason" IN
        ('insufficient_funds', 'unknown_wallet', 'currency_mismatch', 'same_wallet', 'invalid_request',
         'hold_not_found', 'hold_rejected', 'hold_already_captured', 'hold_already_voided', 'hold_expired',
         'exceeds_hold_amount', 'expiry_out_of_range', 'original_not_found', 'original_not_refundable',
         'refund_exceeds_original', 'wallet_mismatch', 'limit_below_used', 'wallet_exists', 'wallet_frozen',
         'wallet_closed', 'wallet_not_empty'))
);
ALTER TABLE "transfer_requests" DROP CONSTRAINT "transfer_requests_kind_known";
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_kind_known" CHECK (
    "kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal',
               'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet'));
ALTER TABLE "outcome_events" DROP CONSTRAINT "outcome_events_operation_known";
ALTER TABLE "outcome_events" ADD CONSTRAINT "outcome_events_operation_known" CHECK (
    "operation" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal',
                    'open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet'));

-- Their results gain the wallets' statuses.
DROP FUNCTION decision_state_read(text[],text[],text[],text[],jsonb[]);
DROP FUNCTION decision_wallets_locked(text[]);

DROP FUNCTION decision_written(text[],bigint[],bigint[],bigint[],uuid[],bigint[],boolean[],text[],text[],bigint[],bigint[],bigint[],bigint[],uuid[],holds[],integer,boolean[],split_legs[],integer);
-- prisma/sql/apply_transfer.sql
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

-- prisma/sql/decide_batch.sql
-- The one decision: 1-1,000 operations of any kind (transfer, hold, capture, void, refund, split,
-- credit_limit, deposit, withdrawal, open_wallet, freeze_wallet, unfreeze_wallet, close_wallet)
-- given as parallel arrays, decided in order as if each committed before the next. Every lock up
-- front in one order (decision_operations_locked(), decision_state_read(), then the settlement
-- accounts, decision_settlements_locked()), then per operation: its record answers a duplicate or a
-- conflict (decision_answer()), the fence and lease of the wallet it is decided on
-- (decision_stale()), the kind's checks and postings (decision_moved() for a transfer and a hold,
-- decision_wallet_changed() for the kinds that change the wallet itself, a credit limit or an
-- opening's limit in p_amounts, a freeze's credits in p_refs; decision_verdict() for the rest, a
-- deposit's or a withdrawal's external reference in p_refs), then what the statuses of the wallets
-- posted to refuse (decision_status_refusal(), asked only once a wallet is not open), the postings
-- applied to the balances (a `$held:<wallet>` posting to its held money; a settlement account's,
-- unfenced, to its balance alone) and the ledger (a release at expiry recorded as the hold's own,
-- unfenced), the fence advanced, and the record kept: a later twin in the batch answers from it,
-- and a later operation naming it finds it as it would find it committed. A wallet opened here
-- joins the batch's wallets, for the operations after it, and is inserted at the end. Expiries are
-- judged once every lock is held: a capture that waited past its hold's expiry is refused. Then one
-- write per table (decision_written(), decision_recorded()). Every check always on: no parameter or
-- branch skips one (the negative controls' variants are derived from these files by
-- harness/chaos/unsafe/).
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
    -- One operation, and its kind's verdict.
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
                s := s || ROW(v_op, v_j - 1, v.wallets[v_j], v.amounts[v_j])::split_legs;
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
                              v.reason, v_fence, NULL, v_lease, v_kind, NULL, v.detail ->> 'reference')::transfers;
        END IF;
        outcome := status; reason := v.reason; fence := v_fence; wallet_fence := w_fence[v_fi];
        RETURN NEXT;
    END LOOP;

    v_j := decision_written(w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_limit, w_status, w_touched, w_read,
                             l_op, l_wallet, l_amount, l_balance, l_limit, l_fence, l_lease, h, h_read, h_ended, s, s_read);
    v_j := decision_recorded(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_currencies, p_refs, p_fences,
                              p_lease_ids, e_status, e_reason, e_to, e_amount, e_detail, x_hold, d_op, d_hash);
END;
$$;

REVOKE EXECUTE ON FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/decision_arguments_checked.sql
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
    OUT w_status   TEXT[],
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

REVOKE EXECUTE ON FUNCTION decision_state_read(text[],text[],text[],text[],jsonb[]) FROM PUBLIC;

-- prisma/sql/decision_status_refusal.sql
-- What a wallet's status refuses of an operation whose checks passed, judged on the postings it
-- would write (p_wallets, p_amounts; a negative amount is a debit), so every kind, present and to
-- come, answers to one rule: a debit of a wallet that is not open (`debits_frozen`, `frozen`,
-- `closed`) and a credit to a `frozen` or `closed` wallet are refused, wallet_closed before
-- wallet_frozen. Ledger accounts (`$held:`, `$settlement:`) have no status. Money a wallet's own
-- holds release back to it (a void, an expiry: a `$held:<wallet>` posting beside the credit) is
-- not a credit from outside and is never refused; a capture of a hold placed before a freeze takes
-- nothing from the frozen wallet's balance and proceeds. NULL when nothing is refused. w_status is
-- parallel to w_id (decide_batch()'s wallets); inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_status_refusal"(
    p_wallets TEXT[],
    p_amounts BIGINT[],
    w_id      TEXT[],
    w_status  TEXT[]
) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN bool_or(s = 'closed') THEN 'wallet_closed' WHEN bool_or(s IS NOT NULL) THEN 'wallet_frozen' END
      FROM (SELECT CASE WHEN (x.amount < 0 AND w_status[array_position(w_id, x.wallet)] <> 'open')
                          OR (x.amount > 0 AND w_status[array_position(w_id, x.wallet)] IN ('frozen', 'closed')
                              AND NOT ('$held:' || x.wallet) = ANY (p_wallets))
                        THEN w_status[array_position(w_id, x.wallet)] END AS s
              FROM unnest(p_wallets, p_amounts) AS x(wallet, amount)
             WHERE x.wallet NOT LIKE '$%') refused
$$;

REVOKE EXECUTE ON FUNCTION decision_status_refusal(text[],bigint[],text[],text[]) FROM PUBLIC;

-- prisma/sql/decision_verdict.sql
-- The verdict of an operation that names another or has legs: its kind's checks
-- (docs/reference/outcomes.md) and what it moves, from the batch's state as the decisions before it
-- left it (the locked wallets, the holds, originals, split legs and refunded sums decide_batch()
-- keeps; passed read-only). A capture and a void: decision_hold_ended(); a refund:
-- decision_refunded(); a split: decision_split(); a deposit and a withdrawal: decision_settled(). A
-- transfer's and a hold's is decision_moved(), and a change of the wallet itself
-- decision_wallet_changed(), which decide_batch() asks itself; every kind's verdict has the same
-- fields. p_spendable is what the source may still debit: its balance plus its credit limit.
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
    ELSIF p_kind IN ('deposit', 'withdrawal') THEN
        RETURN decision_settled(p_kind, p_from, p_amount, p_currency, p_ref, w_currency[v_fi], p_spendable);
    END IF;
    RETURN decision_split(p_op, p_from, p_amount, p_currency, p_legs, w_id, w_currency, p_spendable);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_verdict(text,text,text,text,bigint,text,text,jsonb,timestamp with time zone,text[],text[],bigint,text[],holds[],text[],transfers[],split_legs[],text[],bigint[]) FROM PUBLIC;

-- prisma/sql/decision_wallet_changed.sql
-- The checks of an operation that changes the wallet it is decided on rather than moving money, and
-- what it sets (in its detail, as strings where amounts: decide_batch() keeps them for the
-- operations after it). None posts anything.
--   open_wallet      the id must have no row (wallet_exists; a closed wallet keeps its row, so an id
--                    is never opened twice); opens it in p_currency with the credit limit p_limit,
--                    status `open`, balance and held 0.
--   freeze_wallet    refuses the wallet's debits from now on (status `debits_frozen`), and its
--                    credits too when p_credits is `refused` (status `frozen`).
--   unfreeze_wallet  status `open` again.
--   close_wallet     only an empty wallet (wallet_not_empty: a balance or held money other than 0);
--                    status `closed`, for good: it takes nothing again, and only open_wallet could
--                    change it, which refuses.
--   credit_limit     decision_limit_changed().
-- Every kind but open_wallet needs a row (unknown_wallet) that is not closed (wallet_closed). A
-- freeze of a frozen wallet and an unfreeze of an open one apply: the status asked for is the
-- status after. p_currency_now, p_status, p_balance, p_held and p_limit are the wallet's as the
-- batch's decisions before this one left them (p_currency_now NULL: no row).
CREATE OR REPLACE FUNCTION "decision_wallet_changed"(
    p_kind          TEXT,
    p_currency      TEXT,
    p_limit         BIGINT,
    p_credits       TEXT,
    p_currency_now  TEXT,
    p_status        TEXT,
    p_balance       BIGINT,
    p_held          BIGINT,
    p_limit_now     BIGINT,
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

REVOKE EXECUTE ON FUNCTION decision_wallet_changed(text,text,bigint,text,text,text,bigint,bigint,bigint) FROM PUBLIC;

-- prisma/sql/decision_wallets_locked.sql
-- The wallets named, row-locked in id order (one global order: two decisions that cross wait for
-- each other, see the late payees in decision_state_read() for the one exception), as parallel
-- arrays sorted by id, each wallet's credit limit and status last. A wallet without a row is simply absent.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_wallets_locked"(
    p_ids          TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[],
    OUT w_held     BIGINT[],
    OUT w_fence    BIGINT[],
    OUT w_lease    UUID[],
    OUT w_limit    BIGINT[],
    OUT w_status   TEXT[]
)
LANGUAGE plpgsql
VOLATILE
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

REVOKE EXECUTE ON FUNCTION decision_wallets_locked(text[]) FROM PUBLIC;

-- prisma/sql/decision_written.sql
-- What a batch's decisions did, written once per table: the wallets opened (those after the
-- p_wallets_read read; one another decision inserted meanwhile fails the batch with 40001, which
-- the worker retries, and the retry answers wallet_exists), then every row read that moved or had
-- its fence, credit limit or status changed, or nothing commits (CHECK (balance >= -credit_limit),
-- CHECK (held >= 0) and a closed wallet's CHECK (balance = 0 AND held = 0) stay the last line of
-- defence), the ledger in decision order (a negative amount
-- is a debit; each entry with its account's balance after it and, on a wallet's entry, the credit
-- limit in force then, stamped with the clock once every lock is held, so a wallet's entries
-- ascend in time as they do in id), the holds placed (after p_holds_read in
-- p_holds) and those that ended, and the legs of the splits applied (after p_legs_read in p_legs).
-- The records and events follow (decision_recorded()). Answers how many wallet rows it wrote.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_written"(
    p_wallet_ids      TEXT[],
    p_currencies      TEXT[],
    p_balances        BIGINT[],
    p_helds           BIGINT[],
    p_fences          BIGINT[],
    p_leases          UUID[],
    p_limits          BIGINT[],
    p_statuses        TEXT[],
    p_touched         BOOLEAN[],
    p_wallets_read    INTEGER,
    p_entry_ops       TEXT[],
    p_entry_wallets   TEXT[],
    p_entry_amounts   BIGINT[],
    p_entry_balances  BIGINT[],
    p_entry_limits    BIGINT[],
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
$$;

REVOKE EXECUTE ON FUNCTION decision_written(text[],text[],bigint[],bigint[],bigint[],uuid[],bigint[],text[],boolean[],integer,text[],text[],bigint[],bigint[],bigint[],bigint[],uuid[],holds[],integer,boolean[],split_legs[],integer) FROM PUBLIC;

-- prisma/sql/request_hold_expiry_problem.sql
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

-- prisma/sql/request_operation.sql
-- The intake for every kind: checks the wire object by the one rule (request_operation_problem()),
-- then stores it under the operation's advisory lock, or answers from the record or the request
-- already there. p_hold_expiry_max_ms NULL is the largest HOLD_EXPIRY_MAX_MS.
CREATE OR REPLACE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT DEFAULT 604800000) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
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
    IF v_kind = 'transfer' THEN
        RETURN request_transfer(p_body ->> 'operationId', p_body ->> 'from', p_body ->> 'to',
                                (p_body ->> 'amount')::BIGINT, p_body ->> 'currency');
    END IF;
    v_op := p_body ->> 'operationId';
    v_from := p_body ->> 'from';
    v_to := p_body ->> 'to';
    v_amount := (p_body ->> 'amount')::BIGINT;
    v_currency := p_body ->> 'currency';

    IF v_kind = 'hold' THEN
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

-- prisma/sql/request_operation_problem.sql
-- What is wrong with an operation's wire object, or NULL when nothing is: the intake's one rule.
-- Its limits are WIRE_LIMITS (src/ledger/wire-limits.ts) at the widest a worker may be set:
-- amounts up to 10^18 - 1, a credit limit up to 10^17, a hold's expiresInMs from 1000 to the given maximum (or the largest
-- HOLD_EXPIRY_MAX_MS when it is NULL), expiresAt a real calendar instant, 2 to 16 legs.
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
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown field %s for a %s', left(v_extra, 40), v_kind);
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
