-- The decision of payments (hold, capture, void, refund, split) for 1-1,000 operations given as
-- parallel arrays: every lock up front in one order (advisory locks by key, then the wallets by
-- id; a hold's payee found only once they are held is locked after them), the records, the fence
-- and lease of the debited wallet, each kind's checks (docs/reference/outcomes.md, order of
-- checks), then one write per table: wallets, ledger, holds, split legs, records with their
-- requests and outcome events. Every check always on: no parameter or branch skips one (the
-- negative controls' variant is derived from this file by harness/chaos/unsafe/).
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
