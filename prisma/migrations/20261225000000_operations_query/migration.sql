-- The query API (issue 43, item 6): operations_matching() finds the operations recorded by a
-- wallet and its side, a kind, a status, a time range and metadata pairs, a page at a time, every
-- query on an index: a wallet's side on (wallet, created_at, operation_id), a split leg's wallet
-- likewise (split_legs gains the time of its split, which the split's transaction writes as it
-- writes the record's), kind and status on (kind, status, created_at, operation_id), metadata on a
-- GIN index of the records that carry some. The read role may call it.
--
-- Written by hand: the columns and indexes (below), then the files of prisma/sql/ as
-- `npm run db:new-migration` writes them.

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

-- A leg's time is its split's: now(), the transaction's start, as the record's created_at.
ALTER TABLE "split_legs" ADD COLUMN "created_at" TIMESTAMPTZ(6);
UPDATE "split_legs" l SET "created_at" = t."created_at" FROM "transfers" t WHERE t."operation_id" = l."operation_id";
ALTER TABLE "split_legs" ALTER COLUMN "created_at" SET DEFAULT now(), ALTER COLUMN "created_at" SET NOT NULL;

CREATE INDEX "transfers_from_time_idx" ON "transfers" ("from_wallet", "created_at", "operation_id");
CREATE INDEX "transfers_to_time_idx" ON "transfers" ("to_wallet", "created_at", "operation_id")
    WHERE "to_wallet" IS NOT NULL;
CREATE INDEX "transfers_kind_status_time_idx" ON "transfers" ("kind", "status", "created_at", "operation_id");
CREATE INDEX "transfers_metadata_idx" ON "transfers" USING GIN ("metadata" jsonb_path_ops)
    WHERE "metadata" IS NOT NULL;
CREATE INDEX "split_legs_to_time_idx" ON "split_legs" ("to_wallet", "created_at", "operation_id");

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
-- write per table (decision_written(), decision_recorded(), which keeps each operation's metadata,
-- p_metadata, NULL for none). Every check always on: no parameter or
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
    p_hold_expiry_max_ms BIGINT,
    p_metadata           JSONB[]
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
$$;

REVOKE EXECUTE ON FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) FROM PUBLIC;

-- prisma/sql/operations_matching.sql
-- The query API: the operations recorded (transfers rows, applied or rejected) that match every
-- filter given, in the order (created_at, operation_id), at most p_limit (1-1,000) after the
-- cursor (p_after_at, p_after_id: the last operation of the page before; both NULL for the first
-- page). Filters, each optional: a wallet on a side ('from': the record's from_wallet, the wallet
-- an operation takes from or acts on, but a deposit's, which is the wallet it credits; 'to': the
-- record's to_wallet, the wallet it credits, or an applied split's leg; 'any': either), a kind, a
-- status, a time range (p_from included, p_to excluded) and metadata pairs the operation's metadata
-- contains. Every query is index range scans:
--   - metadata: the GIN index on transfers.metadata alone, the other filters checked on what it
--     finds (so name a rare pair, such as an order id);
--   - else a wallet: one ordered range scan per side on (from_wallet | to_wallet | a split leg's
--     to_wallet, created_at, operation_id), each cut at the limit, merged;
--   - else: one ordered range scan per kind and status on (kind, status, created_at, operation_id),
--     each cut at the limit, merged (26 at most).
-- A split carries its legs. The read role may call it (`npm run db:read-role`).
CREATE OR REPLACE FUNCTION "operations_matching"(
    p_wallet   TEXT,
    p_side     TEXT,
    p_kind     TEXT,
    p_status   TEXT,
    p_from     TIMESTAMPTZ,
    p_to       TIMESTAMPTZ,
    p_metadata JSONB,
    p_after_at TIMESTAMPTZ,
    p_after_id TEXT,
    p_limit    INTEGER
)
RETURNS TABLE (
    operation_id TEXT,
    kind         TEXT,
    status       TEXT,
    reason       TEXT,
    from_wallet  TEXT,
    to_wallet    TEXT,
    amount       BIGINT,
    currency     TEXT,
    original_id  TEXT,
    reference    TEXT,
    created_at   TIMESTAMPTZ,
    metadata     JSONB,
    legs         JSONB
)
LANGUAGE plpgsql
STABLE
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.operations_matching(text,text,text,text,timestamp with time zone,timestamp with time zone,jsonb,timestamp with time zone,text,integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION operations_matching(text,text,text,text,timestamp with time zone,timestamp with time zone,jsonb,timestamp with time zone,text,integer) FROM PUBLIC;
