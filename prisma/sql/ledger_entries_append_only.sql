-- The ledger is append-only for everyone, the owner included: no role is granted UPDATE
-- or DELETE on it, and this trigger refuses them (and TRUNCATE) even where a grant or
-- ownership would allow them. A correction is a new entry, never an edit. Removing the
-- guard takes DDL (ALTER TABLE ... DISABLE TRIGGER or DROP TRIGGER) by the owner.
CREATE OR REPLACE FUNCTION "ledger_entries_append_only"() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'ledger_entries is append-only: % refused', TG_OP
        USING ERRCODE = '42501',
              HINT = 'post a correcting entry instead of changing or removing one';
END;
$$;

REVOKE EXECUTE ON FUNCTION ledger_entries_append_only() FROM PUBLIC;

CREATE OR REPLACE TRIGGER "ledger_entries_no_update_delete"
    BEFORE UPDATE OR DELETE ON "ledger_entries"
    FOR EACH STATEMENT EXECUTE FUNCTION "ledger_entries_append_only"();

CREATE OR REPLACE TRIGGER "ledger_entries_no_truncate"
    BEFORE TRUNCATE ON "ledger_entries"
    FOR EACH STATEMENT EXECUTE FUNCTION "ledger_entries_append_only"();
