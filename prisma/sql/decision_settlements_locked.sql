-- The settlement accounts a batch's deposits and withdrawals post to (`$settlement:<currency>`),
-- locked and read once the batch holds its wallet rows: each under a transaction-scoped advisory
-- lock on its id, in id order (after every row lock, so no cycle with them), then its balance as
-- its last entry left it (0 before the first). The lock is held to the commit, so the entries of
-- two batches that post to one account follow each other and each carries the balance after it.
-- A settlement account has no wallet row, no fence and no limit: its balance is what its entries
-- sum to, minus what entered plus what left. Parallel arrays in id order; empty when the batch has
-- neither kind. Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_settlements_locked"(
    p_kinds        TEXT[],
    p_currencies   TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    w_id := '{}'; w_currency := '{}'; w_balance := '{}';
    IF NOT ('deposit' = ANY (p_kinds) OR 'withdrawal' = ANY (p_kinds)) THEN
        RETURN;
    END IF;
    w_id := ARRAY(SELECT DISTINCT '$settlement:' || p_currencies[i] FROM generate_subscripts(p_kinds, 1) i
                   WHERE p_kinds[i] IN ('deposit', 'withdrawal') ORDER BY 1);
    PERFORM pg_advisory_xact_lock(hashtextextended(a.id, 0)) FROM unnest(w_id) WITH ORDINALITY AS a(id, n) ORDER BY a.n;
    SELECT array_agg(substr(a.id, 13) ORDER BY a.n),
           array_agg(coalesce((SELECT e.balance_after FROM ledger_entries e WHERE e.wallet_id = a.id
                                ORDER BY e.created_at DESC, e.id DESC LIMIT 1), 0) ORDER BY a.n)
      INTO w_currency, w_balance
      FROM unnest(w_id) WITH ORDINALITY AS a(id, n);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_settlements_locked(text[],text[]) FROM PUBLIC;
