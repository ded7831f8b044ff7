-- The relay's give-up: only for a re-send (send_count above 1) that the claim p_claim took and
-- that is still the request's last send (p_send_count), recorded by record_transfer_given_up()
-- with the stored request's hash. A relay that did not make the claim does not know its UUID; a
-- redrive or another relay's re-send since has moved the send on. False, and nothing, otherwise.
CREATE OR REPLACE FUNCTION "relay_record_given_up"(p_operation_id TEXT, p_reason TEXT, p_send_count INTEGER, p_claim UUID)
RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_hash TEXT;
BEGIN
    IF p_operation_id IS NULL OR p_send_count IS NULL OR p_claim IS NULL THEN
        RAISE EXCEPTION 'relay_record_given_up: an operation, the send_count and the claim of its re-send must be given'
            USING ERRCODE = '22023';
    END IF;
    SELECT q.request_hash::TEXT INTO v_hash FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.relay_claim = p_claim AND q.send_count = p_send_count
       AND q.send_count > 1;
    IF v_hash IS NULL THEN
        RETURN FALSE;
    END IF;
    -- Checks the send again under the operation's lock: a claim moves send_count, so the same
    -- send is the same claim.
    RETURN record_transfer_given_up(p_operation_id, v_hash, p_reason, p_send_count);
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_record_given_up(text,text,integer,uuid) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_record_given_up(text,text,integer,uuid) FROM PUBLIC;
