-- The front door's edges (issue 31): what a review of the intake, the feed and the give-ups found.
--
-- 1. A feed position, once returned, is never given to another event. Reading no longer sequences:
--    outcome_events_after() returns only positions that a sequencer has committed, so a reader
--    inside a transaction that later rolls back cannot have been handed a position of its own,
--    and no reader's transaction holds the sequencer's lock. The sequencer runs in statements of
--    its own, from the workers and the relays (src/intake/feed-sequencer.ts, the publisher), and
--    refuses any isolation level but READ COMMITTED instead of doing nothing.
-- 2. A give-up cannot be forged. record_transfer_given_up() takes the operation, the hash of the
--    body the failed job carried, a reason and (from a relay) the send it saw; the event takes
--    the stored request's body, only while the request is open and not given up, only when the
--    hashes agree, once per give-up. An operation with no request (a job sent to BullMQ
--    straight) gets no feed event: nothing in PostgreSQL can vouch for its body.
-- 3. A request decided through the other door is decided. request_transfer() takes the
--    operation's advisory lock, as the decision does, so the two doors are serialised on it; and a
--    decision that finds the operation decided already closes its open request, with a
--    'conflict' event when the request asked for another body (a new kind in the feed).
-- 4. A read of a pruned position is refused with an error that says so (SQLSTATE FT001).

ALTER TABLE "outcome_pending" DROP CONSTRAINT "outcome_pending_kind_known";
ALTER TABLE "outcome_pending" ADD CONSTRAINT "outcome_pending_kind_known"
    CHECK ("kind" IN ('applied', 'rejected', 'given_up', 'conflict'));
ALTER TABLE "outcome_events" DROP CONSTRAINT "outcome_events_kind_known";
ALTER TABLE "outcome_events" ADD CONSTRAINT "outcome_events_kind_known"
    CHECK ("kind" IN ('applied', 'rejected', 'given_up', 'conflict'));

-- The single decision, as in the single-decision-plain-insert migration, now closing the request
-- of an operation decided before (the duplicate path) and answering a request of another body
-- with a conflict event. Same signature, same answers; owner only, as before.
CREATE OR REPLACE FUNCTION "apply_transfer"(
    p_operation_id      TEXT,
    p_request_hash      TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_currency          TEXT,
    p_fence             BIGINT,
    p_lease_id          UUID,
    p_check_idempotency BOOLEAN DEFAULT TRUE,
    p_check_fence       BOOLEAN DEFAULT TRUE,
    p_check_lease       BOOLEAN DEFAULT TRUE
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

    IF p_check_idempotency THEN
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
    IF v_found_from AND p_check_fence THEN
        IF v_from.last_fence > p_fence
           OR (p_check_lease AND v_from.last_fence = p_fence AND v_from.last_lease IS DISTINCT FROM p_lease_id) THEN
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
    -- Checked, the record is a plain INSERT: under the operation's advisory lock the SELECT above
    -- found no row, so a row here now was written by someone who skipped that lock, and the
    -- unique violation rolls back the money this call moved. ON CONFLICT DO NOTHING would have
    -- kept it, unrecorded, and costs a speculative insertion (its confirm record, and a second
    -- index probe). Unchecked (the negative control), the record keeps the first outcome.
    IF p_check_idempotency THEN
        INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                               status, reason, fence, lease)
        VALUES (p_operation_id, p_request_hash, p_from, p_to, p_amount, p_currency, v_status, v_reason, p_fence, p_lease_id);
    ELSE
        INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                               status, reason, fence, lease)
        VALUES (p_operation_id, p_request_hash, p_from, p_to, p_amount, p_currency, v_status, v_reason, p_fence, p_lease_id)
        ON CONFLICT (operation_id) DO NOTHING;
    END IF;
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

-- The batched decision, as in the batch-decision-plain-insert migration, with the same two
-- additions as apply_transfer() above. Same signature, same answers, same options.
CREATE OR REPLACE FUNCTION "transfers_decide_batch"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_lease_ids         UUID[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN,
    p_check_lease       BOOLEAN
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
    IF p_check_idempotency THEN
        FOR v_key IN
            SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(v_key);
        END LOOP;
    END IF;
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO w_id, w_currency, w_balance, w_fence, w_lease, w_touched
      FROM (SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (p_froms || p_tos) ORDER BY w.id FOR UPDATE) l;

    IF p_check_idempotency THEN
        SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
               coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'),
               coalesce(array_agg(t.fence), '{}'), coalesce(array_agg(NULL::INTEGER), '{}')
          INTO r_op, r_hash, r_status, r_reason, r_fence, r_element
          FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
    ELSE
        r_op := '{}'; r_hash := '{}'; r_status := '{}'; r_reason := '{}'; r_fence := '{}'; r_element := '{}';
    END IF;
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

        IF p_check_idempotency THEN
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
        END IF;

        v_fi := array_position(w_id, v_from);
        v_ti := array_position(w_id, v_to);

        -- The fence guards the source wallet only. The destination's last_fence comes from
        -- another wallet's counter and is never compared with our token. An equal token
        -- passes only for the lease that set it (the riders of one lease share its token):
        -- after Redis lost increments another lease can carry the same number, and it is as
        -- stale as a lower one. The worker then raises the counter to the wallet's fence, so
        -- its next token is above it.
        IF v_fi IS NOT NULL AND p_check_fence
           AND (w_fence[v_fi] > v_fence
                OR (p_check_lease AND w_fence[v_fi] = v_fence AND w_lease[v_fi] IS DISTINCT FROM v_lease)) THEN
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
    -- feed's pending events. Only records actually inserted count, so an operation has exactly
    -- one decision event whatever the switches.
    -- Checked, the records are a plain INSERT: every operation of the batch is under its advisory
    -- lock, none had a record when the locks were held, and a twin inside the batch answered
    -- from the record decided before it (r_element is NULL for it), so each row inserted here is
    -- new. A row that is there now was written by someone who skipped the lock: the unique
    -- violation rolls back the whole batch, the money it moved included. ON CONFLICT DO NOTHING
    -- would have kept that money unrecorded, and pays a speculative insertion per record.
    -- Unchecked (the negative control), the records keep the first outcome.
    IF p_check_idempotency THEN
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
    ELSE
        WITH recorded AS (
            INSERT INTO transfers AS t (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                                        status, reason, fence, lease)
            SELECT r.op, r.hash, p_froms[r.element], p_tos[r.element], p_amounts[r.element], p_currencies[r.element],
                   r.status, r.reason, r.fence, p_lease_ids[r.element]
              FROM unnest(r_op, r_hash, r_status, r_reason, r_fence, r_element) AS r(op, hash, status, reason, fence, element)
             WHERE r.element IS NOT NULL
             ORDER BY r.element
            ON CONFLICT (operation_id) DO NOTHING
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
    END IF;

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

-- A producer's request, as in the intake-and-outcome-feed migration, now under the operation's
-- advisory lock (the one the decision takes), held until the producer's transaction ends. A
-- decision of the operation through the other door then either committed before the check below
-- (the request is recorded decided, or the call raises conflict at once) or waits for the
-- producer's commit and finds the request (the decision closes it). A producer in REPEATABLE READ
-- or SERIALIZABLE may not see a decision that committed while it waited: its request is then
-- closed by the first decision of its job, which finds the record (the duplicate path above).
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
    c_id_pattern       CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_currency_pattern CONSTANT TEXT := '^[A-Z]{3}$';
    v_hash     TEXT;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    IF p_operation_id IS NULL OR p_operation_id !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: operationId must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from IS NULL OR p_from !~ c_id_pattern OR p_to IS NULL OR p_to !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: from and to must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from = p_to THEN
        RAISE EXCEPTION 'request_transfer: from and to are the same wallet' USING ERRCODE = '22023';
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'request_transfer: amount must be positive' USING ERRCODE = '22023';
    END IF;
    IF p_currency IS NOT NULL AND p_currency !~ c_currency_pattern THEN
        RAISE EXCEPTION 'request_transfer: currency must be three capital letters, like EUR' USING ERRCODE = '22023';
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

-- The give-up, without a body from the caller. p_request_hash is requestHash() of the failed
-- job's body; p_send_count, when given (a relay gives the send_count its claim saw), must still be
-- the request's, so a give-up seen before a redrive cannot park the request again after it. The
-- event carries the stored request's body. Returns whether a give-up was recorded: false when the
-- operation is decided, has no open request, its request is given up already, was sent again
-- since, or asked for another body than the failed job's (a straight job that reused the id).
-- p_reason: the failed job's reason, at most 500 characters kept.
CREATE FUNCTION "record_transfer_given_up"(
    p_operation_id TEXT,
    p_request_hash TEXT,
    p_reason       TEXT,
    p_send_count   INTEGER DEFAULT NULL
) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_reason TEXT := left(coalesce(p_reason, 'no reason given'), 500);
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_request_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_transfer_given_up: an operation and the 64-hex-digit hash of its body must be given'
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
           AND q.request_hash = p_request_hash AND (p_send_count IS NULL OR q.send_count = p_send_count)
        RETURNING q.operation_id, q.from_wallet, q.to_wallet, q.amount, q.currency
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
    SELECT p.operation_id, 'given_up', v_reason, p.from_wallet, p.to_wallet, p.amount, p.currency FROM parked p;
    RETURN FOUND;
END;
$$;
REVOKE EXECUTE ON FUNCTION "record_transfer_given_up"(TEXT, TEXT, TEXT, INTEGER) FROM PUBLIC;

-- The sequencer, as in the lean-single-decision migration, but loud: in any isolation level but
-- READ COMMITTED it would see only its snapshot and could number events out of commit order, so
-- it raises (SQLSTATE 25000) instead of returning 0 for ever. Runs as its owner, so the worker
-- role may call it (each worker keeps the feed moving, src/intake/feed-sequencer.ts); the read
-- role may not, so no reader's transaction ever holds its lock.
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
    INSERT INTO outcome_events (position, operation_id, kind, reason, from_wallet, to_wallet, amount, currency, decided_at)
    SELECT b.last + row_number() OVER (ORDER BY m.id), m.operation_id, m.kind, m.reason, m.from_wallet, m.to_wallet,
           m.amount, m.currency, m.decided_at
      FROM moved m CROSS JOIN base b;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;

-- Reading the feed: the committed events after a position, oldest first, at most p_limit. No
-- sequencing here any more (see the header). A position below the first one kept (a prune
-- deleted it) is refused with SQLSTATE FT001, naming the first kept position, instead of
-- silently starting there.
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
    decided_at     TIMESTAMPTZ
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
               e.currency::TEXT, e.decided_at
          FROM outcome_events e
         WHERE e.position > p_after
         ORDER BY e.position
         LIMIT p_limit;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text, text, text, bigint, text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.record_transfer_given_up(text, text, text, integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.outcome_feed_sequence(integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.outcome_events_after(bigint, integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
END
$$;

-- The roles that could record a give-up with a body of their own (the worker roles) get the new
-- give-up and the sequencer instead; the old function goes.
DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'record_transfer_given_up(text, text, text, bigint, text, text)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION record_transfer_given_up(text, text, text, integer) TO %s', v_grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION outcome_feed_sequence(integer) TO %s', v_grantee);
    END LOOP;
END
$$;
DROP FUNCTION "record_transfer_given_up"(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT);
