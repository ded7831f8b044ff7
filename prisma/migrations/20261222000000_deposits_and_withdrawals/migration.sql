-- Deposits and withdrawals (issue 43, item 2): money entering the ledger from the outside world
-- and leaving for it, each with an external reference, kept in double entry against one
-- settlement account per currency (`$settlement:<currency>`, no wallet row: its entries, under an
-- advisory lock per account, carry its running balance). A deposit is decided and fenced on the
-- wallet it credits; a withdrawal is a debit like any other, down to minus the credit limit.
--
-- Written by hand: the tables (below), then the files of prisma/sql/ as `npm run db:new-migration`
-- writes them.

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

-- The external reference a deposit or a withdrawal carries, and only they.
ALTER TABLE "transfers" ADD COLUMN "reference" TEXT;
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_reference_by_kind" CHECK (
    ("kind" IN ('deposit', 'withdrawal')) = ("reference" IS NOT NULL));

ALTER TABLE "transfers" DROP CONSTRAINT "transfers_kind_known";
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_kind_known" CHECK (
    "kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal'));
ALTER TABLE "transfer_requests" DROP CONSTRAINT "transfer_requests_kind_known";
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_kind_known" CHECK (
    "kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal'));
ALTER TABLE "outcome_events" DROP CONSTRAINT "outcome_events_operation_known";
ALTER TABLE "outcome_events" ADD CONSTRAINT "outcome_events_operation_known" CHECK (
    "operation" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal'));

-- prisma/sql/decide_batch.sql
-- The one decision: 1-1,000 operations of any kind (transfer, hold, capture, void, refund, split,
-- credit_limit, deposit, withdrawal) given as parallel arrays, decided in order as if each committed
-- before the next. Every lock up front in one order (decision_operations_locked(),
-- decision_state_read(), then the settlement accounts, decision_settlements_locked()), then per
-- operation: its record answers a duplicate or a conflict (decision_answer()), the fence and lease
-- of the wallet it is decided on (decision_stale()), the kind's checks and postings
-- (decision_moved() for a transfer and a hold, decision_verdict() for the kinds that name another
-- operation or have legs, decision_limit_changed() for a credit limit, which p_amounts carries,
-- decision_settled() for money entering or leaving, whose external reference p_refs carries), the
-- postings applied to the balances (a `$held:<wallet>` posting to its held money; a settlement
-- account's, unfenced, to its balance alone) and the ledger (a release at expiry recorded as the
-- hold's own, unfenced), the fence advanced, and the record kept: a later twin in the batch answers
-- from it, and a later operation naming it finds it as it would find it committed. Then one write
-- per table (decision_written(), decision_recorded()). Every check always on: no parameter or
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
    v_now TIMESTAMPTZ; v_latest TIMESTAMPTZ;
    -- The locked wallets, by id, as the batch's decisions leave them; a debit may take a balance down to minus w_limit.
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
    -- Ledger entries in decision order, each with its account's balance after it (a `$held:` account's is the held
    -- amount) and a wallet's limit in force then; holds released at expiry; requests to close.
    l_op TEXT[] := '{}'; l_wallet TEXT[] := '{}'; l_amount BIGINT[] := '{}'; l_fence BIGINT[] := '{}'; l_lease UUID[] := '{}';
    l_balance BIGINT[] := '{}'; l_limit BIGINT[] := '{}'; l_count INTEGER := 0; x_hold TEXT[] := '{}'; d_op TEXT[] := '{}'; d_hash TEXT[] := '{}';
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
    v := decision_settlements_locked(p_kinds, p_currencies);
    w_id := w_id || v.w_id; w_currency := w_currency || v.w_currency; w_balance := w_balance || v.w_balance;
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
            RETURN NEXT; CONTINUE;
        END IF;
        v_fi := array_position(w_id, v_from);
        IF decision_stale(w_fence[v_fi], w_lease[v_fi], v_fence, v_lease) THEN
            outcome := 'stale_fence'; status := NULL; reason := NULL; fence := NULL; wallet_fence := w_fence[v_fi];
            RETURN NEXT; CONTINUE;
        END IF;
        v_ti := array_position(w_id, p_tos[v_i]);
        IF v_kind IN ('transfer', 'hold') THEN
            v := decision_moved(v_kind, v_op, v_from, p_tos[v_i], p_amounts[v_i], p_currencies[v_i], w_currency[v_fi],
                     w_currency[v_ti], w_balance[v_fi] + w_limit[v_fi],
                     coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0)), v_now, v_latest);
        ELSIF v_kind = 'credit_limit' THEN
            v := decision_limit_changed(w_currency[v_fi], w_balance[v_fi], w_limit[v_fi], p_amounts[v_i]);
        ELSIF v_kind IN ('deposit', 'withdrawal') THEN
            v := decision_settled(v_kind, v_from, p_amounts[v_i], p_currencies[v_i], v_ref, w_currency[v_fi], w_balance[v_fi] + w_limit[v_fi]);
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
            l_limit[l_count] := CASE WHEN v_wallet LIKE '$held:%' THEN NULL ELSE w_limit[v_w] END;
            IF v_wallet LIKE '$held:%' THEN w_held[v_w] := w_held[v_w] + v.amounts[v_j]; l_balance[l_count] := w_held[v_w];
            ELSE w_balance[v_w] := w_balance[v_w] + v.amounts[v_j]; l_balance[l_count] := w_balance[v_w]; END IF;
            w_touched[v_w] := TRUE;
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
        ELSIF v_kind = 'credit_limit' AND v.reason IS NULL THEN w_limit[v_fi] := p_amounts[v_i];
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
                              v.reason, v_fence, NULL, v_lease, v_kind, NULL, v.detail ->> 'reference')::transfers;
        END IF;
        outcome := status; reason := v.reason; fence := v_fence; wallet_fence := w_fence[v_fi];
        RETURN NEXT;
    END LOOP;

    v_j := decision_written(w_id, w_balance, w_held, w_fence, w_lease, w_limit, w_touched, l_op, l_wallet, l_amount,
                             l_balance, l_limit, l_fence, l_lease, h, h_read, h_ended, s, s_read);
    v_j := decision_recorded(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_currencies, p_refs, p_fences,
                              p_lease_ids, e_status, e_reason, e_to, e_amount, e_detail, x_hold, d_op, d_hash);
END;
$$;

REVOKE EXECUTE ON FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/decision_arguments_checked.sql
-- The shape of a batch decision's call, refused whole (22023) before any lock: 1-1,000 operations
-- (TRANSFER_BATCH_MAX's upper limit, src/config/config.ts), parallel arrays of that length, every
-- id, hash, source, fence and lease given, amounts and fences positive (a credit limit, which a
-- credit_limit carries in p_amounts, from 0 to 10^17, the wallets' CHECK), and each element a
-- whole operation of its kind. The worker never sends another; a direct caller learns what it got
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
           OR v_kind NOT IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split', 'credit_limit', 'deposit', 'withdrawal')
           OR (v_kind <> 'credit_limit' AND p_amounts[v_i] = 0)
           OR (v_kind = 'credit_limit' AND (p_amounts[v_i] IS NULL OR p_amounts[v_i] > c_limit_max))
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
               CASE WHEN p_kinds[i] IN ('deposit', 'withdrawal') THEN p_refs[i] END AS reference,
               p_froms[i] AS from_wallet, p_credited[i] AS to_wallet, p_recorded_amounts[i] AS amount,
               p_currencies[i] AS currency, p_statuses[i] AS status, p_reasons[i] AS reason, p_fences[i] AS fence,
               p_lease_ids[i] AS lease, p_details[i] AS detail, i AS element
          FROM generate_subscripts(p_statuses, 1) i
         WHERE p_statuses[i] IS NOT NULL
    ), inserted AS (
        INSERT INTO transfers (operation_id, request_hash, kind, original_id, reference, from_wallet, to_wallet, amount,
                               currency, status, reason, fence, lease)
        SELECT d.operation_id, d.request_hash, d.kind, d.original, d.reference, d.from_wallet, d.to_wallet, d.amount,
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

-- prisma/sql/decision_settled.sql
-- A deposit's or a withdrawal's checks and what it moves: money entering from the outside world
-- (a deposit credits the wallet) or leaving for it (a withdrawal debits the wallet), each against
-- the currency's settlement account `$settlement:<currency>`, whose running balance is minus what
-- entered plus what left. The wallet must have a row (unknown_wallet) in the currency the message
-- names (currency_mismatch); a withdrawal, like every debit, may take the balance down to minus the
-- credit limit (p_spendable: balance plus limit), never below (insufficient_funds). A deposit
-- credits `p_wallet` (its `to`, the wallet it is decided and fenced on); a withdrawal credits no
-- wallet. The detail carries the external reference and the settlement account.
CREATE OR REPLACE FUNCTION "decision_settled"(
    p_kind            TEXT,
    p_wallet          TEXT,
    p_amount          BIGINT,
    p_currency        TEXT,
    p_reference       TEXT,
    p_wallet_currency TEXT,
    p_spendable       BIGINT,
    OUT reason        TEXT,
    OUT amount        BIGINT,
    OUT credited      TEXT,
    OUT detail        JSONB,
    OUT wallets       TEXT[],
    OUT amounts       BIGINT[],
    OUT hold          holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
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
$$;

REVOKE EXECUTE ON FUNCTION decision_settled(text,text,bigint,text,text,text,bigint) FROM PUBLIC;

-- prisma/sql/decision_settlements_locked.sql
-- The settlement accounts a batch's deposits and withdrawals post to (`$settlement:<currency>`),
-- locked and read once the batch holds its wallet rows: each under a transaction-scoped advisory
-- lock on its id, in id order (after every row lock, so no cycle with them), then its balance as
-- its last entry left it (0 before the first). The lock is held to the commit, so the entries of
-- two batches that post to one account follow each other and each carries the balance after it.
-- A settlement account has no wallet row, no fence and no limit: its balance is what its entries
-- sum to, minus what entered plus what left. Parallel arrays in id order; empty when the batch has
-- neither kind. Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_settlements_locked"(
    p_kinds        TEXT[],
    p_currencies   TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
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
$$;

REVOKE EXECUTE ON FUNCTION decision_settlements_locked(text[],text[]) FROM PUBLIC;

-- prisma/sql/decision_written.sql
-- What a batch's decisions did, written once per table: the wallets (every row that moved or had
-- its credit limit changed, or nothing commits; CHECK (balance >= -credit_limit) and
-- CHECK (held >= 0) stay the last line of defence), the ledger in decision order (a negative amount
-- is a debit; each entry with its account's balance after it and, on a wallet's entry, the credit
-- limit in force then, stamped with the clock once every lock is held, so a wallet's entries
-- ascend in time as they do in id), the holds placed (after p_holds_read in
-- p_holds) and those that ended, and the legs of the splits applied (after p_legs_read in p_legs).
-- The records and events follow (decision_recorded()). Answers how many wallet rows it wrote.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_written"(
    p_wallet_ids      TEXT[],
    p_balances        BIGINT[],
    p_helds           BIGINT[],
    p_fences          BIGINT[],
    p_leases          UUID[],
    p_limits          BIGINT[],
    p_touched         BOOLEAN[],
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
    v_rows    INTEGER;
BEGIN
    -- A settlement account (`$settlement:`) has no row: its entries are all there is of it.
    FOR v_rows IN 1 .. cardinality(p_touched) LOOP
        IF p_touched[v_rows] AND p_wallet_ids[v_rows] NOT LIKE '$%' THEN v_touched := v_touched + 1; END IF;
    END LOOP;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, held = u.held, last_fence = u.last_fence, last_lease = u.last_lease,
               credit_limit = u.credit_limit, updated_at = CURRENT_TIMESTAMP
          FROM unnest(p_wallet_ids, p_balances, p_helds, p_fences, p_leases, p_limits, p_touched)
               AS u(id, balance, held, last_fence, last_lease, credit_limit, touched)
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

REVOKE EXECUTE ON FUNCTION decision_written(text[],bigint[],bigint[],bigint[],uuid[],bigint[],boolean[],text[],text[],bigint[],bigint[],bigint[],bigint[],uuid[],holds[],integer,boolean[],split_legs[],integer) FROM PUBLIC;

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
    c_time_pattern       CONSTANT TEXT := '^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,3})?Z$';
    c_expires_in_min_ms  CONSTANT BIGINT := 1000;
    c_expiry_ceiling_ms  CONSTANT BIGINT := 31622400000;
    c_legs_min           CONSTANT INTEGER := 2;
    c_legs_max           CONSTANT INTEGER := 16;
    v_max      BIGINT := coalesce(p_hold_expiry_max_ms, c_expiry_ceiling_ms);
    v_kind     TEXT;
    v_allowed  TEXT[];
    v_extra    TEXT;
    v_field    TEXT;
    v_parts    TEXT[];
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
    END;
    IF v_allowed IS NULL THEN
        RETURN 'kind must be one of transfer, hold, capture, void, refund, split, credit_limit, deposit, withdrawal';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown field %s for a %s', left(v_extra, 40), v_kind);
    END IF;

    -- The ids each kind names: its own, the wallet it is decided on (a deposit's `to`), and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', CASE v_kind WHEN 'deposit' THEN 'to' ELSE 'from' END] || CASE v_kind WHEN 'transfer' THEN ARRAY['to']
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

    IF v_kind IN ('deposit', 'withdrawal') THEN
        IF NOT p_body ? 'currency' THEN RETURN format('a %s needs its currency', v_kind); END IF;
        IF jsonb_typeof(p_body -> 'reference') IS DISTINCT FROM 'string' OR (p_body ->> 'reference') !~ c_reference_pattern THEN
            RETURN 'reference must be a string of 1-128 printable ASCII characters without spaces';
        END IF;
    ELSIF v_kind = 'credit_limit' THEN
        IF jsonb_typeof(p_body -> 'limit') IS DISTINCT FROM 'string' OR (p_body ->> 'limit') !~ c_amount_pattern
           OR (p_body ->> 'limit')::NUMERIC > c_limit_ceiling THEN
            RETURN format('limit must be a string of decimal digits, from 0 to %s', c_limit_ceiling);
        END IF;
    ELSIF v_kind = 'hold' THEN
        IF (p_body ? 'expiresInMs') = (p_body ? 'expiresAt') THEN
            RETURN 'a hold needs exactly one of expiresInMs and expiresAt';
        END IF;
        IF p_body ? 'expiresInMs' THEN
            IF jsonb_typeof(p_body -> 'expiresInMs') <> 'number' OR (p_body ->> 'expiresInMs') !~ '^[0-9]{1,12}$' THEN
                RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, v_max);
            END IF;
            IF (p_body ->> 'expiresInMs')::BIGINT NOT BETWEEN c_expires_in_min_ms AND v_max THEN
                RETURN format('expiresInMs must be a whole number from %s to %s', c_expires_in_min_ms, v_max);
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
