-- Opens the next lock epoch for a lock service (`npm run lock:epoch -- --open <backend>`, as the
-- database's owner; no worker role may call it): every token issued under it is above every
-- token of the epochs before, whatever numbers either lock service counts in. Serialised on the
-- table, so two operators at once open two epochs one after the other, never one twice.
CREATE OR REPLACE FUNCTION "lock_epoch_open"(p_backend TEXT, p_note TEXT) RETURNS INTEGER
LANGUAGE plpgsql
AS $$
DECLARE
    v_epoch INTEGER;
BEGIN
    IF p_backend IS NULL OR p_backend NOT IN ('redis', 'etcd', 'postgres') THEN
        RAISE EXCEPTION 'lock_epoch_open: backend must be redis, etcd or postgres, got %', coalesce(p_backend, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    LOCK TABLE lock_epochs IN EXCLUSIVE MODE;
    SELECT coalesce(max(e.epoch), -1) + 1 INTO v_epoch FROM lock_epochs e;
    IF v_epoch > 1023 THEN
        RAISE EXCEPTION 'lock_epoch_open: the 1,024 lock epochs are spent' USING ERRCODE = '54000';
    END IF;
    INSERT INTO lock_epochs (epoch, backend, note) VALUES (v_epoch, p_backend, left(p_note, 200));
    RETURN v_epoch;
END
$$;
REVOKE EXECUTE ON FUNCTION lock_epoch_open(text,text) FROM PUBLIC;
