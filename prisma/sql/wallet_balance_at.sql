-- A wallet's balance and held amount at an instant: the running balances of the last entries at or
-- before p_at of its account and of its holding account (`$held:<wallet>`), 0 before its first
-- entry. Two index lookups on (wallet_id, created_at, id), whatever the ledger's size. P0002 when
-- the wallet has no row. The read role may call it (`npm run db:read-role`).
CREATE OR REPLACE FUNCTION "wallet_balance_at"(p_wallet TEXT, p_at TIMESTAMPTZ)
RETURNS TABLE (
    wallet_id   TEXT,
    currency    TEXT,
    balance     BIGINT,
    held        BIGINT,
    last_entry  BIGINT,
    at          TIMESTAMPTZ
)
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF p_wallet IS NULL OR p_at IS NULL THEN
        RAISE EXCEPTION 'wallet_balance_at: the wallet and the instant are required' USING ERRCODE = '22023';
    END IF;
    RETURN QUERY
        SELECT w.id, w.currency::TEXT, coalesce(b.balance_after, 0), coalesce(h.balance_after, 0),
               GREATEST(b.id, h.id), p_at
          FROM wallets w
          LEFT JOIN LATERAL (
              SELECT e.id, e.balance_after FROM ledger_entries e
               WHERE e.wallet_id = w.id AND e.created_at <= p_at
               ORDER BY e.created_at DESC, e.id DESC LIMIT 1) b ON TRUE
          LEFT JOIN LATERAL (
              SELECT e.id, e.balance_after FROM ledger_entries e
               WHERE e.wallet_id = '$held:' || w.id AND e.created_at <= p_at
               ORDER BY e.created_at DESC, e.id DESC LIMIT 1) h ON TRUE
         WHERE w.id = p_wallet;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'wallet_balance_at: no wallet %', p_wallet USING ERRCODE = 'P0002';
    END IF;
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.wallet_balance_at(text,timestamp with time zone) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION wallet_balance_at(text,timestamp with time zone) FROM PUBLIC;
