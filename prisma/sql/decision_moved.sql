-- A transfer's or a hold's checks and what it moves: a transfer debits its source and credits its
-- payee; a hold moves the amount from its source's balance into the source's holding account
-- (`$held:<source>`, the `held` column of its row) until a capture, a void or its expiry ends it.
-- A hold's expiry (p_expires) must fall after now and no later than p_latest (expiry_out_of_range,
-- checked before the funds). Postings: parallel wallets and signed amounts; the new hold's row.
CREATE OR REPLACE FUNCTION "decision_moved"(
    p_kind          TEXT,
    p_op            TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_from_currency TEXT,
    p_to_currency   TEXT,
    p_balance       BIGINT,
    p_expires       TIMESTAMPTZ,
    p_now           TIMESTAMPTZ,
    p_latest        TIMESTAMPTZ,
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
    amount := p_amount;
    credited := p_to;
    IF p_kind = 'transfer' THEN
        reason := decision_refusal(p_from, p_to, p_from_currency, p_to_currency, p_currency, p_balance, p_amount);
        IF reason IS NULL THEN
            wallets := ARRAY[p_from, p_to];
            amounts := ARRAY[-p_amount, p_amount];
        END IF;
        RETURN;
    END IF;
    reason := decision_refusal(p_from, p_to, p_from_currency, p_to_currency, p_currency, p_balance, p_amount,
                               CASE WHEN p_expires <= p_now OR p_expires > p_latest THEN 'expiry_out_of_range' END);
    IF reason IS NULL THEN
        wallets := ARRAY[p_from, '$held:' || p_from];
        amounts := ARRAY[-p_amount, p_amount];
        hold := ROW(p_op, p_from, p_to, p_amount, p_currency, p_expires, 'active', 0, 0, NULL, NULL, NULL)::holds;
        detail := jsonb_build_object('expiresAt', to_char(p_expires AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_moved(text,text,text,text,bigint,text,text,text,bigint,timestamp with time zone,timestamp with time zone,timestamp with time zone) FROM PUBLIC;
