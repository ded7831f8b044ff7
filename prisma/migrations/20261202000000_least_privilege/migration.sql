-- Least privilege. The worker connects as a role of its own (created by
-- `npm run db:worker-role`) that may call the decision function(s) and read
-- _prisma_migrations, and nothing else: it cannot write wallets, transfers or
-- ledger_entries directly. The decision runs with its owner's rights instead.
-- See README, "Deployment and security".

-- The worker's decision, apply_transfers(), runs as its owner (SECURITY DEFINER, set by the
-- batched-decisions migration). Its search_path is fixed to the schema it lives in, with
-- pg_temp last: otherwise a caller could shadow "wallets" with a temporary table or a function
-- in a schema it controls. The schema name is taken when the migration runs, so the database
-- may use a schema other than public.
DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION %I.apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[]) '
        'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
        current_schema(), current_schema());
END
$$;

-- apply_transfer() (one transfer, with the negative controls' switches) stays with the
-- caller's rights and the owner alone: PostgreSQL lets PUBLIC execute every new function, and
-- a worker role that could pass p_check_idempotency = FALSE could apply an operation twice.
REVOKE EXECUTE ON FUNCTION apply_transfer(text, text, text, text, bigint, text, bigint, boolean, boolean) FROM PUBLIC;

-- Functions the migrating role creates from now on are not executable by PUBLIC either:
-- each new decision function is granted on purpose, by name.
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Nobody but the owner creates objects in the schema (already PostgreSQL 15's default for
-- public; older servers let PUBLIC create there) or temporary tables in the database.
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
    EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END
$$;

-- The ledger is append-only for everyone, the owner included: no role is granted UPDATE
-- or DELETE on it, and this trigger refuses them (and TRUNCATE) even where a grant or
-- ownership would allow them. A correction is a new entry, never an edit. Removing the
-- guard takes DDL (ALTER TABLE ... DISABLE TRIGGER or DROP TRIGGER) by the owner.
CREATE FUNCTION "ledger_entries_append_only"() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
        USING ERRCODE = '42501',
              HINT = 'post a correcting entry instead of changing or removing one';
END;
$$;
REVOKE EXECUTE ON FUNCTION "ledger_entries_append_only"() FROM PUBLIC;

CREATE TRIGGER "ledger_entries_no_update_delete"
    BEFORE UPDATE OR DELETE ON "ledger_entries"
    FOR EACH STATEMENT EXECUTE FUNCTION "ledger_entries_append_only"();

CREATE TRIGGER "ledger_entries_no_truncate"
    BEFORE TRUNCATE ON "ledger_entries"
    FOR EACH STATEMENT EXECUTE FUNCTION "ledger_entries_append_only"();
