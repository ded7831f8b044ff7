-- The lock epoch in force and its lock service (LOCK_BACKEND): the newest row of lock_epochs. A
-- worker reads it at start and on every readiness probe: it issues tokens of that epoch
-- (epoch × 2^53 + its backend's number), and refuses to run when the epoch belongs to another
-- backend, so a fleet that has moved on cannot be joined by a worker of the old lock service.
CREATE OR REPLACE FUNCTION "lock_epoch_current"() RETURNS TABLE (epoch INTEGER, backend TEXT)
LANGUAGE sql
STABLE
AS $$
    SELECT e.epoch, e.backend FROM lock_epochs e ORDER BY e.epoch DESC LIMIT 1;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.lock_epoch_current() SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
                   current_schema(), current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION lock_epoch_current() FROM PUBLIC;
