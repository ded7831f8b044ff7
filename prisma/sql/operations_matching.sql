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
