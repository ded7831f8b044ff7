-- Transactional intake and the durable outcome feed (issue 19; DESIGN.md, "Intake and outcome
-- feed"). Until now a transfer existed only once it was in Redis: a lossy failover of the
-- queue's master could drop an acknowledged add, and a producer could commit its own change
-- and crash before enqueueing. Now a producer may request a transfer inside its own
-- transaction (request_transfer(), like Graphile Worker's add_job()); a relay sends the
-- requests to the queue and sends again whatever is still undecided after a while; the
-- decision marks the request decided and appends its outcome event in the same commit as the
-- ledger entries; and the outcomes are read back, by position, from a feed that never skips
-- an event.

-- Requested transfers. A row is open until its decision commits (decided_at); a relay sends
-- open rows to the queue (sent_at, send_count) and again when they stay open too long.
-- given_up_at: the worker ran out of attempts; the row stays open and is sent again only by
-- `npm run redrive`.
CREATE TABLE "transfer_requests" (
    "operation_id"   TEXT        NOT NULL,
    "request_hash"   CHAR(64)    NOT NULL,
    "from_wallet"    TEXT        NOT NULL,
    "to_wallet"      TEXT        NOT NULL,
    "amount"         BIGINT      NOT NULL,
    "currency"       CHAR(3),
    "requested_at"   TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "sent_at"        TIMESTAMPTZ(6),
    "send_count"     INTEGER     NOT NULL DEFAULT 0,
    -- Sends after the first that found no job of the operation in the queue: adds the queue lost.
    "lost_count"     INTEGER     NOT NULL DEFAULT 0,
    "decided_at"     TIMESTAMPTZ(6),
    "given_up_at"    TIMESTAMPTZ(6),
    "give_up_count"  INTEGER     NOT NULL DEFAULT 0,
    "give_up_reason" TEXT,
    CONSTRAINT "transfer_requests_pkey" PRIMARY KEY ("operation_id"),
    CONSTRAINT "transfer_requests_amount_positive" CHECK ("amount" > 0),
    CONSTRAINT "transfer_requests_counts_non_negative" CHECK (
        "send_count" >= 0 AND "lost_count" >= 0 AND "give_up_count" >= 0)
);

-- What a relay looks for: open requests, oldest send first (never sent first of all).
CREATE INDEX "transfer_requests_open_idx" ON "transfer_requests" ("sent_at" NULLS FIRST)
    WHERE "decided_at" IS NULL;

-- Outcome events decided but not yet given a feed position. A decision appends here (one row
-- per decided operation, in its own commit); the feed's sequencer moves committed rows into
-- outcome_events under one lock, so positions are handed out in the order the events became
-- visible, never in the order their transactions began.
CREATE TABLE "outcome_pending" (
    "id"           BIGSERIAL   NOT NULL,
    "operation_id" TEXT        NOT NULL,
    "kind"         TEXT        NOT NULL,
    "reason"       TEXT,
    "from_wallet"  TEXT        NOT NULL,
    "to_wallet"    TEXT        NOT NULL,
    "amount"       BIGINT      NOT NULL,
    "currency"     CHAR(3),
    "decided_at"   TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT "outcome_pending_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "outcome_pending_kind_known" CHECK ("kind" IN ('applied', 'rejected', 'given_up'))
);

-- The feed: positions 1, 2, 3, … with no gap, each given once, in commit order. Kept until
-- `npm run outcomes -- --prune-before N` deletes a prefix (docs/operating/runbook.md).
CREATE TABLE "outcome_events" (
    "position"     BIGINT      NOT NULL,
    "operation_id" TEXT        NOT NULL,
    "kind"         TEXT        NOT NULL,
    "reason"       TEXT,
    "from_wallet"  TEXT        NOT NULL,
    "to_wallet"    TEXT        NOT NULL,
    "amount"       BIGINT      NOT NULL,
    "currency"     CHAR(3),
    "decided_at"   TIMESTAMPTZ(6) NOT NULL,
    "sequenced_at" TIMESTAMPTZ(6) NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT "outcome_events_pkey" PRIMARY KEY ("position"),
    CONSTRAINT "outcome_events_position_positive" CHECK ("position" > 0),
    CONSTRAINT "outcome_events_kind_known" CHECK ("kind" IN ('applied', 'rejected', 'given_up'))
);
CREATE INDEX "outcome_events_operation_id_idx" ON "outcome_events" ("operation_id");

-- Named cursors of the feed's own consumers (the relay's publisher to the outcomes queue).
CREATE TABLE "outcome_cursors" (
    "name"       TEXT        NOT NULL,
    "position"   BIGINT      NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "outcome_cursors_pkey" PRIMARY KEY ("name")
);

-- The decision, as in the lease-ids migration, now also marking the intake's request decided and
-- appending the outcome event, in the same statement as the records and the ledger entries.
CREATE OR REPLACE FUNCTION "transfers_decide_batch"(
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

    -- The records, and in the same statement what they decide: the intake's request (when the
    -- operation came through it) is marked decided, and one outcome event per record joins the
    -- feed's pending events. Only records actually inserted count, so an operation has exactly
    -- one decision event whatever the switches.
    WITH recorded AS (
        INSERT INTO transfers AS t (operation_id, request_hash, from_wallet, to_wallet, amount, currency,
                                    status, reason, fence, lease)
        SELECT r.op, r.hash, p_froms[r.element], p_tos[r.element], p_amounts[r.element], p_currencies[r.element],
               r.status, r.reason, r.fence, p_lease_ids[r.element]
          FROM unnest(r_op, r_hash, r_status, r_reason, r_fence, r_element) AS r(op, hash, status, reason, fence, element)
         WHERE r.element IS NOT NULL
         ORDER BY r.element
        ON CONFLICT (operation_id) DO NOTHING
        RETURNING t.operation_id, t.status, t.reason, t.from_wallet, t.to_wallet, t.amount, t.currency
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
    SELECT d.operation_id, d.status, d.reason, d.from_wallet, d.to_wallet, d.amount, d.currency
      FROM recorded d;
    -- ON CONFLICT only matters with p_check_idempotency = FALSE (the negative control): the
    -- money has moved again and the record keeps the first outcome, which is the bug the chaos
    -- checker must see.
END;
$$;

-- A producer's request, inside the producer's own transaction. The checks are the wire
-- format's (src/ledger/transfer-request.ts; a test compares them), the hash is requestHash()'s.
-- Returns 'requested' (a new row), 'duplicate' (the same operation with the same body was
-- requested or decided before: nothing changes). The same operation with another body raises
-- SQLSTATE 23505 with a message starting 'conflict:', at once, so the producer's transaction
-- fails before it commits something the worker would refuse.
CREATE FUNCTION "request_transfer"(
    p_operation_id TEXT,
    p_from         TEXT,
    p_to           TEXT,
    p_amount       BIGINT,
    p_currency     TEXT DEFAULT NULL
) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    c_id_pattern       CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_currency_pattern CONSTANT TEXT := '^[A-Z]{3}$';
    v_hash     TEXT;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
BEGIN
    IF p_operation_id IS NULL OR p_operation_id !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: operationId must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from IS NULL OR p_from !~ c_id_pattern OR p_to IS NULL OR p_to !~ c_id_pattern THEN
        RAISE EXCEPTION 'request_transfer: from and to must be 1-128 characters of [A-Za-z0-9._:-]' USING ERRCODE = '22023';
    END IF;
    IF p_from = p_to THEN
        RAISE EXCEPTION 'request_transfer: from and to are the same wallet' USING ERRCODE = '22023';
    END IF;
    IF p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'request_transfer: amount must be positive' USING ERRCODE = '22023';
    END IF;
    IF p_currency IS NOT NULL AND p_currency !~ c_currency_pattern THEN
        RAISE EXCEPTION 'request_transfer: currency must be three capital letters, like EUR' USING ERRCODE = '22023';
    END IF;
    v_hash := encode(sha256(convert_to(
        concat_ws(E'\n', 'v1', p_from, p_to, p_amount::TEXT, coalesce(p_currency, '')), 'UTF8')), 'hex');

    -- Decided already (through the queue straight, say): the request is recorded as decided.
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = p_operation_id;

    INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount, currency, decided_at)
    VALUES (p_operation_id, v_hash, p_from, p_to, p_amount, p_currency, v_decided)
    ON CONFLICT (operation_id) DO NOTHING;
    IF FOUND THEN
        IF v_existing IS NOT NULL AND v_existing <> v_hash THEN
            RAISE EXCEPTION 'conflict: operation % was decided with another body', p_operation_id
                USING ERRCODE = '23505';
        END IF;
        RETURN CASE WHEN v_existing IS NULL THEN 'requested' ELSE 'duplicate' END;
    END IF;
    SELECT q.request_hash::TEXT INTO v_existing FROM transfer_requests q WHERE q.operation_id = p_operation_id;
    IF v_existing <> v_hash THEN
        RAISE EXCEPTION 'conflict: operation % was requested with another body', p_operation_id
            USING ERRCODE = '23505';
    END IF;
    RETURN 'duplicate';
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_transfer"(TEXT, TEXT, TEXT, BIGINT, TEXT) FROM PUBLIC;

-- The worker, when a transfer's job runs out of attempts: the request (if any) stays open,
-- marked given up with the last reason, and the feed gets one 'given_up' event. Nothing when
-- the operation is decided (a late failure of a twin job) or its request is given up already
-- (until a redrive opens it again). Returns whether an event was added.
CREATE FUNCTION "record_transfer_given_up"(
    p_operation_id TEXT,
    p_from         TEXT,
    p_to           TEXT,
    p_amount       BIGINT,
    p_currency     TEXT,
    p_reason       TEXT
) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_operation_id IS NULL OR p_from IS NULL OR p_to IS NULL OR p_amount IS NULL OR p_amount <= 0 THEN
        RAISE EXCEPTION 'record_transfer_given_up: operation, wallets and a positive amount must be given'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    UPDATE transfer_requests
       SET given_up_at = clock_timestamp(), give_up_count = give_up_count + 1, give_up_reason = left(p_reason, 500)
     WHERE operation_id = p_operation_id AND decided_at IS NULL AND given_up_at IS NULL;
    -- Given up already (the worker and a relay both found the failed job): one event per give-up.
    IF NOT FOUND AND EXISTS (SELECT 1 FROM transfer_requests q WHERE q.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    INSERT INTO outcome_pending (operation_id, kind, reason, from_wallet, to_wallet, amount, currency)
    VALUES (p_operation_id, 'given_up', left(p_reason, 500), p_from, p_to, p_amount, p_currency);
    RETURN TRUE;
END;
$$;
REVOKE EXECUTE ON FUNCTION "record_transfer_given_up"(TEXT, TEXT, TEXT, BIGINT, TEXT, TEXT) FROM PUBLIC;

-- The feed's sequencer: moves committed pending events into the feed, positions continuing from
-- the last one, in the order of their pending ids. One sequencer at a time (a transaction-level
-- advisory lock, held until its positions commit), so a position is only ever handed out above
-- every position already committed, and a reader that remembers the last position it saw
-- never skips one. An event whose transaction is still open is invisible here and gets a later
-- position once it commits. Runs only in READ COMMITTED (each statement sees what committed
-- before it); elsewhere, or when another sequencer holds the lock, it does nothing.
-- Returns how many events it moved.
CREATE FUNCTION "outcome_feed_sequence"(p_limit INTEGER DEFAULT 10000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_moved INTEGER;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed'
       OR NOT pg_try_advisory_xact_lock(hashtextextended('outcome_feed:sequencer', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM outcome_pending p
         WHERE p.id IN (SELECT id FROM outcome_pending ORDER BY id LIMIT greatest(1, least(p_limit, 100000)))
        RETURNING p.*
    ), base AS (
        SELECT coalesce(max(e.position), 0) AS last FROM outcome_events e
    )
    INSERT INTO outcome_events (position, operation_id, kind, reason, from_wallet, to_wallet, amount, currency, decided_at)
    SELECT b.last + row_number() OVER (ORDER BY m.id), m.operation_id, m.kind, m.reason, m.from_wallet, m.to_wallet,
           m.amount, m.currency, m.decided_at
      FROM moved m CROSS JOIN base b;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;
REVOKE EXECUTE ON FUNCTION "outcome_feed_sequence"(INTEGER) FROM PUBLIC;

-- Reading the feed: the events after a position, oldest first, at most p_limit (1-10,000).
-- Sequences what has committed first, so a reader alone keeps the feed moving.
CREATE FUNCTION "outcome_events_after"(p_after BIGINT, p_limit INTEGER DEFAULT 1000)
RETURNS TABLE (
    "position"     BIGINT,
    operation_id   TEXT,
    kind           TEXT,
    reason         TEXT,
    from_wallet    TEXT,
    to_wallet      TEXT,
    amount         BIGINT,
    currency       TEXT,
    decided_at     TIMESTAMPTZ
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    IF p_after IS NULL OR p_after < 0 OR p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'outcome_events_after: position must be 0 or more and the limit from 1 to 10000'
            USING ERRCODE = '22023';
    END IF;
    PERFORM outcome_feed_sequence(10000);
    RETURN QUERY
        SELECT e.position, e.operation_id, e.kind, e.reason, e.from_wallet, e.to_wallet, e.amount,
               e.currency::TEXT, e.decided_at
          FROM outcome_events e
         WHERE e.position > p_after
         ORDER BY e.position
         LIMIT p_limit;
END;
$$;
REVOKE EXECUTE ON FUNCTION "outcome_events_after"(BIGINT, INTEGER) FROM PUBLIC;

-- The functions other roles call run as their owner with the schema fixed, like the decision
-- (the least-privilege migration): a producer role may request, a worker record a give-up, a
-- read role read the feed, and none of them touch a table directly.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION %I.request_transfer(text, text, text, bigint, text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.record_transfer_given_up(text, text, text, bigint, text, text) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.outcome_events_after(bigint, integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
END
$$;

-- Worker roles of earlier releases (those that may execute the decision) may record a give-up.
DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION record_transfer_given_up(text, text, text, bigint, text, text) TO %s',
                       v_grantee);
    END LOOP;
END
$$;
