-- Metadata on every operation (issue 43, item 4): an optional object of string values (at most 16
-- keys of [A-Za-z0-9._:-], values of at most 256 characters, 2,048 bytes in all:
-- request_metadata_problem()), part of the request and its hash (lines only when present, so
-- every stored hash stays as it was), kept in the record (`transfers.metadata`) and the event
-- (`outcome_pending`, `outcome_events`), read back by the feed (outcome_events_after()) and
-- `npm run status`. A transfer with metadata requested through the intake keeps its body.
-- apply_payments() takes it as a last argument, NULL by default (a transfer with metadata is
-- decided through it); whoever could call it or read the feed keeps that right.
--
-- Written by hand: the tables and the rights (below, and at the end), then the files of
-- prisma/sql/ as `npm run db:new-migration` writes them.

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

ALTER TABLE "transfers" ADD COLUMN "metadata" JSONB;
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_metadata_object" CHECK (
    "metadata" IS NULL OR jsonb_typeof("metadata") = 'object');
ALTER TABLE "outcome_pending" ADD COLUMN "metadata" JSONB;
ALTER TABLE "outcome_events" ADD COLUMN "metadata" JSONB;
ALTER TABLE "transfer_requests" DROP CONSTRAINT "transfer_requests_body_by_kind";
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_body_by_kind" CHECK (
    ("kind" = 'transfer' AND "to_wallet" IS NOT NULL AND "amount" IS NOT NULL
     AND ("body" IS NULL OR jsonb_typeof("body") = 'object'))
    OR ("kind" <> 'transfer' AND jsonb_typeof("body") = 'object'));

-- Who may call the functions whose arguments or results change, to grant the new ones below.
CREATE TEMPORARY TABLE "metadata_migration_grants" ON COMMIT DROP AS
SELECT DISTINCT p.proname::TEXT AS fn, a.grantee::regrole::TEXT AS grantee
  FROM pg_proc p, aclexplode(p.proacl) a
 WHERE p.pronamespace = current_schema()::regnamespace
   AND p.proname IN ('apply_payments', 'outcome_events_after')
   AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0;

-- Its result gains the metadata.
DROP FUNCTION outcome_events_after(bigint,integer);

DROP FUNCTION apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint);
DROP FUNCTION decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint);
DROP FUNCTION decision_recorded(text[],text[],text[],text[],text[],text[],bigint[],uuid[],text[],text[],text[],bigint[],jsonb[],text[],text[],text[]);
-- prisma/sql/apply_payments.sql
-- The worker's decision of payments: decide_batch() with every check, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path
-- pinned; `npm run db:worker-role` grants it. PL/pgSQL, as apply_transfers(): a cached plan.
-- p_metadata: each operation's metadata (NULL: none has any).
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
    p_hold_expiry_max_ms BIGINT,
    p_metadata           JSONB[] DEFAULT NULL
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
        p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms, p_metadata);
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,jsonb[]) FROM PUBLIC;

-- prisma/sql/apply_transfers.sql
-- The worker's decision of transfers: decide_batch(), every element a transfer, behind a refusal of
-- ledger-account ids (decision_wallet_ids_checked()). SECURITY DEFINER with the search_path pinned;
-- `npm run db:worker-role` grants it. PL/pgSQL, not SQL: its plan is cached, where an SQL
-- function's body is parsed and planned at every call (`npm run bench:decision-cost`). Its
-- transfers carry no metadata: the worker sends one that does to apply_payments().
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
                        v_none::TIMESTAMPTZ[], v_none::JSONB[], p_fences, p_lease_ids, 1, NULL) b;
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

-- prisma/sql/decision_recorded.sql
-- The records of a batch's decisions, and in the same statement what they decide: the intake's
-- request (when the operation came through it) is marked decided, and one outcome event per record
-- joins the feed's pending events (a request that asked for another body gets a conflict event).
-- Element i was decided here when p_statuses[i] is set; what it recorded as its payee and amount is
-- the decision's (p_credited, p_recorded_amounts), its metadata the message's (p_metadata[i], kept
-- in the record and the event; p_metadata NULL: none has any). Then an `expired` event for each hold released
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
    p_closed_hashes    TEXT[],
    p_metadata         JSONB[]
) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
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

REVOKE EXECUTE ON FUNCTION decision_recorded(text[],text[],text[],text[],text[],text[],bigint[],uuid[],text[],text[],text[],bigint[],jsonb[],text[],text[],text[],jsonb[]) FROM PUBLIC;

-- prisma/sql/outcome_events_after.sql
-- The outcome feed after a position: at most p_limit (1-10,000) events in order; FT001 when that
-- position was pruned.
CREATE OR REPLACE FUNCTION "outcome_events_after"(p_after BIGINT, p_limit INTEGER DEFAULT 1000)
RETURNS TABLE (
    "position"     BIGINT,
    operation_id   TEXT,
    kind           TEXT,
    reason         TEXT,
    from_wallet    TEXT,
    to_wallet      TEXT,
    amount         BIGINT,
    currency       TEXT,
    decided_at     TIMESTAMPTZ,
    operation      TEXT,
    original_id    TEXT,
    detail         JSONB,
    metadata       JSONB
)
LANGUAGE plpgsql
VOLATILE
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_events_after(bigint,integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_events_after(bigint,integer) FROM PUBLIC;

-- prisma/sql/outcome_feed_sequence.sql
-- The sequencer: moves up to p_limit pending events into the feed, numbered with no gap in the
-- order they become visible; one sequencer at a time (0 when another holds its lock), in READ
-- COMMITTED only. Answers how many it moved.
CREATE OR REPLACE FUNCTION "outcome_feed_sequence"(p_limit INTEGER DEFAULT 10000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.outcome_feed_sequence(integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION outcome_feed_sequence(integer) FROM PUBLIC;

-- prisma/sql/request_metadata_lines.sql
-- An operation's metadata in its request hash: no line when it has none (absent or `{}`), so every
-- hash stored before metadata existed stays as it was; else one line `key=value` per key, keys in
-- byte order (they are ASCII, so JavaScript's sort agrees: request-hash.ts). No line of a kind's
-- own holds `=` where a metadata line can stand, and keys hold none, so the lines read back one
-- way; the same metadata in another key order is the same request.
CREATE OR REPLACE FUNCTION "request_metadata_lines"(p_metadata JSONB) RETURNS TEXT[]
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT coalesce(ARRAY(SELECT e.key || '=' || e.value FROM jsonb_each_text(p_metadata) e ORDER BY e.key COLLATE "C"),
                    '{}'::TEXT[])
$$;
REVOKE EXECUTE ON FUNCTION "request_metadata_lines"(JSONB) FROM PUBLIC;

-- prisma/sql/request_metadata_problem.sql
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
-- HOLD_EXPIRY_MAX_MS when it is NULL), expiresAt a real calendar instant, 2 to 16 legs, and on
-- every kind an optional metadata (request_metadata_problem()).
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
$$;
REVOKE EXECUTE ON FUNCTION "request_operation_problem"(JSONB, BIGINT) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_operation_problem(jsonb,bigint) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;

-- The rights on the functions replaced above, given again to whoever held them.
DO $$
DECLARE
    v_grant RECORD;
BEGIN
    FOR v_grant IN SELECT g.fn, g.grantee FROM "metadata_migration_grants" g LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', CASE v_grant.fn
            WHEN 'apply_payments' THEN 'apply_payments(text[], text[], text[], text[], text[], bigint[], text[], text[], '
                                       'bigint[], timestamptz[], jsonb[], bigint[], uuid[], bigint, jsonb[])'
            ELSE 'outcome_events_after(bigint, integer)' END, v_grant.grantee);
    END LOOP;
END
$$;
