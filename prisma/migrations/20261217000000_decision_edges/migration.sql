-- The decision without test switches, and its edges a payments and intake review reproduced (issue
-- 41). transfers_decide_batch(), apply_transfer() and payments_decide_batch() lose their p_check_*
-- parameters and every branch that skipped a check, and apply_transfers_unsafe() and
-- apply_payments_unsafe() are dropped: the negative controls' variants are derived from
-- prisma/sql/ by harness/chaos/unsafe/ and installed only into the harness's and the tests' own
-- databases. No role had EXECUTE on the three decisions, so the new signatures need no re-grant. A
-- capture whose hold's own decision committed while the capture waited for its locks read the hold
-- but had not locked its payee, and failed its whole batch with 22004: the payees of holds found
-- once the locks are held are locked then, in order among themselves. An operation decided earlier
-- in a call is seen exactly as a committed one whatever kinds the call holds, so a refund batched
-- after the capture, void or refund it names is original_not_refundable, as in two calls. Outcome
-- events mean one thing per field for every kind: to is the wallet credited (a void and an expiry
-- credit the hold's source), and a hold's detail.expiresAt keeps microseconds. The hold sweep
-- raises when it wrote fewer wallet rows than it releases into. The intake refuses what every
-- worker refuses, by one rule: request_operation_problem() with the limits of WIRE_LIMITS
-- (src/ledger/wire-limits.ts) at the widest a worker may be set; a stored request no worker can
-- decide ends rejected invalid_request through request_decide_invalid(), which the worker calls.
--
-- Written by `npm run db:new-migration` from prisma/sql/: apply_payments.sql, apply_transfer.sql,
-- apply_transfers.sql, holds_expire.sql, payments_decide_batch.sql, request_amount_valid.sql,
-- request_decide_invalid.sql, request_operation.sql, request_operation_problem.sql,
-- request_transfer.sql, transfers_decide_batch.sql; drops function apply_payments_unsafe(…),
-- function apply_transfer(…), function apply_transfers_unsafe(…), function
-- payments_decide_batch(…), function transfers_decide_batch(…).

-- A function may name one defined further down; each is checked when it runs.
SET LOCAL check_function_bodies = off;

DROP FUNCTION apply_payments_unsafe(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,boolean,boolean,boolean,boolean,boolean);
DROP FUNCTION apply_transfer(text,text,text,text,bigint,text,bigint,uuid,boolean,boolean,boolean);
DROP FUNCTION apply_transfers_unsafe(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[],boolean,boolean,boolean);
DROP FUNCTION payments_decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint,boolean,boolean,boolean,boolean,boolean);
DROP FUNCTION transfers_decide_batch(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[],boolean,boolean,boolean);
-- prisma/sql/apply_payments.sql
-- The worker's decision of payments (as apply_transfers()).
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
LANGUAGE sql
VOLATILE
AS $$
    SELECT * FROM payments_decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms)
     WHERE decision_wallet_ids_checked(p_froms || p_tos, p_legs);
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_payments(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/apply_transfer.sql
-- The single decision, as in the single-decision-plain-insert migration, now closing the request
-- of an operation decided before (the duplicate path) and answering a request of another body
-- with a conflict event. Owner only, as before. Every check always on: no parameter or branch
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
    v_from       RECORD;
    v_to         RECORD;
    v_found_from BOOLEAN := FALSE;
    v_found_to   BOOLEAN := FALSE;
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
        RETURN QUERY SELECT
            CASE WHEN v_existing.request_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END,
            v_existing.status, v_existing.reason, v_existing.fence, NULL::BIGINT;
        RETURN;
    END IF;

    FOR v_wallet IN
        SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease
          FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE
    LOOP
        IF v_wallet.id = p_from THEN v_from := v_wallet; v_found_from := TRUE; END IF;
        IF v_wallet.id = p_to THEN v_to := v_wallet; v_found_to := TRUE; END IF;
    END LOOP;

    -- The fence guards the source wallet only; an equal token passes only for the lease that set
    -- it (the lease-ids migration).
    -- (Nested: PL/pgSQL evaluates a record's fields even behind a false AND.)
    IF v_found_from THEN
        IF v_from.last_fence > p_fence
           OR (v_from.last_fence = p_fence AND v_from.last_lease IS DISTINCT FROM p_lease_id) THEN
            RETURN QUERY SELECT 'stale_fence'::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, v_from.last_fence;
            RETURN;
        END IF;
    END IF;

    IF p_from = p_to THEN
        v_reason := 'same_wallet';
    ELSIF NOT v_found_from OR NOT v_found_to THEN
        v_reason := 'unknown_wallet';
    ELSIF v_from.currency <> v_to.currency OR (p_currency IS NOT NULL AND p_currency <> v_from.currency) THEN
        v_reason := 'currency_mismatch';
    ELSIF v_from.balance < p_amount THEN
        v_reason := 'insufficient_funds';
    END IF;
    v_status := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;

    IF v_found_from THEN
        -- Every decision under our token raises the source's fence, refusals included; the lease
        -- that holds the fence is recorded with it. An applied transfer moves both balances in
        -- the same statement: one row-update pass, one evaluation of the wallets' CHECK
        -- constraints (which PostgreSQL compiles afresh for every statement that writes a row).
        v_fence_after := GREATEST(v_from.last_fence, p_fence);
        IF v_reason IS NULL THEN
            UPDATE wallets
               SET last_fence = CASE WHEN id = p_from THEN v_fence_after ELSE last_fence END,
                   last_lease = CASE WHEN id = p_from AND p_fence >= v_from.last_fence THEN p_lease_id ELSE last_lease END,
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
                   last_lease = CASE WHEN p_fence >= v_from.last_fence THEN p_lease_id ELSE last_lease END,
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
-- The worker's decision of transfers, as in the lease-ids migration, refusing those ids.
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
LANGUAGE sql
VOLATILE
SECURITY DEFINER
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
                                  p_currencies, p_fences, p_lease_ids) b
     WHERE decision_wallet_ids_checked(p_froms || p_tos);
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION apply_transfers(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) FROM PUBLIC;

-- prisma/sql/holds_expire.sql
CREATE OR REPLACE FUNCTION "holds_expire"(p_limit INTEGER DEFAULT 1000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
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
        RETURNING w.id
    ), entries AS (
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT '$expiry:' || e.hold_id, x.wallet, x.kind, x.amount, NULL, NULL
          FROM ended e
         CROSS JOIN LATERAL (VALUES ('$held:' || e.from_wallet, 'debit', -e.amount),
                                    (e.from_wallet, 'credit', e.amount)) AS x(wallet, kind, amount)
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
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.holds_expire(integer) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION holds_expire(integer) FROM PUBLIC;

-- prisma/sql/payments_decide_batch.sql
CREATE OR REPLACE FUNCTION "payments_decide_batch"(
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
-- As in transfers_decide_batch(): every statement reaches its rows by key.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    c_batch_max CONSTANT INTEGER := 1000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_now       TIMESTAMPTZ := clock_timestamp();
    v_key       BIGINT;
    v_i         INTEGER;
    v_j         INTEGER;
    -- Locked wallets, by id, as the batch leaves them.
    w_id        TEXT[];
    w_currency  TEXT[];
    w_balance   BIGINT[];
    w_held      BIGINT[];
    w_fence     BIGINT[];
    w_lease     UUID[];
    w_touched   BOOLEAN[];
    v_wallets   TEXT[];
    v_late      TEXT[];
    -- Holds: locked rows, then the ones placed here. h_new: insert; h_ended: update.
    h_id        TEXT[];
    h_from      TEXT[];
    h_to        TEXT[];
    h_amount    BIGINT[];
    h_currency  TEXT[];
    h_expires   TIMESTAMPTZ[];
    h_state     TEXT[];
    h_captured  BIGINT[];
    h_released  BIGINT[];
    h_ended_by  TEXT[];
    h_new       BOOLEAN[];
    h_ended     BOOLEAN[];
    h_count     INTEGER;
    -- Records: of this batch's operations found in the table, then those decided here.
    r_op        TEXT[];
    r_hash      TEXT[];
    r_status    TEXT[];
    r_reason    TEXT[];
    r_fence     BIGINT[];
    r_element   INTEGER[];
    r_count     INTEGER;
    -- Originals named by captures, voids and refunds: their records, then those decided here.
    o_id        TEXT[];
    o_kind      TEXT[];
    o_status    TEXT[];
    o_from      TEXT[];
    o_to        TEXT[];
    o_amount    BIGINT[];
    o_count     INTEGER;
    -- Legs of the splits refunds name, then of the splits applied here.
    s_op        TEXT[];
    s_to        TEXT[];
    s_amount    BIGINT[];
    s_leg       INTEGER[];
    s_new       BOOLEAN[];
    s_count     INTEGER;
    -- Refunded so far, per original and payer.
    f_key       TEXT[];
    f_sum       BIGINT[];
    f_count     INTEGER;
    -- What the decisions write.
    l_op        TEXT[] := '{}';
    l_wallet    TEXT[] := '{}';
    l_kind      TEXT[] := '{}';
    l_amount    BIGINT[] := '{}';
    l_fence     BIGINT[] := '{}';
    l_lease     UUID[] := '{}';
    l_count     INTEGER := 0;
    t_element   INTEGER[] := '{}';
    t_status    TEXT[] := '{}';
    t_reason    TEXT[] := '{}';
    t_to        TEXT[] := '{}';
    t_amount    BIGINT[] := '{}';
    t_original  TEXT[] := '{}';
    t_detail    JSONB[] := '{}';
    t_count     INTEGER := 0;
    x_hold      TEXT[] := '{}';
    x_count     INTEGER := 0;
    d_op        TEXT[] := '{}';
    d_hash      TEXT[] := '{}';
    d_count     INTEGER := 0;
    -- One operation.
    v_kind      TEXT;
    v_op        TEXT;
    v_from      TEXT;
    v_to        TEXT;
    v_amount    BIGINT;
    v_currency  TEXT;
    v_ref       TEXT;
    v_fence     BIGINT;
    v_lease     UUID;
    v_fi        INTEGER;
    v_ti        INTEGER;
    v_k         INTEGER;
    v_o         INTEGER;
    v_s         INTEGER;
    v_f         INTEGER;
    v_reason    TEXT;
    v_moved     BIGINT;
    v_rest      BIGINT;
    v_limit     BIGINT;
    v_left      BIGINT;
    v_payee     TEXT;
    v_expires   TIMESTAMPTZ;
    v_leg       JSONB;
    v_total     BIGINT;
    v_detail    JSONB;
    v_rows      INTEGER;
    v_touched   INTEGER;
    v_names_others BOOLEAN := 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds);
    v_latest    TIMESTAMPTZ;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'apply_payments: between 1 and % operations per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_kinds), -1) <> v_n OR coalesce(cardinality(p_request_hashes), -1) <> v_n
       OR coalesce(cardinality(p_froms), -1) <> v_n OR coalesce(cardinality(p_tos), -1) <> v_n
       OR coalesce(cardinality(p_amounts), -1) <> v_n OR coalesce(cardinality(p_currencies), -1) <> v_n
       OR coalesce(cardinality(p_refs), -1) <> v_n OR coalesce(cardinality(p_expires_in_ms), -1) <> v_n
       OR coalesce(cardinality(p_expires_at), -1) <> v_n OR coalesce(cardinality(p_legs), -1) <> v_n
       OR coalesce(cardinality(p_fences), -1) <> v_n OR coalesce(cardinality(p_lease_ids), -1) <> v_n THEN
        RAISE EXCEPTION 'apply_payments: the arrays must all have % elements', v_n USING ERRCODE = '22023';
    END IF;
    IF array_position(p_operation_ids, NULL) IS NOT NULL OR array_position(p_request_hashes, NULL) IS NOT NULL
       OR array_position(p_froms, NULL) IS NOT NULL OR array_position(p_fences, NULL) IS NOT NULL
       OR array_position(p_lease_ids, NULL) IS NOT NULL OR p_hold_expiry_max_ms IS NULL OR p_hold_expiry_max_ms < 1
       OR EXISTS (SELECT 1 FROM unnest(p_amounts) a WHERE a <= 0)
       OR EXISTS (SELECT 1 FROM unnest(p_fences) f WHERE f < 1) THEN
        RAISE EXCEPTION 'apply_payments: ids, hashes, sources and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i];
        IF v_kind IS NULL OR v_kind NOT IN ('hold', 'capture', 'void', 'refund', 'split')
           OR (v_kind = 'hold' AND (p_tos[v_i] IS NULL OR p_amounts[v_i] IS NULL
                                    OR (p_expires_in_ms[v_i] IS NULL) = (p_expires_at[v_i] IS NULL)))
           OR (v_kind IN ('capture', 'void', 'refund') AND p_refs[v_i] IS NULL)
           OR (v_kind = 'split' AND (jsonb_typeof(p_legs[v_i]) IS DISTINCT FROM 'array'
                                     OR jsonb_array_length(p_legs[v_i]) NOT BETWEEN 2 AND 16)) THEN
            RAISE EXCEPTION 'apply_payments: element % is not a whole hold, capture, void, refund or split', v_i
                USING ERRCODE = '22023';
        END IF;
    END LOOP;

    FOR v_key IN
        SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(v_key);
    END LOOP;

    -- The refunds' originals, read before any row lock: who they moved money between never
    -- changes, and it says which wallets to lock. A captured hold's state is read below.
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.kind), '{}'),
               coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.from_wallet), '{}'),
               coalesce(array_agg(t.to_wallet), '{}'), coalesce(array_agg(t.amount), '{}')
          INTO o_id, o_kind, o_status, o_from, o_to, o_amount
          FROM transfers t
         WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                            WHERE p_kinds[i] = 'refund'));
    ELSE
        o_id := '{}'; o_kind := '{}'; o_status := '{}'; o_from := '{}'; o_to := '{}'; o_amount := '{}';
    END IF;
    o_count := cardinality(o_id);

    -- Every wallet the batch may touch: sources (their held money is in their own row), payees,
    -- the holds' payees, the originals' sources (a refund's payee) and the splits' legs (repeats
    -- and NULLs are harmless to `= ANY`).
    v_wallets := p_froms || p_tos || o_from;
    IF 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds) THEN
        v_wallets := v_wallets || ARRAY(SELECT h.to_wallet FROM holds h WHERE h.hold_id = ANY (p_refs));
    END IF;
    IF 'split' = ANY (p_kinds) THEN
        v_wallets := v_wallets || ARRAY(SELECT l ->> 'to' FROM unnest(p_legs) g,
            jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l);
    END IF;
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.held ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_touched
      FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (v_wallets) ORDER BY w.id FOR UPDATE) l;

    -- The holds named, read once the wallets are locked. No row lock of their own: whoever
    -- changes a hold (its capture, its void, the decision or the sweep that releases it, and the
    -- hold's own decision) holds its source wallet's row lock, which this batch now holds for
    -- every hold it may change (a capture or void that names another source is refused
    -- wallet_mismatch and changes nothing). So this statement, which starts after those locks,
    -- sees every change committed before and none can come before this batch commits.
    SELECT coalesce(array_agg(h.hold_id), '{}'), coalesce(array_agg(h.from_wallet), '{}'),
           coalesce(array_agg(h.to_wallet), '{}'), coalesce(array_agg(h.amount), '{}'),
           coalesce(array_agg(h.currency::TEXT), '{}'), coalesce(array_agg(h.expires_at), '{}'),
           coalesce(array_agg(h.state), '{}'), coalesce(array_agg(h.captured), '{}'),
           coalesce(array_agg(h.released), '{}'), coalesce(array_agg(h.ended_by), '{}'),
           coalesce(array_agg(FALSE), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO h_id, h_from, h_to, h_amount, h_currency, h_expires, h_state, h_captured, h_released, h_ended_by, h_new, h_ended
      FROM holds h WHERE h.hold_id = ANY (p_refs);
    h_count := cardinality(h_id);
    -- A hold whose own decision committed while this batch waited for its locks is read here,
    -- but it was not there to name its payee before them: those payees are locked now, in order
    -- among themselves. Out of order with the wallets above, so a cycle can close here; PostgreSQL
    -- then fails one of the two (40P01), and its batch is retried as a transient error.
    v_late := ARRAY(SELECT DISTINCT t FROM unnest(h_to) t WHERE NOT (t = ANY (w_id)) ORDER BY t);
    IF cardinality(v_late) > 0 THEN
        SELECT w_id || coalesce(array_agg(l.id ORDER BY l.id), '{}'),
               w_currency || coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
               w_balance || coalesce(array_agg(l.balance ORDER BY l.id), '{}'),
               w_held || coalesce(array_agg(l.held ORDER BY l.id), '{}'),
               w_fence || coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
               w_lease || coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'),
               w_touched || coalesce(array_agg(FALSE), '{}')
          INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_touched
          FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease FROM wallets w
                 WHERE w.id = ANY (v_late) ORDER BY w.id FOR UPDATE) l;
    END IF;
    -- A capture or void whose hold has no row: a hold refused, or no hold at all. Its record says
    -- which (hold_rejected or hold_not_found); only batches with such an answer pay.
    IF EXISTS (SELECT 1 FROM generate_subscripts(p_kinds, 1) i
                WHERE p_kinds[i] IN ('capture', 'void') AND NOT (p_refs[i] = ANY (h_id))) THEN
        SELECT o_id || coalesce(array_agg(t.operation_id), '{}'), o_kind || coalesce(array_agg(t.kind), '{}'),
               o_status || coalesce(array_agg(t.status), '{}'), o_from || coalesce(array_agg(t.from_wallet), '{}'),
               o_to || coalesce(array_agg(t.to_wallet), '{}'), o_amount || coalesce(array_agg(t.amount), '{}')
          INTO o_id, o_kind, o_status, o_from, o_to, o_amount
          FROM transfers t
         WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                            WHERE p_kinds[i] IN ('capture', 'void') AND NOT (p_refs[i] = ANY (h_id))))
           AND NOT (t.operation_id = ANY (o_id));
        o_count := cardinality(o_id);
    END IF;
    -- The time every expiry is judged by, taken once every lock is held: a capture that waited
    -- for a lock past its hold's expiry is refused, as the sweep that ran meanwhile would have it.
    v_now := clock_timestamp();
    v_latest := v_now + make_interval(secs => p_hold_expiry_max_ms / 1000.0);

    -- Legs of the splits named, and what was refunded of each original, per payer (serialised
    -- by the payer's row lock, taken above).
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(s.operation_id), '{}'), coalesce(array_agg(s.to_wallet), '{}'),
               coalesce(array_agg(s.amount), '{}'), coalesce(array_agg(s.leg), '{}'), coalesce(array_agg(FALSE), '{}')
          INTO s_op, s_to, s_amount, s_leg, s_new
          FROM split_legs s WHERE s.operation_id = ANY (p_refs);
        SELECT coalesce(array_agg(t.original_id || E'\n' || t.from_wallet), '{}'), coalesce(array_agg(t.total), '{}')
          INTO f_key, f_sum
          FROM (SELECT r.original_id, r.from_wallet, sum(r.amount)::BIGINT AS total FROM transfers r
                 WHERE r.original_id = ANY (p_refs) AND r.kind = 'refund' AND r.status = 'applied'
                 GROUP BY r.original_id, r.from_wallet) t;
    ELSE
        s_op := '{}'; s_to := '{}'; s_amount := '{}'; s_leg := '{}'; s_new := '{}';
        f_key := '{}'; f_sum := '{}';
    END IF;
    s_count := cardinality(s_op);
    f_count := cardinality(f_key);

    SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
           coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'),
           coalesce(array_agg(t.fence), '{}'), coalesce(array_agg(NULL::INTEGER), '{}')
      INTO r_op, r_hash, r_status, r_reason, r_fence, r_element
      FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
    r_count := cardinality(r_op);

    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i];
        v_op := p_operation_ids[v_i];
        v_from := p_froms[v_i];
        v_to := p_tos[v_i];
        v_amount := p_amounts[v_i];
        v_currency := p_currencies[v_i];
        v_ref := p_refs[v_i];
        v_fence := p_fences[v_i];
        v_lease := p_lease_ids[v_i];
        ord := v_i;

        v_k := array_position(r_op, v_op);
        IF v_k IS NOT NULL THEN
            IF r_element[v_k] IS NULL THEN
                d_count := d_count + 1;
                d_op[d_count] := v_op;
                d_hash[d_count] := r_hash[v_k];
            END IF;
            outcome := CASE WHEN r_hash[v_k] = p_request_hashes[v_i] THEN 'duplicate' ELSE 'conflict' END;
            status := r_status[v_k];
            reason := r_reason[v_k];
            fence := r_fence[v_k];
            wallet_fence := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_fi := array_position(w_id, v_from);
        -- The fence guards the wallet the operation debits (for a capture or a void, the hold's
        -- source, whose money it is), exactly as for a transfer; credits are never fenced.
        IF v_fi IS NOT NULL
           AND (w_fence[v_fi] > v_fence
                OR (w_fence[v_fi] = v_fence AND w_lease[v_fi] IS DISTINCT FROM v_lease)) THEN
            outcome := 'stale_fence';
            status := NULL;
            reason := NULL;
            fence := NULL;
            wallet_fence := w_fence[v_fi];
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_reason := NULL;
        v_moved := NULL;
        v_payee := NULL;
        v_detail := NULL;

        IF v_kind = 'hold' THEN
            v_ti := array_position(w_id, v_to);
            v_expires := coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0));
            IF v_from = v_to THEN
                v_reason := 'same_wallet';
            ELSIF v_fi IS NULL OR v_ti IS NULL THEN
                v_reason := 'unknown_wallet';
            ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
                v_reason := 'currency_mismatch';
            ELSIF v_expires <= v_now OR v_expires > v_latest THEN
                v_reason := 'expiry_out_of_range';
            ELSIF w_balance[v_fi] < v_amount THEN
                v_reason := 'insufficient_funds';
            ELSE
                v_moved := v_amount;
                v_payee := v_to;
                w_balance[v_fi] := w_balance[v_fi] - v_amount;
                w_held[v_fi] := w_held[v_fi] + v_amount;
                l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
                l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := '$held:' || v_from;
                l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                l_amount[l_count + 1] := -v_amount; l_amount[l_count + 2] := v_amount;
                l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
                l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
                l_count := l_count + 2;
                h_count := h_count + 1;
                h_id[h_count] := v_op;           h_from[h_count] := v_from;
                h_to[h_count] := v_to;           h_amount[h_count] := v_amount;
                h_currency[h_count] := v_currency; h_expires[h_count] := v_expires;
                h_state[h_count] := 'active';    h_captured[h_count] := 0;
                h_released[h_count] := 0;        h_ended_by[h_count] := NULL;
                h_new[h_count] := TRUE;          h_ended[h_count] := FALSE;
                v_detail := jsonb_build_object('expiresAt', to_char(v_expires AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
            END IF;
        ELSIF v_kind IN ('capture', 'void') THEN
            v_k := array_position(h_id, v_ref);
            v_o := array_position(o_id, v_ref);
            IF v_k IS NULL AND v_o IS NOT NULL AND o_kind[v_o] = 'hold' AND o_status[v_o] = 'rejected' THEN
                v_reason := 'hold_rejected';
            ELSIF v_k IS NULL THEN
                v_reason := 'hold_not_found';
            ELSIF h_from[v_k] <> v_from THEN
                v_reason := 'wallet_mismatch';
            ELSIF h_state[v_k] = 'captured' THEN
                v_reason := 'hold_already_captured';
            ELSIF h_state[v_k] = 'voided' THEN
                v_reason := 'hold_already_voided';
            ELSIF h_state[v_k] = 'expired' OR h_expires[v_k] <= v_now THEN
                v_reason := 'hold_expired';
                IF h_state[v_k] = 'active' THEN
                    -- Past its expiry and not swept yet: released here, once, as the sweep would.
                    w_held[v_fi] := w_held[v_fi] - h_amount[v_k];
                    w_balance[v_fi] := w_balance[v_fi] + h_amount[v_k];
                    l_op[l_count + 1] := '$expiry:' || v_ref;     l_op[l_count + 2] := '$expiry:' || v_ref;
                    l_wallet[l_count + 1] := '$held:' || h_from[v_k]; l_wallet[l_count + 2] := h_from[v_k];
                    l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                    l_amount[l_count + 1] := -h_amount[v_k]; l_amount[l_count + 2] := h_amount[v_k];
                    l_fence[l_count + 1] := NULL;     l_fence[l_count + 2] := NULL;
                    l_lease[l_count + 1] := NULL;     l_lease[l_count + 2] := NULL;
                    l_count := l_count + 2;
                    h_state[v_k] := 'expired';
                    h_released[v_k] := h_amount[v_k];
                    h_ended[v_k] := TRUE;
                    x_count := x_count + 1;
                    x_hold[x_count] := v_ref;
                END IF;
            ELSIF v_kind = 'capture' AND coalesce(v_amount, h_amount[v_k]) > h_amount[v_k] THEN
                v_reason := 'exceeds_hold_amount';
            ELSE
                v_ti := array_position(w_id, h_to[v_k]);
                v_moved := CASE WHEN v_kind = 'capture' THEN coalesce(v_amount, h_amount[v_k]) ELSE h_amount[v_k] END;
                v_rest := h_amount[v_k] - CASE WHEN v_kind = 'capture' THEN v_moved ELSE 0 END;
                -- The whole held amount leaves the holding account: the captured part to the
                -- payee, the rest back to the source.
                w_held[v_fi] := w_held[v_fi] - h_amount[v_k];
                l_op[l_count + 1] := v_op;
                l_wallet[l_count + 1] := '$held:' || v_from;
                l_kind[l_count + 1] := 'debit';
                l_amount[l_count + 1] := -h_amount[v_k];
                l_fence[l_count + 1] := v_fence;
                l_lease[l_count + 1] := v_lease;
                l_count := l_count + 1;
                IF v_kind = 'capture' THEN
                    v_payee := h_to[v_k];
                    w_balance[v_ti] := w_balance[v_ti] + v_moved;
                    w_touched[v_ti] := TRUE;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := h_to[v_k]; l_kind[l_count] := 'credit';
                    l_amount[l_count] := v_moved; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                    v_detail := jsonb_build_object('released', v_rest::TEXT);
                END IF;
                IF v_rest > 0 THEN
                    w_balance[v_fi] := w_balance[v_fi] + v_rest;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := v_from; l_kind[l_count] := 'credit';
                    l_amount[l_count] := v_rest; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                END IF;
                h_state[v_k] := CASE WHEN v_kind = 'capture' THEN 'captured' ELSE 'voided' END;
                h_captured[v_k] := CASE WHEN v_kind = 'capture' THEN v_moved ELSE 0 END;
                h_released[v_k] := v_rest;
                h_ended_by[v_k] := v_op;
                h_ended[v_k] := TRUE;
            END IF;
        ELSIF v_kind = 'refund' THEN
            v_o := array_position(o_id, v_ref);
            v_limit := NULL;
            IF v_o IS NULL THEN
                v_reason := 'original_not_found';
            ELSIF o_status[v_o] <> 'applied' OR o_kind[v_o] NOT IN ('transfer', 'hold', 'split') THEN
                v_reason := 'original_not_refundable';
            ELSIF o_kind[v_o] = 'transfer' THEN
                IF o_to[v_o] <> v_from THEN v_reason := 'wallet_mismatch'; ELSE v_limit := o_amount[v_o]; END IF;
            ELSIF o_kind[v_o] = 'hold' THEN
                v_k := array_position(h_id, v_ref);
                IF v_k IS NULL OR h_state[v_k] <> 'captured' THEN
                    v_reason := 'original_not_refundable';
                ELSIF h_to[v_k] <> v_from THEN
                    v_reason := 'wallet_mismatch';
                ELSE
                    v_limit := h_captured[v_k];
                END IF;
            ELSE
                v_s := NULL;
                FOR v_j IN 1 .. s_count LOOP
                    IF s_op[v_j] = v_ref AND s_to[v_j] = v_from THEN v_s := v_j; EXIT; END IF;
                END LOOP;
                IF v_s IS NULL THEN v_reason := 'wallet_mismatch'; ELSE v_limit := s_amount[v_s]; END IF;
            END IF;
            IF v_reason IS NULL THEN
                v_payee := o_from[v_o];
                v_ti := array_position(w_id, v_payee);
                v_f := array_position(f_key, v_ref || E'\n' || v_from);
                v_left := v_limit - coalesce(f_sum[v_f], 0);
                v_moved := coalesce(v_amount, v_left);
                IF v_moved > v_left OR v_moved <= 0 THEN
                    v_reason := 'refund_exceeds_original';
                ELSIF v_fi IS NULL OR v_ti IS NULL THEN
                    v_reason := 'unknown_wallet';
                ELSIF w_balance[v_fi] < v_moved THEN
                    v_reason := 'insufficient_funds';
                ELSE
                    w_balance[v_fi] := w_balance[v_fi] - v_moved;
                    w_balance[v_ti] := w_balance[v_ti] + v_moved;
                    w_touched[v_ti] := TRUE;
                    l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
                    l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := v_payee;
                    l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                    l_amount[l_count + 1] := -v_moved; l_amount[l_count + 2] := v_moved;
                    l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
                    l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
                    l_count := l_count + 2;
                    IF v_f IS NULL THEN
                        f_count := f_count + 1;
                        f_key[f_count] := v_ref || E'\n' || v_from;
                        f_sum[f_count] := v_moved;
                    ELSE
                        f_sum[v_f] := f_sum[v_f] + v_moved;
                    END IF;
                END IF;
            END IF;
            IF v_reason IS NOT NULL THEN v_moved := v_amount; END IF;
        ELSE -- split
            v_total := 0;
            FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs[v_i]) l LOOP
                v_ti := array_position(w_id, v_leg ->> 'to');
                IF (v_leg ->> 'amount') IS NULL OR (v_leg ->> 'amount') !~ '^[0-9]{1,19}$' OR (v_leg ->> 'amount')::NUMERIC <= 0
                   OR (v_leg ->> 'to') IS NULL THEN
                    RAISE EXCEPTION 'apply_payments: split % has a leg without a wallet or a positive amount', v_op
                        USING ERRCODE = '22023';
                END IF;
                v_total := v_total + (v_leg ->> 'amount')::BIGINT;
                IF v_reason IS NOT NULL THEN CONTINUE; END IF;
                IF (v_leg ->> 'to') = v_from THEN
                    v_reason := 'same_wallet';
                ELSIF v_fi IS NULL OR v_ti IS NULL THEN
                    v_reason := 'unknown_wallet';
                ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
                    v_reason := 'currency_mismatch';
                END IF;
            END LOOP;
            IF v_reason IS NULL AND (SELECT count(DISTINCT l ->> 'to') FROM jsonb_array_elements(p_legs[v_i]) l)
                                    <> jsonb_array_length(p_legs[v_i]) THEN
                RAISE EXCEPTION 'apply_payments: split % names one wallet in two legs', v_op USING ERRCODE = '22023';
            END IF;
            IF v_reason IS NULL AND w_balance[v_fi] < v_total THEN
                v_reason := 'insufficient_funds';
            END IF;
            v_moved := v_total;
            IF v_reason IS NULL THEN
                -- All legs or none: every check above passed before any balance moves.
                w_balance[v_fi] := w_balance[v_fi] - v_total;
                l_count := l_count + 1;
                l_op[l_count] := v_op; l_wallet[l_count] := v_from; l_kind[l_count] := 'debit';
                l_amount[l_count] := -v_total; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                v_j := 0;
                FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs[v_i]) l LOOP
                    v_j := v_j + 1;
                    v_ti := array_position(w_id, v_leg ->> 'to');
                    w_balance[v_ti] := w_balance[v_ti] + (v_leg ->> 'amount')::BIGINT;
                    w_touched[v_ti] := TRUE;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := v_leg ->> 'to'; l_kind[l_count] := 'credit';
                    l_amount[l_count] := (v_leg ->> 'amount')::BIGINT; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                    s_count := s_count + 1;
                    s_op[s_count] := v_op; s_to[s_count] := v_leg ->> 'to';
                    s_amount[s_count] := (v_leg ->> 'amount')::BIGINT; s_leg[s_count] := v_j; s_new[s_count] := TRUE;
                END LOOP;
            END IF;
            v_detail := jsonb_build_object('legs', p_legs[v_i]);
        END IF;

        IF v_fi IS NOT NULL THEN
            -- Every decision under our token raises the source's fence, refusals included.
            IF v_fence >= w_fence[v_fi] THEN
                w_fence[v_fi] := v_fence;
                w_lease[v_fi] := v_lease;
            END IF;
            w_touched[v_fi] := TRUE;
        END IF;

        r_count := r_count + 1;
        r_op[r_count] := v_op;
        r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_reason[r_count] := v_reason;
        r_fence[r_count] := v_fence;
        r_element[r_count] := v_i;
        t_count := t_count + 1;
        t_element[t_count] := v_i;
        t_status[t_count] := r_status[r_count];
        t_reason[t_count] := v_reason;
        -- The wallet credited (a hold: its payee; a void gives back to its source): one meaning
        -- for the record and the event of every kind (docs/reference/wire-format.md).
        t_to[t_count] := CASE WHEN v_kind IN ('hold', 'capture', 'refund') THEN coalesce(v_payee, v_to)
                              WHEN v_kind = 'void' THEN v_from END;
        t_amount[t_count] := CASE WHEN v_reason IS NULL THEN v_moved ELSE coalesce(v_amount, CASE WHEN v_kind = 'split' THEN v_moved END) END;
        t_original[t_count] := CASE WHEN v_kind IN ('capture', 'void', 'refund') THEN v_ref END;
        t_detail[t_count] := v_detail;
        -- Originals decided here can be named later in the batch (a refund of a split, of a capture
        -- or of a refund, a capture of a hold refused here): kept whenever the batch has a kind that
        -- names another, so that one finds it as it would find it committed.
        IF v_names_others THEN
            o_count := o_count + 1;
            o_id[o_count] := v_op;
            o_kind[o_count] := v_kind;
            o_status[o_count] := r_status[r_count];
            o_from[o_count] := v_from;
            o_to[o_count] := t_to[t_count];
            o_amount[o_count] := t_amount[t_count];
        END IF;

        outcome := r_status[r_count];
        status := outcome;
        reason := v_reason;
        fence := v_fence;
        wallet_fence := CASE WHEN v_fi IS NOT NULL THEN w_fence[v_fi] ELSE NULL END;
        RETURN NEXT;
    END LOOP;

    -- Write what the decisions did, once per table. CHECK (balance >= 0) and CHECK (held >= 0)
    -- stay the last line of defence.
    SELECT count(*) INTO v_touched FROM unnest(w_touched) t WHERE t;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, held = u.held, last_fence = u.last_fence, last_lease = u.last_lease,
               updated_at = CURRENT_TIMESTAMP
          FROM unnest(w_id, w_balance, w_held, w_fence, w_lease, w_touched)
               AS u(id, balance, held, last_fence, last_lease, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            RAISE EXCEPTION 'apply_payments: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;
    IF l_count > 0 THEN
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT e.op, e.wallet, e.kind, e.amount, e.fence, e.lease
          FROM unnest(l_op, l_wallet, l_kind, l_amount, l_fence, l_lease) WITH ORDINALITY
               AS e(op, wallet, kind, amount, fence, lease, n)
         ORDER BY e.n;
    END IF;
    IF 'hold' = ANY (p_kinds) THEN
        INSERT INTO holds (hold_id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released,
                           ended_by, ended_at)
        SELECT h.id, h.from_wallet, h.to_wallet, h.amount, h.currency, h.expires_at, h.state, h.captured, h.released,
               h.ended_by, CASE WHEN h.state <> 'active' THEN v_now END
          FROM unnest(h_id, h_from, h_to, h_amount, h_currency, h_expires, h_state, h_captured, h_released, h_ended_by, h_new)
               AS h(id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released, ended_by, is_new)
         WHERE h.is_new;
    END IF;
    IF 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) THEN
        UPDATE holds h
           SET state = u.state, captured = u.captured, released = u.released, ended_by = u.ended_by, ended_at = v_now
          FROM unnest(h_id, h_state, h_captured, h_released, h_ended_by, h_new, h_ended)
               AS u(id, state, captured, released, ended_by, is_new, ended)
         WHERE h.hold_id = u.id AND u.ended AND NOT u.is_new;
    END IF;
    IF 'split' = ANY (p_kinds) THEN
        INSERT INTO split_legs (operation_id, leg, to_wallet, amount)
        SELECT s.op, s.leg, s.to_wallet, s.amount
          FROM unnest(s_op, s_leg, s_to, s_amount, s_new) AS s(op, leg, to_wallet, amount, is_new)
         WHERE s.is_new;
    END IF;

    -- The records, then what they decide: the intake's request closed and one event each; an
    -- expiry released here has its own event. A plain INSERT: under the advisory locks
    -- no record of these operations can appear meanwhile, so a unique violation means somebody
    -- skipped the lock, and everything rolls back (as in transfers_decide_batch()).
    WITH recorded AS (
        SELECT p_operation_ids[t.element] AS operation_id, p_request_hashes[t.element] AS request_hash,
               p_kinds[t.element] AS kind, t.original, p_froms[t.element] AS from_wallet, t.to_wallet, t.amount,
               p_currencies[t.element] AS currency, t.status, t.reason, p_fences[t.element] AS fence,
               p_lease_ids[t.element] AS lease, t.detail
          FROM unnest(t_element, t_status, t_reason, t_to, t_amount, t_original, t_detail)
               AS t(element, status, reason, to_wallet, amount, original, detail)
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
    IF x_count > 0 THEN
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        -- The release credits the source, as the sweep's does.
        SELECT h.hold_id, 'expired', NULL, 'hold', NULL, h.from_wallet, h.from_wallet, h.amount, h.currency, NULL
          FROM holds h WHERE h.hold_id = ANY (x_hold);
    END IF;
    IF d_count > 0 THEN
        WITH closed AS (
            UPDATE transfer_requests q SET decided_at = clock_timestamp()
              FROM (SELECT DISTINCT x.op, x.hash FROM unnest(d_op, d_hash) AS x(op, hash)) d
             WHERE q.operation_id = d.op AND q.decided_at IS NULL
            RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                      q.amount, q.currency, d.hash AS decided_hash
        )
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT c.operation_id, 'conflict', NULL, c.kind, NULL, c.from_wallet, c.to_wallet, c.amount, c.currency, c.body
          FROM closed c WHERE c.request_hash <> c.decided_hash;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION payments_decide_batch(text[],text[],text[],text[],text[],bigint[],text[],text[],bigint[],timestamp with time zone[],jsonb[],bigint[],uuid[],bigint) FROM PUBLIC;

-- prisma/sql/request_amount_valid.sql
-- An amount on the wire: a JSON string of 1-19 decimal digits, from 1 to 10^18 - 1. The digits are
-- matched before they are read as a number (CASE keeps that order).
CREATE OR REPLACE FUNCTION "request_amount_valid"(p_amount JSONB) RETURNS BOOLEAN
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_amount IS NULL OR jsonb_typeof(p_amount) <> 'string' OR (p_amount #>> '{}') !~ '^[0-9]{1,19}$' THEN FALSE
        ELSE (p_amount #>> '{}')::NUMERIC BETWEEN 1 AND 999999999999999999
    END
$$;
REVOKE EXECUTE ON FUNCTION "request_amount_valid"(JSONB) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_amount_valid(jsonb) SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;

-- prisma/sql/request_decide_invalid.sql
-- The terminal end of a stored request that no worker can decide: what the worker calls for an
-- intake request it refuses as invalid. It takes no body from its caller: under the operation's
-- advisory lock it checks the stored request's own body with request_operation_problem() at the
-- widest limits, and only when no worker could decide it records it decided as rejected
-- `invalid_request` (a transfers record, decided_at on the request, a 'rejected' event), once. A
-- body some worker could decide (this worker's TRANSFER_AMOUNT_MAX is merely lower) is left open,
-- to be given up and redriven once the settings agree.
-- The terminal end of a stored request that no worker can decide (see the header). Returns
-- whether it recorded that now: false when the operation is decided already, has no open
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

-- prisma/sql/request_operation.sql
-- The intake for every kind, as in the payments migration, checked by the one rule before
-- anything is read from the body; p_hold_expiry_max_ms NULL is the largest HOLD_EXPIRY_MAX_MS.
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
-- amounts up to 10^18 - 1, a hold's expiresInMs from 1000 to the given maximum (or the largest
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
    END;
    IF v_allowed IS NULL THEN
        RETURN 'kind must be one of transfer, hold, capture, void, refund, split';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RETURN format('unknown field %s for a %s', left(v_extra, 40), v_kind);
    END IF;

    -- The ids each kind names: its own, the wallet it debits, and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', 'from'] || CASE v_kind WHEN 'transfer' THEN ARRAY['to']
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
    IF v_kind IN ('transfer', 'hold') AND NOT p_body ? 'amount' THEN
        RETURN format('a %s needs an amount', v_kind);
    END IF;
    IF p_body ? 'amount' AND NOT request_amount_valid(p_body -> 'amount') THEN
        RETURN format('amount must be a string of decimal digits, from 1 to %s', c_amount_ceiling);
    END IF;
    IF p_body ? 'currency' AND (jsonb_typeof(p_body -> 'currency') <> 'string'
                                OR (p_body ->> 'currency') !~ c_currency_pattern) THEN
        RETURN 'currency must be three capital letters, like EUR';
    END IF;

    IF v_kind = 'hold' THEN
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

-- prisma/sql/request_transfer.sql
-- A transfer's request, as in the front-door-edges migration, checked by the one rule: its
-- arguments are the wire object's fields (a NULL one is an absent one, refused where required).
CREATE OR REPLACE FUNCTION "request_transfer"(
    p_operation_id TEXT,
    p_from         TEXT,
    p_to           TEXT,
    p_amount       BIGINT,
    p_currency     TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text,text,text,bigint,text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_transfer(text,text,text,bigint,text) FROM PUBLIC;

-- The intake takes the producer's trace context with a request: request_transfer() and
-- request_operation() gain a form with one more argument, the W3C trace context of the
-- producer's span as a JSON object ({"traceparent": "…"} and, when there is one, "tracestate"),
-- kept in transfer_requests.trace_context (the request-trace-context migration) with a request
-- that is new, so the relay that sends it hands it to the queue and the transfer's trace starts
-- where the producer asked for it. A duplicate keeps the context its first request stored. The
-- forms without it stay as they were: a producer that traces nothing calls them, as before.
-- Both new forms run as their owner (SECURITY DEFINER, like the old ones) and are granted to
-- every role that may execute request_transfer() now (the producer roles).
CREATE OR REPLACE FUNCTION "request_transfer"(
    p_operation_id  TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_trace_context JSONB
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text,text,text,bigint,text,jsonb) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION request_transfer(text,text,text,bigint,text,jsonb) FROM PUBLIC;

-- prisma/sql/transfers_decide_batch.sql
-- The batched decision, as in the batch-decision-plain-insert migration, with the same two
-- additions as apply_transfer() above. Every check always on: no parameter or branch skips one
-- (the negative controls' variant is derived from this file by harness/chaos/unsafe/).
CREATE OR REPLACE FUNCTION "transfers_decide_batch"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_lease_ids         UUID[]
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
-- Every statement here reaches wallets and transfers by primary key, a few dozen rows at a
-- time. On a small or freshly loaded table the planner prefers a sequential scan that tests
-- each row against the whole id array (10,000 wallets x 128 ids) and a hash join for the
-- write-back, which cost half the call (EXPLAIN in `npm run bench:explain`). Index lookups are
-- right at any table size, so the function asks for them.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    -- Same bound as TRANSFER_BATCH_MAX's upper limit in src/config/config.ts.
    c_batch_max CONSTANT INTEGER := 1000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_key       BIGINT;
    v_i         INTEGER;
    -- The locked wallets, by id: state as the batch's decisions leave it.
    w_id        TEXT[];
    w_currency  TEXT[];
    w_balance   BIGINT[];
    w_fence     BIGINT[];
    w_lease     UUID[];
    w_touched   BOOLEAN[];
    -- Idempotency records: those found, then those decided here (so a later twin sees them).
    r_op        TEXT[];
    r_hash      TEXT[];
    r_status    TEXT[];
    r_reason    TEXT[];
    r_fence     BIGINT[];
    -- The batch element each record was decided from; NULL for a record found in the table.
    r_element   INTEGER[];
    r_count     INTEGER;
    -- Ledger entries to write, in decision order (filled by index: no array copied per entry).
    l_op        TEXT[] := '{}';
    l_wallet    TEXT[] := '{}';
    l_kind      TEXT[] := '{}';
    l_amount    BIGINT[] := '{}';
    l_fence     BIGINT[] := '{}';
    l_lease     UUID[] := '{}';
    l_count     INTEGER := 0;
    -- One transfer.
    v_op        TEXT;
    v_from      TEXT;
    v_to        TEXT;
    v_amount    BIGINT;
    v_currency  TEXT;
    v_fence     BIGINT;
    v_lease     UUID;
    v_fi        INTEGER;
    v_ti        INTEGER;
    v_k         INTEGER;
    v_reason    TEXT;
    v_rows      INTEGER;
    v_touched   INTEGER;
    -- Operations answered from a record decided before this batch, with that record's hash:
    -- their open requests are closed here.
    d_op        TEXT[] := '{}';
    d_hash      TEXT[] := '{}';
    d_count     INTEGER := 0;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'apply_transfers: between 1 and % transfers per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_request_hashes), -1) <> v_n OR coalesce(cardinality(p_froms), -1) <> v_n
       OR coalesce(cardinality(p_tos), -1) <> v_n OR coalesce(cardinality(p_amounts), -1) <> v_n
       OR coalesce(cardinality(p_currencies), -1) <> v_n OR coalesce(cardinality(p_fences), -1) <> v_n
       OR coalesce(cardinality(p_lease_ids), -1) <> v_n THEN
        RAISE EXCEPTION 'apply_transfers: the arrays must all have % elements', v_n
            USING ERRCODE = '22023';
    END IF;
    IF array_position(p_operation_ids, NULL) IS NOT NULL OR array_position(p_request_hashes, NULL) IS NOT NULL
       OR array_position(p_froms, NULL) IS NOT NULL OR array_position(p_tos, NULL) IS NOT NULL
       OR array_position(p_amounts, NULL) IS NOT NULL OR array_position(p_fences, NULL) IS NOT NULL
       OR array_position(p_lease_ids, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM unnest(p_amounts) a WHERE a <= 0)
       OR EXISTS (SELECT 1 FROM unnest(p_fences) f WHERE f < 1) THEN
        RAISE EXCEPTION 'apply_transfers: ids, hashes, wallets and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;

    -- Every lock the batch needs, taken up front in one global order: the operations' advisory
    -- locks by key (twins across batches queue there instead of racing into a unique
    -- violation), then the wallet rows by id. Two batches that cross can wait for each other
    -- but never deadlock.
    FOR v_key IN
        SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
    LOOP
        PERFORM pg_advisory_xact_lock(v_key);
    END LOOP;
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO w_id, w_currency, w_balance, w_fence, w_lease, w_touched
      FROM (SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (p_froms || p_tos) ORDER BY w.id FOR UPDATE) l;

    SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
           coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'),
           coalesce(array_agg(t.fence), '{}'), coalesce(array_agg(NULL::INTEGER), '{}')
      INTO r_op, r_hash, r_status, r_reason, r_fence, r_element
      FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
    r_count := cardinality(r_op);

    FOR v_i IN 1 .. v_n LOOP
        v_op := p_operation_ids[v_i];
        v_from := p_froms[v_i];
        v_to := p_tos[v_i];
        v_amount := p_amounts[v_i];
        v_currency := p_currencies[v_i];
        v_fence := p_fences[v_i];
        v_lease := p_lease_ids[v_i];
        ord := v_i;

        v_k := array_position(r_op, v_op);
        IF v_k IS NOT NULL THEN
            IF r_element[v_k] IS NULL THEN
                d_count := d_count + 1;
                d_op[d_count] := v_op;
                d_hash[d_count] := r_hash[v_k];
            END IF;
            outcome := CASE WHEN r_hash[v_k] = p_request_hashes[v_i] THEN 'duplicate' ELSE 'conflict' END;
            status := r_status[v_k];
            reason := r_reason[v_k];
            fence := r_fence[v_k];
            wallet_fence := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_fi := array_position(w_id, v_from);
        v_ti := array_position(w_id, v_to);

        -- The fence guards the source wallet only. The destination's last_fence comes from
        -- another wallet's counter and is never compared with our token. An equal token
        -- passes only for the lease that set it (the riders of one lease share its token):
        -- after Redis lost increments another lease can carry the same number, and it is as
        -- stale as a lower one. The worker then raises the counter to the wallet's fence, so
        -- its next token is above it.
        IF v_fi IS NOT NULL
           AND (w_fence[v_fi] > v_fence
                OR (w_fence[v_fi] = v_fence AND w_lease[v_fi] IS DISTINCT FROM v_lease)) THEN
            outcome := 'stale_fence';
            status := NULL;
            reason := NULL;
            fence := NULL;
            wallet_fence := w_fence[v_fi];
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_reason := NULL;
        IF v_from = v_to THEN
            v_reason := 'same_wallet';
        ELSIF v_fi IS NULL OR v_ti IS NULL THEN
            v_reason := 'unknown_wallet';
        ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
            v_reason := 'currency_mismatch';
        ELSIF w_balance[v_fi] < v_amount THEN
            v_reason := 'insufficient_funds';
        END IF;

        IF v_fi IS NOT NULL THEN
            -- Every decision taken under our token raises the source's fence, refusals
            -- included, so fences on a wallet never go down in commit order; the lease that
            -- holds the fence is recorded with it.
            IF v_fence >= w_fence[v_fi] THEN
                w_fence[v_fi] := v_fence;
                w_lease[v_fi] := v_lease;
            END IF;
            w_touched[v_fi] := TRUE;
        END IF;
        IF v_reason IS NULL THEN
            w_balance[v_fi] := w_balance[v_fi] - v_amount;
            w_balance[v_ti] := w_balance[v_ti] + v_amount;
            w_touched[v_ti] := TRUE;
            l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
            l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := v_to;
            l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
            l_amount[l_count + 1] := -v_amount; l_amount[l_count + 2] := v_amount;
            l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
            l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
            l_count := l_count + 2;
        END IF;

        -- The record; kept here too, so a twin later in this batch answers from it.
        r_count := r_count + 1;
        r_op[r_count] := v_op;
        r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_reason[r_count] := v_reason;
        r_fence[r_count] := v_fence;
        r_element[r_count] := v_i;

        outcome := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        status := outcome;
        reason := v_reason;
        fence := v_fence;
        wallet_fence := CASE WHEN v_fi IS NOT NULL THEN w_fence[v_fi] ELSE NULL END;
        RETURN NEXT;
    END LOOP;

    -- Write what the decisions did, once per table. CHECK (balance >= 0) stays the last line of
    -- defence; a wallet that moved must be updated, or nothing commits.
    SELECT count(*) INTO v_touched FROM unnest(w_touched) t WHERE t;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, last_fence = u.last_fence, last_lease = u.last_lease,
               updated_at = CURRENT_TIMESTAMP
          FROM unnest(w_id, w_balance, w_fence, w_lease, w_touched) AS u(id, balance, last_fence, last_lease, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            -- Unreachable while the rows are locked; a credit that misses must never let the
            -- debit commit alone.
            RAISE EXCEPTION 'apply_transfers: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;

    IF l_count > 0 THEN
        -- In decision order, so ledger ids follow commit order within the batch.
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT e.op, e.wallet, e.kind, e.amount, e.fence, e.lease
          FROM unnest(l_op, l_wallet, l_kind, l_amount, l_fence, l_lease) WITH ORDINALITY
               AS e(op, wallet, kind, amount, fence, lease, n)
         ORDER BY e.n;
    END IF;

    -- The records, and in the same statement what they decide: the intake's request (when the
    -- operation came through it) is marked decided, and one outcome event per record joins the
    -- feed's pending events.
    -- The records are a plain INSERT: every operation of the batch is under its advisory
    -- lock, none had a record when the locks were held, and a twin inside the batch answered
    -- from the record decided before it (r_element is NULL for it), so each row inserted here is
    -- new. A row that is there now was written by someone who skipped the lock: the unique
    -- violation rolls back the whole batch, the money it moved included. ON CONFLICT DO NOTHING
    -- would have kept that money unrecorded, and pays a speculative insertion per record.
    WITH recorded AS (
        INSERT INTO transfers AS t (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                                    status, reason, fence, lease)
        SELECT r.op, r.hash, p_froms[r.element], p_tos[r.element], p_amounts[r.element], p_currencies[r.element],
               r.status, r.reason, r.fence, p_lease_ids[r.element]
          FROM unnest(r_op, r_hash, r_status, r_reason, r_fence, r_element) AS r(op, hash, status, reason, fence, element)
         WHERE r.element IS NOT NULL
         ORDER BY r.element
        RETURNING t.operation_id, t.request_hash, t.status, t.reason, t.from_wallet, t.to_wallet, t.amount, t.currency
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
        RETURNING q.operation_id, q.request_hash, q.from_wallet, q.to_wallet, q.amount, q.currency,
                  d.request_hash AS decided_hash
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
    SELECT d.operation_id, d.status, d.reason, d.from_wallet, d.to_wallet, d.amount, d.currency
      FROM recorded d
    UNION ALL
    SELECT q.operation_id, 'conflict', NULL, q.from_wallet, q.to_wallet, q.amount, q.currency
      FROM requested q
     WHERE q.request_hash <> q.decided_hash;

    -- Requests of operations decided before this batch (through the other door while the request
    -- was open, or a request sent again after its decision) are decided too; one that asked for
    -- another body than the record's gets its conflict event. Only batches with such answers pay.
    IF d_count > 0 THEN
        WITH closed AS (
            UPDATE transfer_requests q SET decided_at = clock_timestamp()
              FROM (SELECT DISTINCT x.op, x.hash FROM unnest(d_op, d_hash) AS x(op, hash)) d
             WHERE q.operation_id = d.op AND q.decided_at IS NULL
            RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.from_wallet, q.to_wallet, q.amount,
                      q.currency, d.hash AS decided_hash
        )
        INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
        SELECT c.operation_id, 'conflict', NULL, c.from_wallet, c.to_wallet, c.amount, c.currency
          FROM closed c
         WHERE c.request_hash <> c.decided_hash;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION transfers_decide_batch(text[],text[],text[],text[],bigint[],text[],bigint[],uuid[]) FROM PUBLIC;
