-- The checks of a movement of money from one wallet to another, in their one order
-- (docs/reference/outcomes.md): same_wallet, unknown_wallet (a wallet without a row has no
-- currency), currency_mismatch (the two wallets' currencies, and the one the request names), the
-- kind's own refusal when it has one (a hold's expiry_out_of_range), then insufficient_funds.
-- NULL when the money may move. p_balance is what the source may still debit: its balance plus its
-- credit limit (a debit may take the balance down to minus the limit, never below). A transfer, a
-- hold, each leg of a split (no balance: the split checks its total once) and a refund (after its
-- bound) all ask it; inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_refusal"(
    p_from          TEXT,
    p_to            TEXT,
    p_from_currency TEXT,
    p_to_currency   TEXT,
    p_currency      TEXT,
    p_balance       BIGINT,
    p_amount        BIGINT,
    p_kind_refusal  TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE
        WHEN p_from = p_to THEN 'same_wallet'
        WHEN p_from_currency IS NULL OR p_to_currency IS NULL THEN 'unknown_wallet'
        WHEN p_from_currency <> p_to_currency OR p_currency <> p_from_currency THEN 'currency_mismatch'
        WHEN p_kind_refusal IS NOT NULL THEN p_kind_refusal
        WHEN p_balance < p_amount THEN 'insufficient_funds'
    END
$$;

REVOKE EXECUTE ON FUNCTION decision_refusal(text,text,text,text,text,bigint,bigint,text) FROM PUBLIC;
