-- A split's checks and what it moves: one debit of its source for the legs' total, one credit per
-- leg, all legs or none. Each leg is checked as a movement of its own (decision_refusal(): same
-- wallet, unknown wallet, currency), in leg order, then the total against the source's balance.
-- A leg without a wallet or a positive amount, or a wallet named in two legs, is a malformed
-- call (22023): the intake and the worker refuse such bodies before they get here.
CREATE OR REPLACE FUNCTION "decision_split"(
    p_op            TEXT,
    p_from          TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_legs          JSONB,
    p_wallet_ids    TEXT[],
    p_currencies    TEXT[],
    p_balance       BIGINT,
    OUT reason      TEXT,
    OUT amount      BIGINT,
    OUT credited    TEXT,
    OUT detail      JSONB,
    OUT wallets     TEXT[],
    OUT amounts     BIGINT[],
    OUT hold         holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_leg    JSONB;
    v_to     TEXT;
    v_total  BIGINT := 0;
    v_from_currency TEXT := p_currencies[array_position(p_wallet_ids, p_from)];
BEGIN
    expiry_released := FALSE;
    wallets := ARRAY[p_from];
    amounts := ARRAY[NULL::BIGINT];
    FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs) l LOOP
        IF (v_leg ->> 'amount') IS NULL OR (v_leg ->> 'amount') !~ '^[0-9]{1,19}$' OR (v_leg ->> 'amount')::NUMERIC <= 0
           OR (v_leg ->> 'to') IS NULL THEN
            RAISE EXCEPTION 'apply_payments: split % has a leg without a wallet or a positive amount', p_op
                USING ERRCODE = '22023';
        END IF;
        v_to := v_leg ->> 'to';
        v_total := v_total + (v_leg ->> 'amount')::BIGINT;
        wallets := wallets || v_to;
        amounts := amounts || (v_leg ->> 'amount')::BIGINT;
        reason := coalesce(reason, decision_refusal(p_from, v_to, v_from_currency,
            p_currencies[array_position(p_wallet_ids, v_to)], p_currency, NULL, NULL));
    END LOOP;
    IF reason IS NULL AND (SELECT count(DISTINCT l ->> 'to') FROM jsonb_array_elements(p_legs) l)
                            <> jsonb_array_length(p_legs) THEN
        RAISE EXCEPTION 'apply_payments: split % names one wallet in two legs', p_op USING ERRCODE = '22023';
    END IF;
    -- The total, as the balance check of a movement out of the source (no payee of its own).
    reason := coalesce(reason, decision_refusal(p_from, NULL, v_from_currency, v_from_currency, NULL, p_balance, v_total));
    amount := CASE WHEN reason IS NULL THEN v_total ELSE coalesce(p_amount, v_total) END;
    detail := jsonb_build_object('legs', p_legs);
    IF reason IS NULL THEN
        amounts[1] := -v_total;
    ELSE
        wallets := NULL;
        amounts := NULL;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_split(text,text,bigint,text,jsonb,text[],text[],bigint) FROM PUBLIC;
