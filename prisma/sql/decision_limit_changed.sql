-- A credit limit change's checks and what it sets: the wallet must have a row (unknown_wallet),
-- and the new limit must cover what the wallet already uses (its balance below zero): a limit
-- below that is refused limit_below_used, so at every instant the balance stays at or above minus
-- the limit in force, and the ledger's history never shows otherwise. A limit raised, kept or
-- lowered within what is used applies at once to every debit decided after it. No postings: the
-- same fields as every kind's verdict; the amount it records is the limit asked for, its detail
-- the limit before, the new one and what was used (amounts as strings, as on the wire). p_balance
-- is the wallet's available balance (held money excluded).
CREATE OR REPLACE FUNCTION "decision_limit_changed"(
    p_currency      TEXT,
    p_balance       BIGINT,
    p_limit         BIGINT,
    p_new_limit     BIGINT,
    OUT reason      TEXT,
    OUT amount      BIGINT,
    OUT credited    TEXT,
    OUT detail      JSONB,
    OUT wallets     TEXT[],
    OUT amounts     BIGINT[],
    OUT hold        holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    expiry_released := FALSE;
    amount := p_new_limit;
    IF p_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_balance + p_new_limit < 0 THEN
        reason := 'limit_below_used';
    END IF;
    IF p_currency IS NOT NULL THEN
        detail := jsonb_build_object('creditLimit', p_new_limit::TEXT, 'previousCreditLimit', p_limit::TEXT,
                                     'used', GREATEST(-p_balance, 0)::TEXT);
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_limit_changed(text,bigint,bigint,bigint) FROM PUBLIC;
