-- A deposit's or a withdrawal's checks and what it moves: money entering from the outside world
-- (a deposit credits the wallet) or leaving for it (a withdrawal debits the wallet), each against
-- the currency's settlement account `$settlement:<currency>`, whose running balance is minus what
-- entered plus what left. The wallet must have a row (unknown_wallet) in the currency the message
-- names (currency_mismatch); a withdrawal, like every debit, may take the balance down to minus the
-- credit limit (p_spendable: balance plus limit), never below (insufficient_funds). A deposit
-- credits `p_wallet` (its `to`, the wallet it is decided and fenced on); a withdrawal credits no
-- wallet. The detail carries the external reference and the settlement account.
CREATE OR REPLACE FUNCTION "decision_settled"(
    p_kind            TEXT,
    p_wallet          TEXT,
    p_amount          BIGINT,
    p_currency        TEXT,
    p_reference       TEXT,
    p_wallet_currency TEXT,
    p_spendable       BIGINT,
    OUT reason        TEXT,
    OUT amount        BIGINT,
    OUT credited      TEXT,
    OUT detail        JSONB,
    OUT wallets       TEXT[],
    OUT amounts       BIGINT[],
    OUT hold          holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_settlement TEXT := '$settlement:' || p_currency;
BEGIN
    expiry_released := FALSE;
    amount := p_amount;
    credited := CASE WHEN p_kind = 'deposit' THEN p_wallet END;
    detail := jsonb_build_object('reference', p_reference, 'settlement', v_settlement);
    IF p_wallet_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_wallet_currency <> p_currency THEN
        reason := 'currency_mismatch';
    ELSIF p_kind = 'withdrawal' AND p_spendable < p_amount THEN
        reason := 'insufficient_funds';
    ELSIF p_kind = 'deposit' THEN
        wallets := ARRAY[v_settlement, p_wallet];
        amounts := ARRAY[-p_amount, p_amount];
    ELSE
        wallets := ARRAY[p_wallet, v_settlement];
        amounts := ARRAY[-p_amount, p_amount];
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_settled(text,text,bigint,text,text,text,bigint) FROM PUBLIC;
