-- The hold sweep: releases up to p_limit active holds past their expiry back to their sources
-- (each wallet's held into its balance, with the ledger entries of `$expiry:<hold>`, their
-- running balances and the wallet's credit limit), ends them `expired` and appends an `expired` event per hold; raises, and
-- releases nothing, when it wrote fewer wallet rows than it releases into. Answers how many it
-- released.
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
        RETURNING w.id, w.balance, w.held, w.credit_limit
    ), released AS (
        -- A source's holds in hold-id order; each entry carries its account's balance after it,
        -- counted back from the row as written (the later releases taken off).
        SELECT e.hold_id, e.from_wallet, e.amount, m.balance, m.held, m.credit_limit,
               sum(e.amount) OVER (PARTITION BY e.from_wallet ORDER BY e.hold_id
                                   ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING) AS later
          FROM ended e JOIN moved m ON m.id = e.from_wallet
    ), entries AS (
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, lease,
                                    created_at)
        SELECT '$expiry:' || r.hold_id, x.wallet, x.kind, x.amount, x.after, x.credit_limit, NULL, NULL, clock_timestamp()
          FROM released r
         CROSS JOIN LATERAL (VALUES (1, '$held:' || r.from_wallet, 'debit', -r.amount, r.held + coalesce(r.later, 0), NULL),
                                    (2, r.from_wallet, 'credit', r.amount, r.balance - coalesce(r.later, 0), r.credit_limit))
               AS x(n, wallet, kind, amount, after, credit_limit)
         ORDER BY r.from_wallet, r.hold_id, x.n
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
