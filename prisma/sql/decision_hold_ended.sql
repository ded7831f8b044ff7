-- A capture's or a void's checks (docs/reference/outcomes.md, in this order) and how the hold ends:
-- the whole held amount leaves the source's holding account, the captured part to the hold's
-- payee, the rest back to the source; a void gives it all back. A hold past its expiry and not
-- swept yet is released here, once, as the sweep would (the answer is still hold_expired; the
-- postings, with expiry_released, are the release's own, `$expiry:<hold>`, unfenced). p_hold is
-- the hold's row (NULL when it has none); p_original its record, which tells a refused hold from
-- no hold at all.
CREATE OR REPLACE FUNCTION "decision_hold_ended"(
    p_kind              TEXT,
    p_op                TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_hold              holds,
    p_original          transfers,
    p_now               TIMESTAMPTZ,
    OUT reason          TEXT,
    OUT amount          BIGINT,
    OUT credited        TEXT,
    OUT detail          JSONB,
    OUT wallets         TEXT[],
    OUT amounts         BIGINT[],
    OUT hold            holds,
    OUT expiry_released BOOLEAN
)
LANGUAGE plpgsql
IMMUTABLE
AS $$
DECLARE
    v_rest BIGINT;
BEGIN
    amount := p_amount;
    credited := CASE WHEN p_kind = 'void' THEN p_from ELSE p_to END;
    hold := p_hold;
    expiry_released := FALSE;
    IF p_hold.hold_id IS NULL AND p_original.kind = 'hold' AND p_original.status = 'rejected' THEN
        reason := 'hold_rejected';
    ELSIF p_hold.hold_id IS NULL THEN
        reason := 'hold_not_found';
    ELSIF p_hold.from_wallet <> p_from THEN
        reason := 'wallet_mismatch';
    ELSIF p_hold.state = 'captured' THEN
        reason := 'hold_already_captured';
    ELSIF p_hold.state = 'voided' THEN
        reason := 'hold_already_voided';
    ELSIF p_hold.state = 'expired' OR p_hold.expires_at <= p_now THEN
        reason := 'hold_expired';
        IF p_hold.state = 'active' THEN
            wallets := ARRAY['$held:' || p_hold.from_wallet, p_hold.from_wallet];
            amounts := ARRAY[-p_hold.amount, p_hold.amount];
            hold.state := 'expired';
            hold.released := p_hold.amount;
            hold.ended_at := p_now;
            expiry_released := TRUE;
        END IF;
    ELSIF p_kind = 'capture' AND coalesce(p_amount, p_hold.amount) > p_hold.amount THEN
        reason := 'exceeds_hold_amount';
    ELSE
        amount := CASE WHEN p_kind = 'capture' THEN coalesce(p_amount, p_hold.amount) ELSE p_hold.amount END;
        v_rest := p_hold.amount - CASE WHEN p_kind = 'capture' THEN amount ELSE 0 END;
        wallets := ARRAY['$held:' || p_from];
        amounts := ARRAY[-p_hold.amount];
        IF p_kind = 'capture' THEN
            credited := p_hold.to_wallet;
            wallets := wallets || p_hold.to_wallet;
            amounts := amounts || amount;
            detail := jsonb_build_object('released', v_rest::TEXT);
        END IF;
        IF v_rest > 0 THEN
            wallets := wallets || p_from;
            amounts := amounts || v_rest;
        END IF;
        hold.state := CASE WHEN p_kind = 'capture' THEN 'captured' ELSE 'voided' END;
        hold.captured := CASE WHEN p_kind = 'capture' THEN amount ELSE 0 END;
        hold.released := v_rest;
        hold.ended_by := p_op;
        hold.ended_at := p_now;
    END IF;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_hold_ended(text,text,text,text,bigint,holds,transfers,timestamp with time zone) FROM PUBLIC;
