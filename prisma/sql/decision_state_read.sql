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
