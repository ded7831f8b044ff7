-- The verdict of an operation that names another or has legs: its kind's checks
-- (docs/reference/outcomes.md) and what it moves, from the batch's state as the decisions before it
-- left it (the locked wallets, the holds, originals, split legs and refunded sums decide_batch()
-- keeps; passed read-only). A capture and a void: decision_hold_ended(); a refund:
-- decision_refunded(); a split: decision_split(); a deposit and a withdrawal: decision_settled(). A
-- transfer's and a hold's is decision_moved(), and a change of the wallet itself
-- decision_wallet_changed(), which decide_batch() asks itself; every kind's verdict has the same
-- fields. p_spendable is what the source may still debit: its balance plus its credit limit.
CREATE OR REPLACE FUNCTION "decision_verdict"(
    p_kind          TEXT,
    p_op            TEXT,
    p_from          TEXT,
    p_to            TEXT,
    p_amount        BIGINT,
    p_currency      TEXT,
    p_ref           TEXT,
    p_legs          JSONB,
    p_now           TIMESTAMPTZ,
    w_id            TEXT[],
    w_currency      TEXT[],
    p_spendable     BIGINT,
    h_id            TEXT[],
    h               holds[],
    o_id            TEXT[],
    o               transfers[],
    s               split_legs[],
    f_key           TEXT[],
    f_sum           BIGINT[]
) RETURNS RECORD
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_fi INTEGER := array_position(w_id, p_from);
    v_k  INTEGER := array_position(h_id, p_ref);
    v_o  INTEGER := array_position(o_id, p_ref);
BEGIN
    IF p_kind IN ('capture', 'void') THEN
        RETURN decision_hold_ended(p_kind, p_op, p_from, p_to, p_amount, h[v_k], o[v_o], p_now);
    ELSIF p_kind = 'refund' THEN
        RETURN decision_refunded(p_from, p_to, p_amount, o[v_o], h[v_k],
                   (SELECT (x).amount FROM unnest(s) x WHERE (x).operation_id = p_ref AND (x).to_wallet = p_from),
                   f_sum[array_position(f_key, p_ref || E'\n' || p_from)], w_currency[v_fi],
                   w_currency[array_position(w_id, (o[v_o]).from_wallet)], p_spendable);
    ELSIF p_kind IN ('deposit', 'withdrawal') THEN
        RETURN decision_settled(p_kind, p_from, p_amount, p_currency, p_ref, w_currency[v_fi], p_spendable);
    END IF;
    RETURN decision_split(p_op, p_from, p_amount, p_currency, p_legs, w_id, w_currency, p_spendable);
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_verdict(text,text,text,text,bigint,text,text,jsonb,timestamp with time zone,text[],text[],bigint,text[],holds[],text[],transfers[],split_legs[],text[],bigint[]) FROM PUBLIC;
