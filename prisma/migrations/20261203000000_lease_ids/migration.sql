-- One token, one lease (issue 18; DESIGN.md, "Batched decisions"). A token identifies one
-- lease only while Redis never loses an increment: after a lossy failover, or a counter restart
-- repaired by advance-fence, two leases can carry the same token. The decision used to let an
-- equal token pass (the riders of one lease share its token), so the older holder was not
-- refused. Now every decision carries its lease's id, the wallet keeps the id of the lease that
-- holds its fence (`last_lease` beside `last_fence`), and an equal token passes only for that
-- lease. The entries and the record of a transfer keep the lease it was decided under, so a
-- checker can prove that no token was ever used by two leases.
--
-- The decision functions change signature: the old ones are dropped (nothing calls them any
-- more) and every role that could execute the old apply_transfers() may execute the new one,
-- so a worker role keeps exactly the one function it needs.

-- Nullable, no default: instant on a large table. Rows written before this migration, and rows
-- the chaos harness's naive apply writes itself, carry no lease.
ALTER TABLE "wallets" ADD COLUMN "last_lease" UUID;
ALTER TABLE "transfers" ADD COLUMN "lease" UUID;
ALTER TABLE "ledger_entries" ADD COLUMN "lease" UUID;

-- The decision for a batch, as in the batched-decisions migration, with one lease id per
-- transfer (p_lease_ids, parallel to p_fences) and a third switch for the negative controls
-- (p_check_lease: FALSE lets an equal token of another lease pass, the rule before this
-- migration). Returns one row per element, `ord` being its 1-based position:
--   outcome       'applied' | 'rejected' | 'duplicate' | 'conflict' | 'stale_fence'
--   status        the stored terminal status ('applied' | 'rejected'); NULL for stale_fence
--   reason        the stored rejection reason, when status = 'rejected'
--   fence         the fence stored with the operation (NULL for stale_fence)
--   wallet_fence  the source wallet's last_fence after the decision (what a stale holder lost
--                 to: above its token, or equal to it when another lease holds that token)
-- A rejection or a stale fence answers that element only; an error fails the whole call, which
-- is safe to retry because every element is idempotent. Callable only through the functions
-- below.
CREATE FUNCTION "transfers_decide_batch"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_lease_ids         UUID[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN,
    p_check_lease       BOOLEAN
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
-- Every statement here reaches wallets and transfers by primary key, a few dozen rows at a
-- time. On a small or freshly loaded table the planner prefers a sequential scan that tests
-- each row against the whole id array (10,000 wallets x 128 ids) and a hash join for the
-- write-back, which cost half the call (EXPLAIN in `npm run bench:explain`). Index lookups are
-- right at any table size, so the function asks for them.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    -- Same bound as TRANSFER_BATCH_MAX's upper limit in src/config/config.ts.
    c_batch_max CONSTANT INTEGER := 1000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_key       BIGINT;
    v_i         INTEGER;
    -- The locked wallets, by id: state as the batch's decisions leave it.
    w_id        TEXT[];
    w_currency  TEXT[];
    w_balance   BIGINT[];
    w_fence     BIGINT[];
    w_lease     UUID[];
    w_touched   BOOLEAN[];
    -- Idempotency records: those found, then those decided here (so a later twin sees them).
    r_op        TEXT[];
    r_hash      TEXT[];
    r_status    TEXT[];
    r_reason    TEXT[];
    r_fence     BIGINT[];
    -- The batch element each record was decided from; NULL for a record found in the table.
    r_element   INTEGER[];
    r_count     INTEGER;
    -- Ledger entries to write, in decision order (filled by index: no array copied per entry).
    l_op        TEXT[] := '{}';
    l_wallet    TEXT[] := '{}';
    l_kind      TEXT[] := '{}';
    l_amount    BIGINT[] := '{}';
    l_fence     BIGINT[] := '{}';
    l_lease     UUID[] := '{}';
    l_count     INTEGER := 0;
    -- One transfer.
    v_op        TEXT;
    v_from      TEXT;
    v_to        TEXT;
    v_amount    BIGINT;
    v_currency  TEXT;
    v_fence     BIGINT;
    v_lease     UUID;
    v_fi        INTEGER;
    v_ti        INTEGER;
    v_k         INTEGER;
    v_reason    TEXT;
    v_rows      INTEGER;
    v_touched   INTEGER;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'apply_transfers: between 1 and % transfers per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_request_hashes), -1) <> v_n OR coalesce(cardinality(p_froms), -1) <> v_n
       OR coalesce(cardinality(p_tos), -1) <> v_n OR coalesce(cardinality(p_amounts), -1) <> v_n
       OR coalesce(cardinality(p_currencies), -1) <> v_n OR coalesce(cardinality(p_fences), -1) <> v_n
       OR coalesce(cardinality(p_lease_ids), -1) <> v_n THEN
        RAISE EXCEPTION 'apply_transfers: the arrays must all have % elements', v_n
            USING ERRCODE = '22023';
    END IF;
    IF array_position(p_operation_ids, NULL) IS NOT NULL OR array_position(p_request_hashes, NULL) IS NOT NULL
       OR array_position(p_froms, NULL) IS NOT NULL OR array_position(p_tos, NULL) IS NOT NULL
       OR array_position(p_amounts, NULL) IS NOT NULL OR array_position(p_fences, NULL) IS NOT NULL
       OR array_position(p_lease_ids, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM unnest(p_amounts) a WHERE a <= 0)
       OR EXISTS (SELECT 1 FROM unnest(p_fences) f WHERE f < 1) THEN
        RAISE EXCEPTION 'apply_transfers: ids, hashes, wallets and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;

    -- Every lock the batch needs, taken up front in one global order: the operations' advisory
    -- locks by key (twins across batches queue there instead of racing into a unique
    -- violation), then the wallet rows by id. Two batches that cross can wait for each other
    -- but never deadlock.
    IF p_check_idempotency THEN
        FOR v_key IN
            SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(v_key);
        END LOOP;
    END IF;
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO w_id, w_currency, w_balance, w_fence, w_lease, w_touched
      FROM (SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (p_froms || p_tos) ORDER BY w.id FOR UPDATE) l;

    IF p_check_idempotency THEN
        SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.request_hash::TEXT), '{}'),
               coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.reason), '{}'),
               coalesce(array_agg(t.fence), '{}'), coalesce(array_agg(NULL::INTEGER), '{}')
          INTO r_op, r_hash, r_status, r_reason, r_fence, r_element
          FROM transfers t WHERE t.operation_id = ANY (p_operation_ids);
    ELSE
        r_op := '{}'; r_hash := '{}'; r_status := '{}'; r_reason := '{}'; r_fence := '{}'; r_element := '{}';
    END IF;
    r_count := cardinality(r_op);

    FOR v_i IN 1 .. v_n LOOP
        v_op := p_operation_ids[v_i];
        v_from := p_froms[v_i];
        v_to := p_tos[v_i];
        v_amount := p_amounts[v_i];
        v_currency := p_currencies[v_i];
        v_fence := p_fences[v_i];
        v_lease := p_lease_ids[v_i];
        ord := v_i;

        IF p_check_idempotency THEN
            v_k := array_position(r_op, v_op);
            IF v_k IS NOT NULL THEN
                outcome := CASE WHEN r_hash[v_k] = p_request_hashes[v_i] THEN 'duplicate' ELSE 'conflict' END;
                status := r_status[v_k];
                reason := r_reason[v_k];
                fence := r_fence[v_k];
                wallet_fence := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;

        v_fi := array_position(w_id, v_from);
        v_ti := array_position(w_id, v_to);

        -- The fence guards the source wallet only. The destination's last_fence comes from
        -- another wallet's counter and is never compared with our token. An equal token
        -- passes only for the lease that set it (the riders of one lease share its token):
        -- after Redis lost increments another lease can carry the same number, and it is as
        -- stale as a lower one. The worker then raises the counter to the wallet's fence, so
        -- its next token is above it.
        IF v_fi IS NOT NULL AND p_check_fence
           AND (w_fence[v_fi] > v_fence
                OR (p_check_lease AND w_fence[v_fi] = v_fence AND w_lease[v_fi] IS DISTINCT FROM v_lease)) THEN
            outcome := 'stale_fence';
            status := NULL;
            reason := NULL;
            fence := NULL;
            wallet_fence := w_fence[v_fi];
            RETURN NEXT;
            CONTINUE;
        END IF;

        v_reason := NULL;
        IF v_from = v_to THEN
            v_reason := 'same_wallet';
        ELSIF v_fi IS NULL OR v_ti IS NULL THEN
            v_reason := 'unknown_wallet';
        ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
            v_reason := 'currency_mismatch';
        ELSIF w_balance[v_fi] < v_amount THEN
            v_reason := 'insufficient_funds';
        END IF;

        IF v_fi IS NOT NULL THEN
            -- Every decision taken under our token raises the source's fence, refusals
            -- included, so fences on a wallet never go down in commit order; the lease that
            -- holds the fence is recorded with it.
            IF v_fence >= w_fence[v_fi] THEN
                w_fence[v_fi] := v_fence;
                w_lease[v_fi] := v_lease;
            END IF;
            w_touched[v_fi] := TRUE;
        END IF;
        IF v_reason IS NULL THEN
            w_balance[v_fi] := w_balance[v_fi] - v_amount;
            w_balance[v_ti] := w_balance[v_ti] + v_amount;
            w_touched[v_ti] := TRUE;
            l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
            l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := v_to;
            l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
            l_amount[l_count + 1] := -v_amount; l_amount[l_count + 2] := v_amount;
            l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
            l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
            l_count := l_count + 2;
        END IF;

        -- The record; kept here too, so a twin later in this batch answers from it.
        r_count := r_count + 1;
        r_op[r_count] := v_op;
        r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_reason[r_count] := v_reason;
        r_fence[r_count] := v_fence;
        r_element[r_count] := v_i;

        outcome := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        status := outcome;
        reason := v_reason;
        fence := v_fence;
        wallet_fence := CASE WHEN v_fi IS NOT NULL THEN w_fence[v_fi] ELSE NULL END;
        RETURN NEXT;
    END LOOP;

    -- Write what the decisions did, once per table. CHECK (balance >= 0) stays the last line of
    -- defence; a wallet that moved must be updated, or nothing commits.
    SELECT count(*) INTO v_touched FROM unnest(w_touched) t WHERE t;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, last_fence = u.last_fence, last_lease = u.last_lease,
               updated_at = CURRENT_TIMESTAMP
          FROM unnest(w_id, w_balance, w_fence, w_lease, w_touched) AS u(id, balance, last_fence, last_lease, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            -- Unreachable while the rows are locked; a credit that misses must never let the
            -- debit commit alone.
            RAISE EXCEPTION 'apply_transfers: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;

    IF l_count > 0 THEN
        -- In decision order, so ledger ids follow commit order within the batch.
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT e.op, e.wallet, e.kind, e.amount, e.fence, e.lease
          FROM unnest(l_op, l_wallet, l_kind, l_amount, l_fence, l_lease) WITH ORDINALITY
               AS e(op, wallet, kind, amount, fence, lease, n)
         ORDER BY e.n;
    END IF;

    INSERT INTO transfers (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                           status, reason, fence, lease)
    SELECT r.op, r.hash, p_froms[r.element], p_tos[r.element], p_amounts[r.element], p_currencies[r.element],
           r.status, r.reason, r.fence, p_lease_ids[r.element]
      FROM unnest(r_op, r_hash, r_status, r_reason, r_fence, r_element) AS r(op, hash, status, reason, fence, element)
     WHERE r.element IS NOT NULL
    ON CONFLICT (operation_id) DO NOTHING;
    -- ON CONFLICT only matters with p_check_idempotency = FALSE (the negative control): the
    -- money has moved again and the record keeps the first outcome, which is the bug the chaos
    -- checker must see.
END;
$$;

REVOKE EXECUTE ON FUNCTION "transfers_decide_batch"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], UUID[], BOOLEAN, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- The worker's decision: every check on, always. SECURITY DEFINER with its search_path fixed to
-- the schema it lives in (taken when the migration runs, as in the least-privilege migration).
CREATE FUNCTION "apply_transfers"(
    p_operation_ids  TEXT[],
    p_request_hashes TEXT[],
    p_froms          TEXT[],
    p_tos            TEXT[],
    p_amounts        BIGINT[],
    p_currencies     TEXT[],
    p_fences         BIGINT[],
    p_lease_ids      UUID[]
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
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
                                  p_currencies, p_fences, p_lease_ids, TRUE, TRUE, TRUE) b;
$$;

REVOKE EXECUTE ON FUNCTION "apply_transfers"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], UUID[]) FROM PUBLIC;

DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION %I.apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[]) '
        'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp',
        current_schema(), current_schema());
END
$$;

-- Whoever was granted the old decision (the worker roles `npm run db:worker-role` made) may call
-- the new one, so workers of this release need no new grant; the old one goes below.
DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format(
            'GRANT EXECUTE ON FUNCTION apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[]) TO %s',
            v_grantee);
    END LOOP;
END
$$;

-- The chaos harness's negative controls only: the same decision with the idempotency record,
-- the fence and/or the lease check switched off. Runs with the caller's rights and is
-- executable by the owner alone, so a worker role can never switch a check off.
CREATE FUNCTION "apply_transfers_unsafe"(
    p_operation_ids     TEXT[],
    p_request_hashes    TEXT[],
    p_froms             TEXT[],
    p_tos               TEXT[],
    p_amounts           BIGINT[],
    p_currencies        TEXT[],
    p_fences            BIGINT[],
    p_lease_ids         UUID[],
    p_check_idempotency BOOLEAN,
    p_check_fence       BOOLEAN,
    p_check_lease       BOOLEAN
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
                                  p_currencies, p_fences, p_lease_ids, p_check_idempotency,
                                  p_check_fence, p_check_lease) b;
$$;

REVOKE EXECUTE ON FUNCTION "apply_transfers_unsafe"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], UUID[], BOOLEAN, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- One transfer (the bench's fixtures and tests call it), over the batch body with one element;
-- owner only, like every function with switches.
CREATE FUNCTION "apply_transfer"(
    p_operation_id      TEXT,
    p_request_hash      TEXT,
    p_from              TEXT,
    p_to                TEXT,
    p_amount            BIGINT,
    p_currency          TEXT,
    p_fence             BIGINT,
    p_lease_id          UUID,
    p_check_idempotency BOOLEAN DEFAULT TRUE,
    p_check_fence       BOOLEAN DEFAULT TRUE,
    p_check_lease       BOOLEAN DEFAULT TRUE
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
    RETURN QUERY SELECT b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(ARRAY[p_operation_id], ARRAY[p_request_hash], ARRAY[p_from], ARRAY[p_to],
                                  ARRAY[p_amount], ARRAY[p_currency], ARRAY[p_fence], ARRAY[p_lease_id],
                                  p_check_idempotency, p_check_fence, p_check_lease) b;
END;
$$;

REVOKE EXECUTE ON FUNCTION "apply_transfer"(TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT, UUID, BOOLEAN, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- The decision without lease ids is gone: a caller that cannot name its lease must not decide.
DROP FUNCTION "apply_transfers"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[]);
DROP FUNCTION "apply_transfers_unsafe"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], BOOLEAN, BOOLEAN);
DROP FUNCTION "apply_transfer"(TEXT, TEXT, TEXT, TEXT, BIGINT, TEXT, BIGINT, BOOLEAN, BOOLEAN);
DROP FUNCTION "transfers_decide_batch"(TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], BIGINT[], BOOLEAN, BOOLEAN);
