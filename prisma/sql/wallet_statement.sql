-- A wallet's statement: its entries (and, with p_held, its holding account's) from p_from to
-- before p_to, in the order they were decided, at most p_limit (1-1,000) after the cursor
-- (p_after_at, p_after_id: the last entry of the page before; both NULL for the first page). Each
-- entry carries its account's balance after it. One index range scan per account on (wallet_id,
-- created_at, id). P0002 when the wallet has no row. The read role may call it.
CREATE OR REPLACE FUNCTION "wallet_statement"(
    p_wallet   TEXT,
    p_from     TIMESTAMPTZ,
    p_to       TIMESTAMPTZ,
    p_after_at TIMESTAMPTZ,
    p_after_id BIGINT,
    p_limit    INTEGER,
    p_held     BOOLEAN DEFAULT FALSE
)
RETURNS TABLE (
    entry_id      BIGINT,
    at            TIMESTAMPTZ,
    operation_id  TEXT,
    account       TEXT,
    kind          TEXT,
    amount        BIGINT,
    balance_after BIGINT
)
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF p_wallet IS NULL OR p_from IS NULL OR p_to IS NULL OR p_limit IS NULL OR p_limit < 1 OR p_limit > 1000
       OR (p_after_at IS NULL) <> (p_after_id IS NULL) OR p_held IS NULL THEN
        RAISE EXCEPTION 'wallet_statement: a wallet, a range, a limit from 1 to 1000 and a whole cursor or none'
            USING ERRCODE = '22023';
    END IF;
    PERFORM 1 FROM wallets w WHERE w.id = p_wallet;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'wallet_statement: no wallet %', p_wallet USING ERRCODE = 'P0002';
    END IF;
    RETURN QUERY
        SELECT x.id, x.created_at, x.operation_id, x.wallet_id, x.kind, x.amount, x.balance_after
          FROM (
              SELECT e.id, e.created_at, e.operation_id, e.wallet_id, e.kind, e.amount, e.balance_after
                FROM ledger_entries e
               WHERE e.wallet_id = p_wallet AND e.created_at >= p_from AND e.created_at < p_to
                 AND (p_after_at IS NULL OR (e.created_at, e.id) > (p_after_at, p_after_id))
               ORDER BY e.created_at, e.id LIMIT p_limit
          ) x
        UNION ALL
        SELECT y.id, y.created_at, y.operation_id, y.wallet_id, y.kind, y.amount, y.balance_after
          FROM (
              SELECT e.id, e.created_at, e.operation_id, e.wallet_id, e.kind, e.amount, e.balance_after
                FROM ledger_entries e
               WHERE p_held AND e.wallet_id = '$held:' || p_wallet AND e.created_at >= p_from AND e.created_at < p_to
                 AND (p_after_at IS NULL OR (e.created_at, e.id) > (p_after_at, p_after_id))
               ORDER BY e.created_at, e.id LIMIT p_limit
          ) y
         ORDER BY 2, 1
         LIMIT p_limit;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.wallet_statement(text,timestamp with time zone,timestamp with time zone,timestamp with time zone,bigint,integer,boolean) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION wallet_statement(text,timestamp with time zone,timestamp with time zone,timestamp with time zone,bigint,integer,boolean) FROM PUBLIC;
