-- Holding wallets (`$held:<wallet>`) are wallets rows, so the decisions must not take them as a
-- wallet a message names: a direct caller of apply_transfers() with the worker role's credential
-- could otherwise move held money, leave a hold its money no longer covers, and stop the sweep at
-- that hold. `$` is outside the wire format's alphabet, so no worker ever sends one; a call that
-- does is refused before any decision. IMMUTABLE and free of the rows, so a wrapper evaluates it
-- once, before the decision runs.
CREATE OR REPLACE FUNCTION "decision_wallet_ids_checked"(p_ids TEXT[], p_legs JSONB[] DEFAULT NULL) RETURNS BOOLEAN
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_ids) i WHERE i LIKE '$%')
       OR EXISTS (SELECT 1 FROM unnest(p_legs) g, jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l
                   WHERE l ->> 'to' LIKE '$%') THEN
        RAISE EXCEPTION 'a wallet id starting with $ is the ledger''s own (a holding or funding account), never a message''s'
            USING ERRCODE = '22023';
    END IF;
    RETURN TRUE;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_wallet_ids_checked(text[],jsonb[]) FROM PUBLIC;
