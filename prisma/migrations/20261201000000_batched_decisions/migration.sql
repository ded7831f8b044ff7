-- Batched decisions: many transfers in one round trip and one commit (DESIGN.md, "Batched
-- decisions"). The unit of correctness stays the single transfer: each one keeps its own
-- idempotency record, fence check on its own source wallet, balance check, ledger entries and
-- outcome. The decision for one transfer now lives in transfer_decide(), called by
-- apply_transfer() (one transfer) and apply_transfers() (many), so the two cannot drift apart.

-- The decision for one transfer, for a caller that already holds the operation's advisory lock
-- (when p_check_idempotency) and the row locks of both wallets. Not callable by anyone else:
-- without those locks twins could race and rows could be read before they are locked.
-- OUT o_outcome: 'applied' | 'rejected' | 'duplicate' | 'conflict' | 'stale_fence'; the other
-- OUT columns as apply_transfer() documents them.
CREATE FUNCTION "transfer_decide"(
    p_operation_id      TEXT,
    p_request_hash      TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_currency          TEXT,
    p_fence             BIGINT,
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN,
    OUT o_outcome       TEXT,
    OUT o_status        TEXT,
    OUT o_reason        TEXT,
    OUT o_fence         BIGINT,
    OUT o_wallet_fence  BIGINT
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_existing   RECORD;
    v_wallet     RECORD;
    v_from       RECORD;
    v_to         RECORD;
    v_found_from BOOLEAN := FALSE;
    v_found_to   BOOLEAN := FALSE;
    v_reason     TEXT := NULL;
    v_rows       INTEGER;
BEGIN
    IF p_operation_id IS NULL OR p_from IS NULL OR p_to IS NULL OR p_request_hash IS NULL
       OR p_amount IS NULL OR p_amount <= 0 OR p_fence IS NULL OR p_fence < 1 THEN
        RAISE EXCEPTION 'transfer_decide: ids and hash must be given, amount and fence positive'
            USING ERRCODE = '22023';
    END IF;

    IF p_check_idempotency THEN
        -- Each statement of a VOLATILE function sees the writes of the statements before it,
        -- so a twin decided earlier in the same batch is found here.
        SELECT t.request_hash, t.status, t.reason, t.fence INTO v_existing
          FROM transfers t WHERE t.operation_id = p_operation_id;
        IF FOUND THEN
            o_outcome := CASE WHEN v_existing.request_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END;
            o_status := v_existing.status;
            o_reason := v_existing.reason;
            o_fence := v_existing.fence;
            RETURN;
        END IF;
    END IF;

    -- The caller holds these rows' locks; reading them again sees the debits and credits that
    -- earlier transfers of the same batch made.
    FOR v_wallet IN
        SELECT w.id, w.currency, w.balance, w.last_fence FROM wallets w WHERE w.id IN (p_from, p_to)
    LOOP
        IF v_wallet.id = p_from THEN v_from := v_wallet; v_found_from := TRUE; END IF;
        IF v_wallet.id = p_to THEN v_to := v_wallet; v_found_to := TRUE; END IF;
    END LOOP;

    -- The fence guards the source wallet only. The destination's last_fence comes from another
    -- wallet's counter and is never compared with our token. An equal token passes: one
    -- holder may decide several transfers of its wallet under one lease.
    IF v_found_from AND p_check_fence AND v_from.last_fence > p_fence THEN
        o_outcome := 'stale_fence';
        o_wallet_fence := v_from.last_fence;
        RETURN;
    END IF;

    IF p_from = p_to THEN
        v_reason := 'same_wallet';
    ELSIF NOT v_found_from OR NOT v_found_to THEN
        v_reason := 'unknown_wallet';
    ELSIF v_from.currency <> v_to.currency
          OR (p_currency IS NOT NULL AND p_currency <> v_from.currency) THEN
        v_reason := 'currency_mismatch';
    ELSIF v_from.balance < p_amount THEN
        v_reason := 'insufficient_funds';
    END IF;

    IF v_found_from THEN
        -- Every decision taken under our token raises the source's fence, refusals included,
        -- so fences on a wallet never go down in commit order.
        UPDATE wallets
           SET last_fence = GREATEST(last_fence, p_fence),
               balance = balance - CASE WHEN v_reason IS NULL THEN p_amount ELSE 0 END,
               updated_at = CURRENT_TIMESTAMP
         WHERE id = p_from;
    END IF;

    IF v_reason IS NULL THEN
        UPDATE wallets SET balance = balance + p_amount, updated_at = CURRENT_TIMESTAMP
         WHERE id = p_to;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> 1 THEN
            -- Unreachable while the row is locked; a credit that misses must never let the
            -- debit commit alone.
            RAISE EXCEPTION 'transfer_decide: credit of % touched % rows', p_to, v_rows
                USING ERRCODE = 'XX000';
        END IF;
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence) VALUES
            (p_operation_id, p_from, 'debit', -p_amount, p_fence),
            (p_operation_id, p_to, 'credit', p_amount, p_fence);
    END IF;

    INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                           status, reason, fence)
    VALUES (p_operation_id, p_request_hash, p_from, p_to, p_amount, p_currency,
            CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END, v_reason, p_fence)
    ON CONFLICT (operation_id) DO NOTHING;
    -- ON CONFLICT only matters with p_check_idempotency = FALSE (the negative control): the
    -- money has moved again and the record keeps the first outcome, which is the bug the
    -- chaos checker must see.

    o_outcome := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
    o_status := o_outcome;
    o_reason := v_reason;
    o_fence := p_fence;
    o_wallet_fence := CASE WHEN v_found_from THEN GREATEST(v_from.last_fence, p_fence) ELSE NULL END;
END;
$$;

REVOKE EXECUTE ON FUNCTION "transfer_decide"(TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- One transfer: same signature and answers as before, now over transfer_decide().
CREATE OR REPLACE FUNCTION "apply_transfer"(
    p_operation_id      TEXT,
    p_request_hash      TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_currency          TEXT,
    p_fence             BIGINT,
    p_check_idempotency BOOLEAN DEFAULT TRUE,
    p_check_fence       BOOLEAN DEFAULT TRUE
) RETURNS TABLE (
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_amount IS NULL OR p_amount <= 0 OR p_fence IS NULL OR p_fence < 1 THEN
        RAISE EXCEPTION 'apply_transfer: amount and fence must be positive'
            USING ERRCODE = '22023';
    END IF;
    -- Locks in the one global order every decision uses: the operation's advisory lock, then
    -- the wallet rows by id. Twins of one operation queue on the advisory lock instead of
    -- racing into a unique violation; A->B and B->A cannot deadlock.
    IF p_check_idempotency THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    END IF;
    PERFORM 1 FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE;

    RETURN QUERY SELECT d.o_outcome, d.o_status, d.o_reason, d.o_fence, d.o_wallet_fence
      FROM transfer_decide(p_operation_id, p_request_hash, p_from, p_to, p_amount, p_currency,
                           p_fence, p_check_idempotency, p_check_fence) d;
END;
$$;

-- Many transfers, one call, one commit: the body shared by apply_transfers() and the negative
-- controls' apply_transfers_unsafe(). The arrays are parallel, one element per transfer, decided
-- in array order (so twins give one decision and one duplicate, and two debits of one wallet
-- see each other). Returns one row per element, `ord` being its 1-based position. A rejection
-- or a stale fence answers that element only; any error fails the whole call, which is safe to
-- retry because every element is idempotent.
CREATE FUNCTION "transfers_decide_batch"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    -- Same bound as TRANSFER_BATCH_MAX's upper limit in src/config/config.ts.
    c_batch_max CONSTANT INTEGER := 1000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_key       BIGINT;
    v_i         INTEGER;
    v_d         RECORD;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'apply_transfers: between 1 and % transfers per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_request_hashes), -1) <> v_n OR coalesce(cardinality(p_froms), -1) <> v_n
       OR coalesce(cardinality(p_tos), -1) <> v_n OR coalesce(cardinality(p_amounts), -1) <> v_n
       OR coalesce(cardinality(p_currencies), -1) <> v_n OR coalesce(cardinality(p_fences), -1) <> v_n THEN
        RAISE EXCEPTION 'apply_transfers: the arrays must all have % elements', v_n
            USING ERRCODE = '22023';
    END IF;

    -- Every lock the batch needs, taken up front in one global order: the operations' advisory
    -- locks by key, then the wallet rows by id (the order apply_transfer uses too). Two batches
    -- that cross can then wait for each other but never deadlock.
    IF p_check_idempotency THEN
        FOR v_key IN
            SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(v_key);
        END LOOP;
    END IF;
    PERFORM 1 FROM wallets w WHERE w.id = ANY (p_froms || p_tos) ORDER BY w.id FOR UPDATE;

    FOR v_i IN 1 .. v_n LOOP
        SELECT * INTO v_d FROM transfer_decide(
            p_operation_ids[v_i], p_request_hashes[v_i], p_froms[v_i], p_tos[v_i], p_amounts[v_i],
            p_currencies[v_i], p_fences[v_i], p_check_idempotency, p_check_fence);
        ord := v_i;
        outcome := v_d.o_outcome;
        status := v_d.o_status;
        reason := v_d.o_reason;
        fence := v_d.o_fence;
        wallet_fence := v_d.o_wallet_fence;
        RETURN NEXT;
    END LOOP;
END;
$$;

REVOKE EXECUTE ON FUNCTION "transfers_decide_batch"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], BOOLEAN, BOOLEAN) FROM PUBLIC;

-- The worker's decision: every check on, always. SECURITY DEFINER with a fixed search_path, so
-- a role that may only EXECUTE this function moves money through it and nowhere else.
CREATE FUNCTION "apply_transfers"(
    p_operation_ids  TEXT[],
    p_request_hashes TEXT[],
    p_froms          TEXT[],
    p_tos            TEXT[],
    p_amounts        BIGINT[],
    p_currencies     TEXT[],
    p_fences         BIGINT[]
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
                                  p_currencies, p_fences, TRUE, TRUE) b;
$$;

REVOKE EXECUTE ON FUNCTION "apply_transfers"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[]) FROM PUBLIC;

-- The chaos harness's negative controls only: the same decision with the idempotency record
-- and/or the fence switched off. Runs with the caller's rights and is executable by the owner
-- alone, so a worker role can never switch a check off.
CREATE FUNCTION "apply_transfers_unsafe"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN
) RETURNS TABLE (
    ord          INTEGER,
    outcome      TEXT,
    status       TEXT,
    reason       TEXT,
    fence        BIGINT,
    wallet_fence BIGINT
)
LANGUAGE sql
VOLATILE
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
                                  p_currencies, p_fences, p_check_idempotency, p_check_fence) b;
$$;

REVOKE EXECUTE ON FUNCTION "apply_transfers_unsafe"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], BOOLEAN, BOOLEAN) FROM PUBLIC;
