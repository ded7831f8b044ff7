-- The checks of an operation that changes the wallet it is decided on rather than moving money, and
-- what it sets (in its detail, as strings where amounts: decide_batch() keeps them for the
-- operations after it). None posts anything.
--   open_wallet      the id must have no row (wallet_exists; a closed wallet keeps its row, so an id
--                    is never opened twice); opens it in p_currency with the credit limit p_limit,
--                    status `open`, balance and held 0.
--   freeze_wallet    refuses the wallet's debits from now on (status `debits_frozen`), and its
--                    credits too when p_credits is `refused` (status `frozen`).
--   unfreeze_wallet  status `open` again.
--   close_wallet     only an empty wallet (wallet_not_empty: a balance or held money other than 0);
--                    status `closed`, for good: it takes nothing again, and only open_wallet could
--                    change it, which refuses.
--   credit_limit     decision_limit_changed().
-- Every kind but open_wallet needs a row (unknown_wallet) that is not closed (wallet_closed). A
-- freeze of a frozen wallet and an unfreeze of an open one apply: the status asked for is the
-- status after. p_currency_now, p_status, p_balance, p_held and p_limit are the wallet's as the
-- batch's decisions before this one left them (p_currency_now NULL: no row).
CREATE OR REPLACE FUNCTION "decision_wallet_changed"(
    p_kind          TEXT,
    p_currency      TEXT,
    p_limit         BIGINT,
    p_credits       TEXT,
    p_currency_now  TEXT,
    p_status        TEXT,
    p_balance       BIGINT,
    p_held          BIGINT,
    p_limit_now     BIGINT,
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
    IF p_kind = 'open_wallet' THEN
        IF p_currency_now IS NOT NULL THEN
            reason := 'wallet_exists';
        END IF;
        detail := jsonb_build_object('status', 'open', 'currency', p_currency, 'creditLimit', p_limit::TEXT);
        RETURN;
    END IF;
    IF p_currency_now IS NULL THEN
        reason := 'unknown_wallet';
        RETURN;
    ELSIF p_status = 'closed' THEN
        reason := 'wallet_closed';
        RETURN;
    ELSIF p_kind = 'credit_limit' THEN
        SELECT l.reason, l.amount, l.detail INTO reason, amount, detail
          FROM decision_limit_changed(p_currency_now, p_balance, p_limit_now, p_limit) l;
        RETURN;
    END IF;
    detail := jsonb_build_object('previousStatus', p_status, 'status',
        CASE p_kind WHEN 'freeze_wallet' THEN CASE p_credits WHEN 'refused' THEN 'frozen' ELSE 'debits_frozen' END
                    WHEN 'unfreeze_wallet' THEN 'open'
                    ELSE 'closed' END);
    IF p_kind = 'close_wallet' AND (p_balance <> 0 OR p_held <> 0) THEN
        reason := 'wallet_not_empty';
        detail := jsonb_build_object('balance', p_balance::TEXT, 'held', p_held::TEXT);
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_wallet_changed(text,text,bigint,text,text,text,bigint,bigint,bigint) FROM PUBLIC;
