-- A refund's checks (docs/reference/outcomes.md, in this order) and what it moves: money back from
-- the wallet the original credited (p_from) to the wallet it debited, bounded per payer by what the
-- original credited p_from (a transfer's amount, a captured hold's captured part, a split's leg:
-- p_leg_amount) less what was refunded of it so far (p_refunded). Without an amount a refund takes
-- what is left. p_original is the original's record (NULL when it has none), p_hold its hold's row.
CREATE OR REPLACE FUNCTION "decision_refunded"(
    p_from           TEXT,
    p_to             TEXT,
    p_amount         BIGINT,
    p_original       transfers,
    p_hold           holds,
    p_leg_amount     BIGINT,
    p_refunded       BIGINT,
    p_from_currency  TEXT,
    p_payee_currency TEXT,
    p_balance        BIGINT,
    OUT reason       TEXT,
    OUT amount       BIGINT,
    OUT credited     TEXT,
    OUT detail       JSONB,
    OUT wallets      TEXT[],
    OUT amounts      BIGINT[],
    OUT hold         holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_limit  BIGINT;
    v_left   BIGINT;
    v_moved  BIGINT;
BEGIN
    expiry_released := FALSE;
    amount := p_amount;
    credited := p_to;
    IF p_original.operation_id IS NULL THEN
        reason := 'original_not_found';
    ELSIF p_original.status <> 'applied' OR p_original.kind NOT IN ('transfer', 'hold', 'split') THEN
        reason := 'original_not_refundable';
    ELSIF p_original.kind = 'transfer' THEN
        IF p_original.to_wallet <> p_from THEN reason := 'wallet_mismatch'; ELSE v_limit := p_original.amount; END IF;
    ELSIF p_original.kind = 'hold' THEN
        IF p_hold.hold_id IS NULL OR p_hold.state <> 'captured' THEN
            reason := 'original_not_refundable';
        ELSIF p_hold.to_wallet <> p_from THEN
            reason := 'wallet_mismatch';
        ELSE
            v_limit := p_hold.captured;
        END IF;
    ELSIF p_leg_amount IS NULL THEN
        reason := 'wallet_mismatch';
    ELSE
        v_limit := p_leg_amount;
    END IF;
    IF reason IS NOT NULL THEN
        RETURN;
    END IF;
    credited := p_original.from_wallet;
    v_left := v_limit - coalesce(p_refunded, 0);
    v_moved := coalesce(p_amount, v_left);
    -- The original checked the wallets' currencies and that they differ: a refund checks only that
    -- both still exist and the funds.
    IF v_moved > v_left OR v_moved <= 0 THEN
        reason := 'refund_exceeds_original';
    ELSIF p_from_currency IS NULL OR p_payee_currency IS NULL THEN
        reason := 'unknown_wallet';
    ELSIF p_balance < v_moved THEN
        reason := 'insufficient_funds';
    END IF;
    IF reason IS NULL THEN
        amount := v_moved;
        wallets := ARRAY[p_from, credited];
        amounts := ARRAY[-v_moved, v_moved];
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_refunded(text,text,bigint,transfers,holds,bigint,bigint,text,text,bigint) FROM PUBLIC;
