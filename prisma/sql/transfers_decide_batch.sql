-- The decision of 1-1,000 transfers given as parallel arrays (one token and one lease id each):
-- every lock up front in one order, the records, the fence and lease of the source, the checks
-- (same_wallet, unknown_wallet, currency_mismatch, insufficient_funds), then one write per table:
-- wallets (every row it moved, or nothing commits), ledger, records with their requests and
-- outcome events. Every check always on: no parameter or branch skips one (the negative
-- controls' variant is derived from this file by harness/chaos/unsafe/).
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
