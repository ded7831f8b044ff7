-- What a wallet's status refuses of an operation whose checks passed, judged on the postings it
-- would write (p_wallets, p_amounts; a negative amount is a debit), so every kind, present and to
-- come, answers to one rule: a debit of a wallet that is not open (`debits_frozen`, `frozen`,
-- `closed`) and a credit to a `frozen` or `closed` wallet are refused, wallet_closed before
-- wallet_frozen. Ledger accounts (`$held:`, `$settlement:`) have no status. Money a wallet's own
-- holds release back to it (a void, an expiry: a `$held:<wallet>` posting beside the credit) is
-- not a credit from outside and is never refused; a capture of a hold placed before a freeze takes
-- nothing from the frozen wallet's balance and proceeds. NULL when nothing is refused. w_status is
-- parallel to w_id (decide_batch()'s wallets); inlined into its caller.
CREATE OR REPLACE FUNCTION "decision_status_refusal"(
    p_wallets TEXT[],
    p_amounts BIGINT[],
    w_id      TEXT[],
    w_status  TEXT[]
) RETURNS TEXT
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE WHEN bool_or(s = 'closed') THEN 'wallet_closed' WHEN bool_or(s IS NOT NULL) THEN 'wallet_frozen' END
      FROM (SELECT CASE WHEN (x.amount < 0 AND w_status[array_position(w_id, x.wallet)] <> 'open')
                          OR (x.amount > 0 AND w_status[array_position(w_id, x.wallet)] IN ('frozen', 'closed')
                              AND NOT ('$held:' || x.wallet) = ANY (p_wallets))
                        THEN w_status[array_position(w_id, x.wallet)] END AS s
              FROM unnest(p_wallets, p_amounts) AS x(wallet, amount)
             WHERE x.wallet NOT LIKE '$%') refused
$$;

REVOKE EXECUTE ON FUNCTION decision_status_refusal(text[],bigint[],text[],text[]) FROM PUBLIC;
