-- The intake's backlog for the relay's gauges: open (undecided) requests, of them those never
-- sent and those given up, and the age of the oldest never sent (the relay's lag, seconds).
CREATE OR REPLACE FUNCTION "relay_intake_backlog"()
RETURNS TABLE ("open" BIGINT, unsent BIGINT, given_up BIGINT, lag_seconds DOUBLE PRECISION)
LANGUAGE sql
VOLATILE
AS $$
    SELECT count(*),
           count(*) FILTER (WHERE r.sent_at IS NULL),
           count(*) FILTER (WHERE r.given_up_at IS NOT NULL),
           extract(epoch FROM clock_timestamp() - min(r.requested_at) FILTER (WHERE r.sent_at IS NULL))::DOUBLE PRECISION
      FROM transfer_requests r WHERE r.decided_at IS NULL;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.relay_intake_backlog() SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION relay_intake_backlog() FROM PUBLIC;
