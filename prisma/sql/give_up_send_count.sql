-- The send a give-up of this operation and body would be bound to now: the open request's
-- send_count, NULL when there is none to give up (decided, given up already, another body, no
-- request: a job sent to BullMQ straight). The worker reads it, then checks that its job is still
-- the failed one, then records the give-up with it: a redrive between any two steps has counted
-- a send, and the record is refused.
CREATE OR REPLACE FUNCTION "give_up_send_count"(p_operation_id TEXT, p_request_hash TEXT) RETURNS INTEGER
LANGUAGE sql
STABLE
AS $$
    SELECT q.send_count FROM transfer_requests q
     WHERE q.operation_id = p_operation_id AND q.request_hash = p_request_hash
       AND q.decided_at IS NULL AND q.given_up_at IS NULL;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.give_up_send_count(text,text) SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION give_up_send_count(text,text) FROM PUBLIC;
