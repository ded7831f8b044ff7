-- Payments, not just transfers: holds (authorize, then capture, void or expiry), refunds tied to
-- their original, and split payments, each one operation with its own id and the same
-- idempotency contract as a transfer.
--
-- Where held money sits: in a holding wallet per wallet, `$held:<wallet>` (a wallets row of the
-- same currency, made by the first hold of that wallet; `$` is outside the wire format's id
-- alphabet, so no producer can name one). A hold moves its amount from the wallet to its
-- holding wallet, with a debit and a credit like any movement; a capture, a void or an expiry
-- moves it out again. So a wallet's `balance` is its available balance, the CHECK (balance >= 0)
-- that guards transfers guards holds too, and the transfer decision (apply_transfers()) is not
-- touched at all: a transfer can never spend held money because held money is not in the wallet.
--
-- One decision per operation, in one batched function, payments_decide_batch(), with every rule
-- in SQL: the hold's state, the capture's bound, the refund's bound, the split's all-or-nothing.
-- Its locks are taken in the order every other decision takes them (operations' advisory locks,
-- then wallet rows by id; a hold is read under its source's row lock, which every change of a
-- hold takes), so it can wait for a transfer batch or the expiry sweep but never deadlock with
-- them.
--
-- Expiry: every worker calls holds_expire() every HOLD_SWEEP_INTERVAL_MS; a capture or void that
-- finds its hold past expires_at refuses with hold_expired and releases it itself when no sweep
-- has yet. The hold row's state, changed under its row lock, is what makes the release happen
-- once and makes a capture and an expiry racing each other have one winner.

-- The idempotency record of every operation, of every kind.
ALTER TABLE "transfers" ADD COLUMN "kind" TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE "transfers" ADD COLUMN "original_id" TEXT;
ALTER TABLE "transfers" ALTER COLUMN "to_wallet" DROP NOT NULL;
ALTER TABLE "transfers" ALTER COLUMN "amount" DROP NOT NULL;
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_kind_known"
    CHECK ("kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split'));
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_transfer_complete"
    CHECK ("kind" <> 'transfer' OR ("to_wallet" IS NOT NULL AND "amount" IS NOT NULL));
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_original_by_kind"
    CHECK (("kind" IN ('capture', 'void', 'refund')) = ("original_id" IS NOT NULL));
ALTER TABLE "transfers" DROP CONSTRAINT "transfers_reason_matches_status";
ALTER TABLE "transfers" ADD CONSTRAINT "transfers_reason_matches_status" CHECK (
    ("status" = 'applied' AND "reason" IS NULL) OR
    ("status" = 'rejected' AND "reason" IN
        ('insufficient_funds', 'unknown_wallet', 'currency_mismatch', 'same_wallet', 'invalid_request',
         'hold_not_found', 'hold_rejected', 'hold_already_captured', 'hold_already_voided', 'hold_expired',
         'exceeds_hold_amount', 'expiry_out_of_range', 'original_not_found', 'original_not_refundable',
         'refund_exceeds_original', 'wallet_mismatch'))
);
-- Refunds of an original, summed under the payer's row lock. Partial: only a refund's record is
-- looked up by its original, so a transfer's, a capture's or a void's pays nothing for it.
CREATE INDEX "transfers_original_id_idx" ON "transfers" ("original_id") WHERE "kind" = 'refund';

-- One row per applied hold: what it reserves, until when, and how it ended. Ended exactly once:
-- captured + released is the held amount from then on.
CREATE TABLE "holds" (
    "hold_id"     TEXT        NOT NULL,
    "from_wallet" TEXT        NOT NULL,
    "to_wallet"   TEXT        NOT NULL,
    "amount"      BIGINT      NOT NULL,
    "currency"    CHAR(3),
    "expires_at"  TIMESTAMPTZ(6) NOT NULL,
    "state"       TEXT        NOT NULL DEFAULT 'active',
    "captured"    BIGINT      NOT NULL DEFAULT 0,
    "released"    BIGINT      NOT NULL DEFAULT 0,
    "ended_by"    TEXT,
    "ended_at"    TIMESTAMPTZ(6),
    "created_at"  TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "holds_pkey" PRIMARY KEY ("hold_id"),
    CONSTRAINT "holds_amount_positive" CHECK ("amount" > 0),
    CONSTRAINT "holds_state_known" CHECK ("state" IN ('active', 'captured', 'voided', 'expired')),
    CONSTRAINT "holds_ended_once" CHECK (
        ("state" = 'active' AND "captured" = 0 AND "released" = 0 AND "ended_at" IS NULL AND "ended_by" IS NULL) OR
        ("state" <> 'active' AND "captured" >= 0 AND "released" >= 0 AND "captured" + "released" = "amount"
         AND "ended_at" IS NOT NULL AND ("state" = 'expired') = ("ended_by" IS NULL)))
);
-- What the sweep scans: active holds by expiry.
CREATE INDEX "holds_active_expiry_idx" ON "holds" ("expires_at") WHERE "state" = 'active';

-- The legs of every applied split, in the order the message gave them.
CREATE TABLE "split_legs" (
    "operation_id" TEXT    NOT NULL,
    "leg"          INTEGER NOT NULL,
    "to_wallet"    TEXT    NOT NULL,
    "amount"       BIGINT  NOT NULL,
    CONSTRAINT "split_legs_pkey" PRIMARY KEY ("operation_id", "leg"),
    CONSTRAINT "split_legs_leg_range" CHECK ("leg" BETWEEN 1 AND 16),
    CONSTRAINT "split_legs_amount_positive" CHECK ("amount" > 0)
);

-- The intake keeps the body of a payment request as the wire format's JSON object; a transfer's
-- request keeps its columns, as before.
ALTER TABLE "transfer_requests" ADD COLUMN "kind" TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE "transfer_requests" ADD COLUMN "body" JSONB;
ALTER TABLE "transfer_requests" ALTER COLUMN "to_wallet" DROP NOT NULL;
ALTER TABLE "transfer_requests" ALTER COLUMN "amount" DROP NOT NULL;
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_kind_known"
    CHECK ("kind" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split'));
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_body_by_kind"
    CHECK (("kind" = 'transfer' AND "body" IS NULL AND "to_wallet" IS NOT NULL AND "amount" IS NOT NULL)
           OR ("kind" <> 'transfer' AND jsonb_typeof("body") = 'object'));

-- The feed says which operation an event is of, what it refers to, and what else it did.
ALTER TABLE "outcome_pending" ADD COLUMN "operation" TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE "outcome_pending" ADD COLUMN "original_id" TEXT;
ALTER TABLE "outcome_pending" ADD COLUMN "detail" JSONB;
ALTER TABLE "outcome_pending" ALTER COLUMN "to_wallet" DROP NOT NULL;
ALTER TABLE "outcome_pending" ALTER COLUMN "amount" DROP NOT NULL;
ALTER TABLE "outcome_pending" DROP CONSTRAINT "outcome_pending_kind_known";
ALTER TABLE "outcome_pending" ADD CONSTRAINT "outcome_pending_kind_known"
    CHECK ("kind" IN ('applied', 'rejected', 'given_up', 'conflict', 'expired'));
ALTER TABLE "outcome_events" ADD COLUMN "operation" TEXT NOT NULL DEFAULT 'transfer';
ALTER TABLE "outcome_events" ADD COLUMN "original_id" TEXT;
ALTER TABLE "outcome_events" ADD COLUMN "detail" JSONB;
ALTER TABLE "outcome_events" ALTER COLUMN "to_wallet" DROP NOT NULL;
ALTER TABLE "outcome_events" ALTER COLUMN "amount" DROP NOT NULL;
ALTER TABLE "outcome_events" DROP CONSTRAINT "outcome_events_kind_known";
ALTER TABLE "outcome_events" ADD CONSTRAINT "outcome_events_kind_known"
    CHECK ("kind" IN ('applied', 'rejected', 'given_up', 'conflict', 'expired'));
ALTER TABLE "outcome_events" ADD CONSTRAINT "outcome_events_operation_known"
    CHECK ("operation" IN ('transfer', 'hold', 'capture', 'void', 'refund', 'split'));

-- The decision of payments, batched like transfers_decide_batch(): every lock up front in the
-- global order, the decisions in the given order on the locked state held in arrays (so a hold
-- and its capture in one batch see each other), then each table written once. One row per
-- element: ord, outcome ('applied' | 'rejected' | 'duplicate' | 'conflict' | 'stale_fence'),
-- status and reason (stored), fence (stored or ours), wallet_fence (after, or the fence that
-- refused us). The switches are for the negative controls only (apply_payments_unsafe()).
CREATE FUNCTION "payments_decide_batch"(
    p_kinds              TEXT[],
    p_operation_ids      TEXT[],
    p_request_hashes     TEXT[],
    p_froms              TEXT[],
    p_tos                TEXT[],
    p_amounts            BIGINT[],
    p_currencies         TEXT[],
    p_refs               TEXT[],
    p_expires_in_ms      BIGINT[],
    p_expires_at         TIMESTAMPTZ[],
    p_legs               JSONB[],
    p_fences             BIGINT[],
    p_lease_ids          UUID[],
    p_hold_expiry_max_ms BIGINT,
    p_check_idempotency  BOOLEAN,
    p_check_fence        BOOLEAN,
    p_check_lease        BOOLEAN,
    p_check_hold_state   BOOLEAN,
    p_check_refund_bound BOOLEAN
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
-- As in transfers_decide_batch(): every statement reaches its rows by key.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
    c_batch_max CONSTANT INTEGER := 1000;
    v_n         INTEGER := coalesce(cardinality(p_operation_ids), 0);
    v_now       TIMESTAMPTZ := clock_timestamp();
    v_key       BIGINT;
    v_i         INTEGER;
    v_j         INTEGER;
    -- Locked wallets, by id, as the batch leaves them.
    w_id        TEXT[];
    w_currency  TEXT[];
    w_balance   BIGINT[];
    w_fence     BIGINT[];
    w_lease     UUID[];
    w_touched   BOOLEAN[];
    v_wallets   TEXT[];
    -- Holds: locked rows, then the ones placed here. h_new: insert; h_ended: update.
    h_id        TEXT[];
    h_from      TEXT[];
    h_to        TEXT[];
    h_amount    BIGINT[];
    h_currency  TEXT[];
    h_expires   TIMESTAMPTZ[];
    h_state     TEXT[];
    h_captured  BIGINT[];
    h_released  BIGINT[];
    h_ended_by  TEXT[];
    h_new       BOOLEAN[];
    h_ended     BOOLEAN[];
    h_count     INTEGER;
    -- Records: of this batch's operations found in the table, then those decided here.
    r_op        TEXT[];
    r_hash      TEXT[];
    r_status    TEXT[];
    r_reason    TEXT[];
    r_fence     BIGINT[];
    r_element   INTEGER[];
    r_count     INTEGER;
    -- Originals named by captures, voids and refunds: their records, then those decided here.
    o_id        TEXT[];
    o_kind      TEXT[];
    o_status    TEXT[];
    o_from      TEXT[];
    o_to        TEXT[];
    o_amount    BIGINT[];
    o_count     INTEGER;
    -- Legs of the splits refunds name, then of the splits applied here.
    s_op        TEXT[];
    s_to        TEXT[];
    s_amount    BIGINT[];
    s_leg       INTEGER[];
    s_new       BOOLEAN[];
    s_count     INTEGER;
    -- Refunded so far, per original and payer.
    f_key       TEXT[];
    f_sum       BIGINT[];
    f_count     INTEGER;
    -- What the decisions write.
    l_op        TEXT[] := '{}';
    l_wallet    TEXT[] := '{}';
    l_kind      TEXT[] := '{}';
    l_amount    BIGINT[] := '{}';
    l_fence     BIGINT[] := '{}';
    l_lease     UUID[] := '{}';
    l_count     INTEGER := 0;
    t_element   INTEGER[] := '{}';
    t_status    TEXT[] := '{}';
    t_reason    TEXT[] := '{}';
    t_to        TEXT[] := '{}';
    t_amount    BIGINT[] := '{}';
    t_original  TEXT[] := '{}';
    t_detail    JSONB[] := '{}';
    t_count     INTEGER := 0;
    x_hold      TEXT[] := '{}';
    x_count     INTEGER := 0;
    d_op        TEXT[] := '{}';
    d_hash      TEXT[] := '{}';
    d_count     INTEGER := 0;
    -- One operation.
    v_kind      TEXT;
    v_op        TEXT;
    v_from      TEXT;
    v_to        TEXT;
    v_amount    BIGINT;
    v_currency  TEXT;
    v_ref       TEXT;
    v_fence     BIGINT;
    v_lease     UUID;
    v_fi        INTEGER;
    v_ti        INTEGER;
    v_hi        INTEGER;
    v_k         INTEGER;
    v_o         INTEGER;
    v_s         INTEGER;
    v_f         INTEGER;
    v_reason    TEXT;
    v_moved     BIGINT;
    v_rest      BIGINT;
    v_limit     BIGINT;
    v_left      BIGINT;
    v_payee     TEXT;
    v_expires   TIMESTAMPTZ;
    v_leg       JSONB;
    v_total     BIGINT;
    v_detail    JSONB;
    v_rows      INTEGER;
    v_touched   INTEGER;
    v_names_others BOOLEAN := 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds);
    v_latest    TIMESTAMPTZ;
BEGIN
    IF v_n < 1 OR v_n > c_batch_max THEN
        RAISE EXCEPTION 'apply_payments: between 1 and % operations per call, got %', c_batch_max, v_n
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(p_kinds), -1) <> v_n OR coalesce(cardinality(p_request_hashes), -1) <> v_n
       OR coalesce(cardinality(p_froms), -1) <> v_n OR coalesce(cardinality(p_tos), -1) <> v_n
       OR coalesce(cardinality(p_amounts), -1) <> v_n OR coalesce(cardinality(p_currencies), -1) <> v_n
       OR coalesce(cardinality(p_refs), -1) <> v_n OR coalesce(cardinality(p_expires_in_ms), -1) <> v_n
       OR coalesce(cardinality(p_expires_at), -1) <> v_n OR coalesce(cardinality(p_legs), -1) <> v_n
       OR coalesce(cardinality(p_fences), -1) <> v_n OR coalesce(cardinality(p_lease_ids), -1) <> v_n THEN
        RAISE EXCEPTION 'apply_payments: the arrays must all have % elements', v_n USING ERRCODE = '22023';
    END IF;
    IF array_position(p_operation_ids, NULL) IS NOT NULL OR array_position(p_request_hashes, NULL) IS NOT NULL
       OR array_position(p_froms, NULL) IS NOT NULL OR array_position(p_fences, NULL) IS NOT NULL
       OR array_position(p_lease_ids, NULL) IS NOT NULL OR p_hold_expiry_max_ms IS NULL OR p_hold_expiry_max_ms < 1
       OR EXISTS (SELECT 1 FROM unnest(p_amounts) a WHERE a <= 0)
       OR EXISTS (SELECT 1 FROM unnest(p_fences) f WHERE f < 1) THEN
        RAISE EXCEPTION 'apply_payments: ids, hashes, sources and leases must be given, amounts and fences positive'
            USING ERRCODE = '22023';
    END IF;
    FOR v_i IN 1 .. v_n LOOP
        v_kind := p_kinds[v_i];
        IF v_kind IS NULL OR v_kind NOT IN ('hold', 'capture', 'void', 'refund', 'split')
           OR (v_kind = 'hold' AND (p_tos[v_i] IS NULL OR p_amounts[v_i] IS NULL
                                    OR (p_expires_in_ms[v_i] IS NULL) = (p_expires_at[v_i] IS NULL)))
           OR (v_kind IN ('capture', 'void', 'refund') AND p_refs[v_i] IS NULL)
           OR (v_kind = 'split' AND (jsonb_typeof(p_legs[v_i]) IS DISTINCT FROM 'array'
                                     OR jsonb_array_length(p_legs[v_i]) NOT BETWEEN 2 AND 16)) THEN
            RAISE EXCEPTION 'apply_payments: element % is not a whole hold, capture, void, refund or split', v_i
                USING ERRCODE = '22023';
        END IF;
    END LOOP;

    IF p_check_idempotency THEN
        FOR v_key IN
            SELECT DISTINCT hashtextextended('transfer:' || op, 0) FROM unnest(p_operation_ids) op ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(v_key);
        END LOOP;
    END IF;

    -- The refunds' originals, read before any row lock: who they moved money between never
    -- changes, and it says which wallets to lock. A captured hold's state is read below.
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(t.operation_id), '{}'), coalesce(array_agg(t.kind), '{}'),
               coalesce(array_agg(t.status), '{}'), coalesce(array_agg(t.from_wallet), '{}'),
               coalesce(array_agg(t.to_wallet), '{}'), coalesce(array_agg(t.amount), '{}')
          INTO o_id, o_kind, o_status, o_from, o_to, o_amount
          FROM transfers t
         WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                            WHERE p_kinds[i] = 'refund'));
    ELSE
        o_id := '{}'; o_kind := '{}'; o_status := '{}'; o_from := '{}'; o_to := '{}'; o_amount := '{}';
    END IF;
    o_count := cardinality(o_id);

    -- A wallet's first hold makes its holding wallet. (Each statement below that only some kinds
    -- need is skipped by batches without them: a batch pays for what it decides.)
    IF 'hold' = ANY (p_kinds) THEN
        INSERT INTO wallets (id, currency, balance)
        SELECT '$held:' || w.id, w.currency, 0
          FROM wallets w
         WHERE w.id IN (SELECT p_froms[i] FROM generate_subscripts(p_kinds, 1) i WHERE p_kinds[i] = 'hold')
           AND NOT EXISTS (SELECT 1 FROM wallets h WHERE h.id = '$held:' || w.id)
         ORDER BY w.id
        ON CONFLICT (id) DO NOTHING;
    END IF;

    -- Every wallet the batch may touch: sources, their holding wallets, payees, the holds'
    -- payees, the originals' sources (a refund's payee) and the splits' legs (repeats and NULLs
    -- are harmless to `= ANY`).
    v_wallets := p_froms || ARRAY(SELECT '$held:' || f FROM unnest(p_froms) f) || p_tos || o_from;
    IF 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) OR 'refund' = ANY (p_kinds) THEN
        v_wallets := v_wallets || ARRAY(SELECT h.to_wallet FROM holds h WHERE h.hold_id = ANY (p_refs));
    END IF;
    IF 'split' = ANY (p_kinds) THEN
        v_wallets := v_wallets || ARRAY(SELECT l ->> 'to' FROM unnest(p_legs) g,
            jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l);
    END IF;
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO w_id, w_currency, w_balance, w_fence, w_lease, w_touched
      FROM (SELECT w.id, w.currency, w.balance, w.last_fence, w.last_lease FROM wallets w
             WHERE w.id = ANY (v_wallets) ORDER BY w.id FOR UPDATE) l;

    -- The holds named, read once the wallets are locked. No row lock of their own: whoever
    -- changes a hold (its capture, its void, the decision or the sweep that releases it, and the
    -- hold's own decision) holds its source wallet's row lock, which this batch now holds for
    -- every hold it may change (a capture or void that names another source is refused
    -- wallet_mismatch and changes nothing). So this statement, which starts after those locks,
    -- sees every change committed before and none can come before this batch commits.
    SELECT coalesce(array_agg(h.hold_id), '{}'), coalesce(array_agg(h.from_wallet), '{}'),
           coalesce(array_agg(h.to_wallet), '{}'), coalesce(array_agg(h.amount), '{}'),
           coalesce(array_agg(h.currency::TEXT), '{}'), coalesce(array_agg(h.expires_at), '{}'),
           coalesce(array_agg(h.state), '{}'), coalesce(array_agg(h.captured), '{}'),
           coalesce(array_agg(h.released), '{}'), coalesce(array_agg(h.ended_by), '{}'),
           coalesce(array_agg(FALSE), '{}'), coalesce(array_agg(FALSE), '{}')
      INTO h_id, h_from, h_to, h_amount, h_currency, h_expires, h_state, h_captured, h_released, h_ended_by, h_new, h_ended
      FROM holds h WHERE h.hold_id = ANY (p_refs);
    h_count := cardinality(h_id);
    -- A capture or void whose hold has no row: a hold refused, or no hold at all. Its record says
    -- which (hold_rejected or hold_not_found); only batches with such an answer pay.
    IF EXISTS (SELECT 1 FROM generate_subscripts(p_kinds, 1) i
                WHERE p_kinds[i] IN ('capture', 'void') AND NOT (p_refs[i] = ANY (h_id))) THEN
        SELECT o_id || coalesce(array_agg(t.operation_id), '{}'), o_kind || coalesce(array_agg(t.kind), '{}'),
               o_status || coalesce(array_agg(t.status), '{}'), o_from || coalesce(array_agg(t.from_wallet), '{}'),
               o_to || coalesce(array_agg(t.to_wallet), '{}'), o_amount || coalesce(array_agg(t.amount), '{}')
          INTO o_id, o_kind, o_status, o_from, o_to, o_amount
          FROM transfers t
         WHERE t.operation_id = ANY (ARRAY(SELECT p_refs[i] FROM generate_subscripts(p_kinds, 1) i
                                            WHERE p_kinds[i] IN ('capture', 'void') AND NOT (p_refs[i] = ANY (h_id))))
           AND NOT (t.operation_id = ANY (o_id));
        o_count := cardinality(o_id);
    END IF;
    -- The time every expiry is judged by, taken once every lock is held: a capture that waited
    -- for a lock past its hold's expiry is refused, as the sweep that ran meanwhile would have it.
    v_now := clock_timestamp();
    v_latest := v_now + make_interval(secs => p_hold_expiry_max_ms / 1000.0);

    -- Legs of the splits named, and what was refunded of each original, per payer (serialised
    -- by the payer's row lock, taken above).
    IF 'refund' = ANY (p_kinds) THEN
        SELECT coalesce(array_agg(s.operation_id), '{}'), coalesce(array_agg(s.to_wallet), '{}'),
               coalesce(array_agg(s.amount), '{}'), coalesce(array_agg(s.leg), '{}'), coalesce(array_agg(FALSE), '{}')
          INTO s_op, s_to, s_amount, s_leg, s_new
          FROM split_legs s WHERE s.operation_id = ANY (p_refs);
        SELECT coalesce(array_agg(t.original_id || E'\n' || t.from_wallet), '{}'), coalesce(array_agg(t.total), '{}')
          INTO f_key, f_sum
          FROM (SELECT r.original_id, r.from_wallet, sum(r.amount)::BIGINT AS total FROM transfers r
                 WHERE r.original_id = ANY (p_refs) AND r.kind = 'refund' AND r.status = 'applied'
                 GROUP BY r.original_id, r.from_wallet) t;
    ELSE
        s_op := '{}'; s_to := '{}'; s_amount := '{}'; s_leg := '{}'; s_new := '{}';
        f_key := '{}'; f_sum := '{}';
    END IF;
    s_count := cardinality(s_op);
    f_count := cardinality(f_key);

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
        v_kind := p_kinds[v_i];
        v_op := p_operation_ids[v_i];
        v_from := p_froms[v_i];
        v_to := p_tos[v_i];
        v_amount := p_amounts[v_i];
        v_currency := p_currencies[v_i];
        v_ref := p_refs[v_i];
        v_fence := p_fences[v_i];
        v_lease := p_lease_ids[v_i];
        ord := v_i;

        IF p_check_idempotency THEN
            v_k := array_position(r_op, v_op);
            IF v_k IS NOT NULL THEN
                IF r_element[v_k] IS NULL THEN
                    d_count := d_count + 1;
                    d_op[d_count] := v_op;
                    d_hash[d_count] := r_hash[v_k];
                END IF;
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
        -- The fence guards the wallet the operation debits (for a capture or a void, the hold's
        -- source, whose money it is), exactly as for a transfer; credits are never fenced.
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
        v_moved := NULL;
        v_payee := NULL;
        v_detail := NULL;
        v_hi := array_position(w_id, '$held:' || v_from);

        IF v_kind = 'hold' THEN
            v_ti := array_position(w_id, v_to);
            v_expires := coalesce(p_expires_at[v_i], v_now + make_interval(secs => p_expires_in_ms[v_i] / 1000.0));
            IF v_from = v_to THEN
                v_reason := 'same_wallet';
            ELSIF v_fi IS NULL OR v_ti IS NULL OR v_hi IS NULL THEN
                v_reason := 'unknown_wallet';
            ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
                v_reason := 'currency_mismatch';
            ELSIF v_expires <= v_now OR v_expires > v_latest THEN
                v_reason := 'expiry_out_of_range';
            ELSIF w_balance[v_fi] < v_amount THEN
                v_reason := 'insufficient_funds';
            ELSE
                v_moved := v_amount;
                v_payee := v_to;
                w_balance[v_fi] := w_balance[v_fi] - v_amount;
                w_balance[v_hi] := w_balance[v_hi] + v_amount;
                w_touched[v_hi] := TRUE;
                l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
                l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := '$held:' || v_from;
                l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                l_amount[l_count + 1] := -v_amount; l_amount[l_count + 2] := v_amount;
                l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
                l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
                l_count := l_count + 2;
                h_count := h_count + 1;
                h_id[h_count] := v_op;           h_from[h_count] := v_from;
                h_to[h_count] := v_to;           h_amount[h_count] := v_amount;
                h_currency[h_count] := v_currency; h_expires[h_count] := v_expires;
                h_state[h_count] := 'active';    h_captured[h_count] := 0;
                h_released[h_count] := 0;        h_ended_by[h_count] := NULL;
                h_new[h_count] := TRUE;          h_ended[h_count] := FALSE;
                v_detail := jsonb_build_object('expiresAt', to_char(v_expires AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'));
            END IF;
        ELSIF v_kind IN ('capture', 'void') THEN
            v_k := array_position(h_id, v_ref);
            v_o := array_position(o_id, v_ref);
            IF v_k IS NULL AND v_o IS NOT NULL AND o_kind[v_o] = 'hold' AND o_status[v_o] = 'rejected' THEN
                v_reason := 'hold_rejected';
            ELSIF v_k IS NULL THEN
                v_reason := 'hold_not_found';
            ELSIF h_from[v_k] <> v_from THEN
                v_reason := 'wallet_mismatch';
            ELSIF p_check_hold_state AND h_state[v_k] = 'captured' THEN
                v_reason := 'hold_already_captured';
            ELSIF p_check_hold_state AND h_state[v_k] = 'voided' THEN
                v_reason := 'hold_already_voided';
            ELSIF p_check_hold_state AND (h_state[v_k] = 'expired' OR h_expires[v_k] <= v_now) THEN
                v_reason := 'hold_expired';
                IF h_state[v_k] = 'active' THEN
                    -- Past its expiry and not swept yet: released here, once, as the sweep would.
                    v_hi := array_position(w_id, '$held:' || h_from[v_k]);
                    w_balance[v_hi] := w_balance[v_hi] - h_amount[v_k];
                    w_balance[v_fi] := w_balance[v_fi] + h_amount[v_k];
                    w_touched[v_hi] := TRUE;
                    l_op[l_count + 1] := '$expiry:' || v_ref;     l_op[l_count + 2] := '$expiry:' || v_ref;
                    l_wallet[l_count + 1] := '$held:' || h_from[v_k]; l_wallet[l_count + 2] := h_from[v_k];
                    l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                    l_amount[l_count + 1] := -h_amount[v_k]; l_amount[l_count + 2] := h_amount[v_k];
                    l_fence[l_count + 1] := NULL;     l_fence[l_count + 2] := NULL;
                    l_lease[l_count + 1] := NULL;     l_lease[l_count + 2] := NULL;
                    l_count := l_count + 2;
                    h_state[v_k] := 'expired';
                    h_released[v_k] := h_amount[v_k];
                    h_ended[v_k] := TRUE;
                    x_count := x_count + 1;
                    x_hold[x_count] := v_ref;
                END IF;
            ELSIF v_kind = 'capture' AND coalesce(v_amount, h_amount[v_k]) > h_amount[v_k] THEN
                v_reason := 'exceeds_hold_amount';
            ELSE
                v_ti := array_position(w_id, h_to[v_k]);
                v_moved := CASE WHEN v_kind = 'capture' THEN coalesce(v_amount, h_amount[v_k]) ELSE h_amount[v_k] END;
                v_rest := h_amount[v_k] - CASE WHEN v_kind = 'capture' THEN v_moved ELSE 0 END;
                -- The whole held amount leaves the holding wallet: the captured part to the
                -- payee, the rest back to the source.
                w_balance[v_hi] := w_balance[v_hi] - h_amount[v_k];
                w_touched[v_hi] := TRUE;
                l_op[l_count + 1] := v_op;
                l_wallet[l_count + 1] := '$held:' || v_from;
                l_kind[l_count + 1] := 'debit';
                l_amount[l_count + 1] := -h_amount[v_k];
                l_fence[l_count + 1] := v_fence;
                l_lease[l_count + 1] := v_lease;
                l_count := l_count + 1;
                IF v_kind = 'capture' THEN
                    v_payee := h_to[v_k];
                    w_balance[v_ti] := w_balance[v_ti] + v_moved;
                    w_touched[v_ti] := TRUE;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := h_to[v_k]; l_kind[l_count] := 'credit';
                    l_amount[l_count] := v_moved; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                    v_detail := jsonb_build_object('released', v_rest::TEXT);
                END IF;
                IF v_rest > 0 THEN
                    w_balance[v_fi] := w_balance[v_fi] + v_rest;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := v_from; l_kind[l_count] := 'credit';
                    l_amount[l_count] := v_rest; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                END IF;
                h_state[v_k] := CASE WHEN v_kind = 'capture' THEN 'captured' ELSE 'voided' END;
                h_captured[v_k] := CASE WHEN v_kind = 'capture' THEN v_moved ELSE 0 END;
                h_released[v_k] := v_rest;
                h_ended_by[v_k] := v_op;
                h_ended[v_k] := TRUE;
            END IF;
        ELSIF v_kind = 'refund' THEN
            v_o := array_position(o_id, v_ref);
            v_limit := NULL;
            IF v_o IS NULL THEN
                v_reason := 'original_not_found';
            ELSIF o_status[v_o] <> 'applied' OR o_kind[v_o] NOT IN ('transfer', 'hold', 'split') THEN
                v_reason := 'original_not_refundable';
            ELSIF o_kind[v_o] = 'transfer' THEN
                IF o_to[v_o] <> v_from THEN v_reason := 'wallet_mismatch'; ELSE v_limit := o_amount[v_o]; END IF;
            ELSIF o_kind[v_o] = 'hold' THEN
                v_k := array_position(h_id, v_ref);
                IF v_k IS NULL OR h_state[v_k] <> 'captured' THEN
                    v_reason := 'original_not_refundable';
                ELSIF h_to[v_k] <> v_from THEN
                    v_reason := 'wallet_mismatch';
                ELSE
                    v_limit := h_captured[v_k];
                END IF;
            ELSE
                v_s := NULL;
                FOR v_j IN 1 .. s_count LOOP
                    IF s_op[v_j] = v_ref AND s_to[v_j] = v_from THEN v_s := v_j; EXIT; END IF;
                END LOOP;
                IF v_s IS NULL THEN v_reason := 'wallet_mismatch'; ELSE v_limit := s_amount[v_s]; END IF;
            END IF;
            IF v_reason IS NULL THEN
                v_payee := o_from[v_o];
                v_ti := array_position(w_id, v_payee);
                v_f := array_position(f_key, v_ref || E'\n' || v_from);
                v_left := v_limit - coalesce(f_sum[v_f], 0);
                v_moved := coalesce(v_amount, CASE WHEN v_left > 0 OR p_check_refund_bound THEN v_left ELSE v_limit END);
                IF p_check_refund_bound AND (v_moved > v_left OR v_moved <= 0) THEN
                    v_reason := 'refund_exceeds_original';
                ELSIF v_fi IS NULL OR v_ti IS NULL THEN
                    v_reason := 'unknown_wallet';
                ELSIF w_balance[v_fi] < v_moved THEN
                    v_reason := 'insufficient_funds';
                ELSE
                    w_balance[v_fi] := w_balance[v_fi] - v_moved;
                    w_balance[v_ti] := w_balance[v_ti] + v_moved;
                    w_touched[v_ti] := TRUE;
                    l_op[l_count + 1] := v_op;        l_op[l_count + 2] := v_op;
                    l_wallet[l_count + 1] := v_from;  l_wallet[l_count + 2] := v_payee;
                    l_kind[l_count + 1] := 'debit';   l_kind[l_count + 2] := 'credit';
                    l_amount[l_count + 1] := -v_moved; l_amount[l_count + 2] := v_moved;
                    l_fence[l_count + 1] := v_fence;  l_fence[l_count + 2] := v_fence;
                    l_lease[l_count + 1] := v_lease;  l_lease[l_count + 2] := v_lease;
                    l_count := l_count + 2;
                    IF v_f IS NULL THEN
                        f_count := f_count + 1;
                        f_key[f_count] := v_ref || E'\n' || v_from;
                        f_sum[f_count] := v_moved;
                    ELSE
                        f_sum[v_f] := f_sum[v_f] + v_moved;
                    END IF;
                END IF;
            END IF;
            IF v_reason IS NOT NULL THEN v_moved := v_amount; END IF;
        ELSE -- split
            v_total := 0;
            FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs[v_i]) l LOOP
                v_ti := array_position(w_id, v_leg ->> 'to');
                IF (v_leg ->> 'amount') IS NULL OR (v_leg ->> 'amount') !~ '^[0-9]{1,19}$' OR (v_leg ->> 'amount')::NUMERIC <= 0
                   OR (v_leg ->> 'to') IS NULL THEN
                    RAISE EXCEPTION 'apply_payments: split % has a leg without a wallet or a positive amount', v_op
                        USING ERRCODE = '22023';
                END IF;
                v_total := v_total + (v_leg ->> 'amount')::BIGINT;
                IF v_reason IS NOT NULL THEN CONTINUE; END IF;
                IF (v_leg ->> 'to') = v_from THEN
                    v_reason := 'same_wallet';
                ELSIF v_fi IS NULL OR v_ti IS NULL THEN
                    v_reason := 'unknown_wallet';
                ELSIF w_currency[v_fi] <> w_currency[v_ti] OR (v_currency IS NOT NULL AND v_currency <> w_currency[v_fi]) THEN
                    v_reason := 'currency_mismatch';
                END IF;
            END LOOP;
            IF v_reason IS NULL AND (SELECT count(DISTINCT l ->> 'to') FROM jsonb_array_elements(p_legs[v_i]) l)
                                    <> jsonb_array_length(p_legs[v_i]) THEN
                RAISE EXCEPTION 'apply_payments: split % names one wallet in two legs', v_op USING ERRCODE = '22023';
            END IF;
            IF v_reason IS NULL AND w_balance[v_fi] < v_total THEN
                v_reason := 'insufficient_funds';
            END IF;
            v_moved := v_total;
            IF v_reason IS NULL THEN
                -- All legs or none: every check above passed before any balance moves.
                w_balance[v_fi] := w_balance[v_fi] - v_total;
                l_count := l_count + 1;
                l_op[l_count] := v_op; l_wallet[l_count] := v_from; l_kind[l_count] := 'debit';
                l_amount[l_count] := -v_total; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                v_j := 0;
                FOR v_leg IN SELECT l FROM jsonb_array_elements(p_legs[v_i]) l LOOP
                    v_j := v_j + 1;
                    v_ti := array_position(w_id, v_leg ->> 'to');
                    w_balance[v_ti] := w_balance[v_ti] + (v_leg ->> 'amount')::BIGINT;
                    w_touched[v_ti] := TRUE;
                    l_count := l_count + 1;
                    l_op[l_count] := v_op; l_wallet[l_count] := v_leg ->> 'to'; l_kind[l_count] := 'credit';
                    l_amount[l_count] := (v_leg ->> 'amount')::BIGINT; l_fence[l_count] := v_fence; l_lease[l_count] := v_lease;
                    s_count := s_count + 1;
                    s_op[s_count] := v_op; s_to[s_count] := v_leg ->> 'to';
                    s_amount[s_count] := (v_leg ->> 'amount')::BIGINT; s_leg[s_count] := v_j; s_new[s_count] := TRUE;
                END LOOP;
            END IF;
            v_detail := jsonb_build_object('legs', p_legs[v_i]);
        END IF;

        IF v_fi IS NOT NULL THEN
            -- Every decision under our token raises the source's fence, refusals included.
            IF v_fence >= w_fence[v_fi] THEN
                w_fence[v_fi] := v_fence;
                w_lease[v_fi] := v_lease;
            END IF;
            w_touched[v_fi] := TRUE;
        END IF;

        r_count := r_count + 1;
        r_op[r_count] := v_op;
        r_hash[r_count] := p_request_hashes[v_i];
        r_status[r_count] := CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END;
        r_reason[r_count] := v_reason;
        r_fence[r_count] := v_fence;
        r_element[r_count] := v_i;
        t_count := t_count + 1;
        t_element[t_count] := v_i;
        t_status[t_count] := r_status[r_count];
        t_reason[t_count] := v_reason;
        t_to[t_count] := CASE WHEN v_kind IN ('hold', 'capture', 'refund') THEN coalesce(v_payee, v_to) END;
        t_amount[t_count] := CASE WHEN v_reason IS NULL THEN v_moved ELSE coalesce(v_amount, CASE WHEN v_kind = 'split' THEN v_moved END) END;
        t_original[t_count] := CASE WHEN v_kind IN ('capture', 'void', 'refund') THEN v_ref END;
        t_detail[t_count] := v_detail;
        -- Originals decided here can be named later in the batch (a refund of a split, a capture
        -- of a hold refused here): kept when the batch has such operations.
        IF v_names_others THEN
            o_count := o_count + 1;
            o_id[o_count] := v_op;
            o_kind[o_count] := v_kind;
            o_status[o_count] := r_status[r_count];
            o_from[o_count] := v_from;
            o_to[o_count] := t_to[t_count];
            o_amount[o_count] := t_amount[t_count];
        END IF;

        outcome := r_status[r_count];
        status := outcome;
        reason := v_reason;
        fence := v_fence;
        wallet_fence := CASE WHEN v_fi IS NOT NULL THEN w_fence[v_fi] ELSE NULL END;
        RETURN NEXT;
    END LOOP;

    -- Write what the decisions did, once per table. CHECK (balance >= 0) stays the last line of
    -- defence, for the holding wallets too.
    SELECT count(*) INTO v_touched FROM unnest(w_touched) t WHERE t;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, last_fence = u.last_fence, last_lease = u.last_lease,
               updated_at = CURRENT_TIMESTAMP
          FROM unnest(w_id, w_balance, w_fence, w_lease, w_touched) AS u(id, balance, last_fence, last_lease, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            RAISE EXCEPTION 'apply_payments: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;
    IF l_count > 0 THEN
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT e.op, e.wallet, e.kind, e.amount, e.fence, e.lease
          FROM unnest(l_op, l_wallet, l_kind, l_amount, l_fence, l_lease) WITH ORDINALITY
               AS e(op, wallet, kind, amount, fence, lease, n)
         ORDER BY e.n;
    END IF;
    IF 'hold' = ANY (p_kinds) THEN
        INSERT INTO holds (hold_id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released,
                           ended_by, ended_at)
        SELECT h.id, h.from_wallet, h.to_wallet, h.amount, h.currency, h.expires_at, h.state, h.captured, h.released,
               h.ended_by, CASE WHEN h.state <> 'active' THEN v_now END
          FROM unnest(h_id, h_from, h_to, h_amount, h_currency, h_expires, h_state, h_captured, h_released, h_ended_by, h_new)
               AS h(id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released, ended_by, is_new)
         WHERE h.is_new;
    END IF;
    IF 'capture' = ANY (p_kinds) OR 'void' = ANY (p_kinds) THEN
        UPDATE holds h
           SET state = u.state, captured = u.captured, released = u.released, ended_by = u.ended_by, ended_at = v_now
          FROM unnest(h_id, h_state, h_captured, h_released, h_ended_by, h_new, h_ended)
               AS u(id, state, captured, released, ended_by, is_new, ended)
         WHERE h.hold_id = u.id AND u.ended AND NOT u.is_new;
    END IF;
    IF 'split' = ANY (p_kinds) THEN
        INSERT INTO split_legs (operation_id, leg, to_wallet, amount)
        SELECT s.op, s.leg, s.to_wallet, s.amount
          FROM unnest(s_op, s_leg, s_to, s_amount, s_new) AS s(op, leg, to_wallet, amount, is_new)
         WHERE s.is_new;
    END IF;

    -- The records, then what they decide: the intake's request closed and one event each; an
    -- expiry released here has its own event. Checked, a plain INSERT: under the advisory locks
    -- no record of these operations can appear meanwhile, so a unique violation means somebody
    -- skipped the lock, and everything rolls back (as in transfers_decide_batch()).
    WITH recorded AS (
        SELECT p_operation_ids[t.element] AS operation_id, p_request_hashes[t.element] AS request_hash,
               p_kinds[t.element] AS kind, t.original, p_froms[t.element] AS from_wallet, t.to_wallet, t.amount,
               p_currencies[t.element] AS currency, t.status, t.reason, p_fences[t.element] AS fence,
               p_lease_ids[t.element] AS lease, t.detail, t.element
          FROM unnest(t_element, t_status, t_reason, t_to, t_amount, t_original, t_detail)
               AS t(element, status, reason, to_wallet, amount, original, detail)
    ), inserted AS (
        -- Unchecked (the negative control), an operation recorded meanwhile keeps its first record.
        INSERT INTO transfers AS t (operation_id, request_hash, kind, original_id, from_wallet, to_wallet, amount,
                                    currency, status, reason, fence, lease)
        SELECT DISTINCT ON (d.operation_id) d.operation_id, d.request_hash, d.kind, d.original, d.from_wallet,
               d.to_wallet, d.amount, d.currency, d.status, d.reason, d.fence, d.lease
          FROM recorded d
         WHERE p_check_idempotency OR NOT EXISTS (SELECT 1 FROM transfers x WHERE x.operation_id = d.operation_id)
         ORDER BY d.operation_id, d.element
        RETURNING t.operation_id
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
        RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                  q.amount, q.currency, d.request_hash AS decided_hash
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                 currency, detail)
    SELECT d.operation_id, d.status, d.reason, d.kind, d.original, d.from_wallet, d.to_wallet, d.amount, d.currency,
           d.detail
      FROM recorded d
     -- Checked, every record was inserted (or the statement failed).
     WHERE p_check_idempotency OR EXISTS (SELECT 1 FROM inserted i WHERE i.operation_id = d.operation_id)
    UNION ALL
    SELECT q.operation_id, 'conflict', NULL, q.kind, NULL, q.from_wallet, q.to_wallet, q.amount, q.currency, q.body
      FROM requested q WHERE q.request_hash <> q.decided_hash;
    IF x_count > 0 THEN
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT h.hold_id, 'expired', NULL, 'hold', NULL, h.from_wallet, h.to_wallet, h.amount, h.currency, NULL
          FROM holds h WHERE h.hold_id = ANY (x_hold);
    END IF;
    IF d_count > 0 THEN
        WITH closed AS (
            UPDATE transfer_requests q SET decided_at = clock_timestamp()
              FROM (SELECT DISTINCT x.op, x.hash FROM unnest(d_op, d_hash) AS x(op, hash)) d
             WHERE q.operation_id = d.op AND q.decided_at IS NULL
            RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                      q.amount, q.currency, d.hash AS decided_hash
        )
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT c.operation_id, 'conflict', NULL, c.kind, NULL, c.from_wallet, c.to_wallet, c.amount, c.currency, c.body
          FROM closed c WHERE c.request_hash <> c.decided_hash;
    END IF;
END;
$$;
REVOKE EXECUTE ON FUNCTION "payments_decide_batch"(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], TEXT[],
    BIGINT[], TIMESTAMPTZ[], JSONB[], BIGINT[], UUID[], BIGINT, BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- Holding wallets (`$held:<wallet>`) are wallets rows, so the decisions must not take them as a
-- wallet a message names: a direct caller of apply_transfers() with the worker role's credential
-- could otherwise move held money, leave a hold its money no longer covers, and stop the sweep at
-- that hold. `$` is outside the wire format's alphabet, so no worker ever sends one; a call that
-- does is refused before any decision. IMMUTABLE and free of the rows, so a wrapper evaluates it
-- once, before the decision runs.
CREATE FUNCTION "decision_wallet_ids_checked"(p_ids TEXT[], p_legs JSONB[] DEFAULT NULL) RETURNS BOOLEAN
LANGUAGE plpgsql
IMMUTABLE
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_ids) i WHERE i LIKE '$%')
       OR EXISTS (SELECT 1 FROM unnest(p_legs) g, jsonb_array_elements(CASE WHEN jsonb_typeof(g) = 'array' THEN g ELSE '[]'::jsonb END) l
                   WHERE l ->> 'to' LIKE '$%') THEN
        RAISE EXCEPTION 'a wallet id starting with $ is the ledger''s own (a holding or funding account), never a message''s'
            USING ERRCODE = '22023';
    END IF;
    RETURN TRUE;
END;
$$;
REVOKE EXECUTE ON FUNCTION "decision_wallet_ids_checked"(TEXT[], JSONB[]) FROM PUBLIC;

-- The worker's decision of transfers, as in the lease-ids migration, refusing those ids.
CREATE OR REPLACE FUNCTION "apply_transfers"(
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
AS $$
    SELECT b.ord, b.outcome, b.status, b.reason, b.fence, b.wallet_fence
      FROM transfers_decide_batch(p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
                                  p_currencies, p_fences, p_lease_ids, TRUE, TRUE, TRUE) b
     WHERE decision_wallet_ids_checked(p_froms || p_tos);
$$;

-- The worker's decision of payments: every check on, always (as apply_transfers()).
CREATE FUNCTION "apply_payments"(
    p_kinds              TEXT[],
    p_operation_ids      TEXT[],
    p_request_hashes     TEXT[],
    p_froms              TEXT[],
    p_tos                TEXT[],
    p_amounts            BIGINT[],
    p_currencies         TEXT[],
    p_refs               TEXT[],
    p_expires_in_ms      BIGINT[],
    p_expires_at         TIMESTAMPTZ[],
    p_legs               JSONB[],
    p_fences             BIGINT[],
    p_lease_ids          UUID[],
    p_hold_expiry_max_ms BIGINT
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE sql
VOLATILE
AS $$
    SELECT * FROM payments_decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms,
        TRUE, TRUE, TRUE, TRUE, TRUE)
     WHERE decision_wallet_ids_checked(p_froms || p_tos, p_legs);
$$;
REVOKE EXECUTE ON FUNCTION "apply_payments"(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], TEXT[],
    BIGINT[], TIMESTAMPTZ[], JSONB[], BIGINT[], UUID[], BIGINT) FROM PUBLIC;

-- The negative controls' variant (owner only, never granted): --unsafe double-capture turns the
-- hold's state check off, --unsafe refund-unbounded the refund's bound.
CREATE FUNCTION "apply_payments_unsafe"(
    p_kinds              TEXT[],
    p_operation_ids      TEXT[],
    p_request_hashes     TEXT[],
    p_froms              TEXT[],
    p_tos                TEXT[],
    p_amounts            BIGINT[],
    p_currencies         TEXT[],
    p_refs               TEXT[],
    p_expires_in_ms      BIGINT[],
    p_expires_at         TIMESTAMPTZ[],
    p_legs               JSONB[],
    p_fences             BIGINT[],
    p_lease_ids          UUID[],
    p_hold_expiry_max_ms BIGINT,
    p_check_idempotency  BOOLEAN,
    p_check_fence        BOOLEAN,
    p_check_lease        BOOLEAN,
    p_check_hold_state   BOOLEAN,
    p_check_refund_bound BOOLEAN
) RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
LANGUAGE sql
VOLATILE
AS $$
    SELECT * FROM payments_decide_batch(p_kinds, p_operation_ids, p_request_hashes, p_froms, p_tos, p_amounts,
        p_currencies, p_refs, p_expires_in_ms, p_expires_at, p_legs, p_fences, p_lease_ids, p_hold_expiry_max_ms,
        p_check_idempotency, p_check_fence, p_check_lease, p_check_hold_state, p_check_refund_bound)
     WHERE decision_wallet_ids_checked(p_froms || p_tos, p_legs);
$$;
REVOKE EXECUTE ON FUNCTION "apply_payments_unsafe"(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[], BIGINT[], TEXT[], TEXT[],
    BIGINT[], TIMESTAMPTZ[], JSONB[], BIGINT[], UUID[], BIGINT, BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN, BOOLEAN) FROM PUBLIC;

-- The expiry sweep: releases up to p_limit holds past their expiry, oldest first, each once, and
-- answers how many. Locks in the decisions' order (wallets by id, then holds by id) and checks
-- the state again under the hold's row lock, so a capture or void deciding the same hold meanwhile
-- wins or loses whole, and two sweeps never release one hold twice. Runs as its owner; granted to
-- the worker role (every worker sweeps, src/ledger/hold-sweeper.ts).
CREATE FUNCTION "holds_expire"(p_limit INTEGER DEFAULT 1000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_ids   TEXT[];
    v_now   TIMESTAMPTZ := clock_timestamp();
    v_count INTEGER;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'holds_expire: the limit must be from 1 to 10000' USING ERRCODE = '22023';
    END IF;
    SELECT array_agg(c.hold_id) INTO v_ids FROM (
        SELECT h.hold_id FROM holds h WHERE h.state = 'active' AND h.expires_at <= v_now
         ORDER BY h.expires_at LIMIT p_limit) c;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM 1 FROM wallets w
     WHERE w.id IN (SELECT h.from_wallet FROM holds h WHERE h.hold_id = ANY (v_ids)
                    UNION SELECT '$held:' || h.from_wallet FROM holds h WHERE h.hold_id = ANY (v_ids))
     ORDER BY w.id FOR UPDATE;
    PERFORM 1 FROM holds h WHERE h.hold_id = ANY (v_ids) ORDER BY h.hold_id FOR UPDATE;
    WITH ended AS (
        UPDATE holds h SET state = 'expired', released = h.amount, ended_at = v_now
         WHERE h.hold_id = ANY (v_ids) AND h.state = 'active' AND h.expires_at <= v_now
        RETURNING h.hold_id, h.from_wallet, h.to_wallet, h.amount, h.currency
    ), moved AS (
        UPDATE wallets w SET balance = w.balance + m.delta, updated_at = CURRENT_TIMESTAMP
          FROM (SELECT e.from_wallet AS id, sum(e.amount)::BIGINT AS delta FROM ended e GROUP BY e.from_wallet
                UNION ALL
                SELECT '$held:' || e.from_wallet, -sum(e.amount)::BIGINT FROM ended e GROUP BY e.from_wallet) m
         WHERE w.id = m.id
        RETURNING w.id
    ), entries AS (
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, fence, lease)
        SELECT '$expiry:' || e.hold_id, x.wallet, x.kind, x.amount, NULL, NULL
          FROM ended e
         CROSS JOIN LATERAL (VALUES ('$held:' || e.from_wallet, 'debit', -e.amount),
                                    (e.from_wallet, 'credit', e.amount)) AS x(wallet, kind, amount)
        RETURNING 1
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                 currency, detail)
    SELECT e.hold_id, 'expired', NULL, 'hold', NULL, e.from_wallet, e.to_wallet, e.amount, e.currency, NULL
      FROM ended e;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END;
$$;
REVOKE EXECUTE ON FUNCTION "holds_expire"(INTEGER) FROM PUBLIC;

-- The intake for every kind: a producer's request of one operation, given as the wire format's
-- JSON object, inside the producer's transaction, as request_transfer() (which a transfer goes
-- through, unchanged). Validates the body as the worker does (src/ledger/transfer-request.ts)
-- and hashes it the same way (src/ledger/request-hash.ts); answers 'requested' or 'duplicate',
-- raises 'conflict: …' (23505) for the same id with another body, 22023 for a bad body.
CREATE FUNCTION "request_operation"(p_body JSONB, p_hold_expiry_max_ms BIGINT DEFAULT 604800000) RETURNS TEXT
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    c_id_pattern       CONSTANT TEXT := '^[A-Za-z0-9._:-]{1,128}$';
    c_amount_pattern   CONSTANT TEXT := '^[0-9]{1,19}$';
    c_currency_pattern CONSTANT TEXT := '^[A-Z]{3}$';
    c_time_pattern     CONSTANT TEXT := '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$';
    v_kind     TEXT;
    v_allowed  TEXT[];
    v_extra    TEXT;
    v_op       TEXT;
    v_from     TEXT;
    v_to       TEXT;
    v_amount   BIGINT;
    v_currency TEXT;
    v_lines    TEXT[];
    v_hash     TEXT;
    v_leg      JSONB;
    v_legs     TEXT[] := '{}';
    v_leg_to   TEXT[] := '{}';
    v_total    NUMERIC := 0;
    v_existing TEXT;
    v_decided  TIMESTAMPTZ;
    v_field    TEXT;
BEGIN
    IF p_body IS NULL OR jsonb_typeof(p_body) <> 'object' THEN
        RAISE EXCEPTION 'request_operation: the body must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF p_body ? 'kind' AND jsonb_typeof(p_body -> 'kind') <> 'string' THEN
        RAISE EXCEPTION 'request_operation: kind must be a string' USING ERRCODE = '22023';
    END IF;
    v_kind := coalesce(p_body ->> 'kind', 'transfer');
    v_allowed := CASE v_kind
        WHEN 'transfer' THEN ARRAY['kind', 'operationId', 'from', 'to', 'amount', 'currency']
        WHEN 'hold'     THEN ARRAY['kind', 'operationId', 'from', 'to', 'amount', 'currency', 'expiresInMs', 'expiresAt']
        WHEN 'capture'  THEN ARRAY['kind', 'operationId', 'from', 'hold', 'amount']
        WHEN 'void'     THEN ARRAY['kind', 'operationId', 'from', 'hold']
        WHEN 'refund'   THEN ARRAY['kind', 'operationId', 'from', 'original', 'amount']
        WHEN 'split'    THEN ARRAY['kind', 'operationId', 'from', 'legs', 'currency']
    END;
    IF v_allowed IS NULL THEN
        RAISE EXCEPTION 'request_operation: kind must be one of transfer, hold, capture, void, refund, split'
            USING ERRCODE = '22023';
    END IF;
    SELECT k INTO v_extra FROM jsonb_object_keys(p_body) k WHERE k <> ALL (v_allowed) LIMIT 1;
    IF v_extra IS NOT NULL THEN
        RAISE EXCEPTION 'request_operation: unknown field % for a %', left(v_extra, 40), v_kind USING ERRCODE = '22023';
    END IF;
    IF v_kind = 'transfer' THEN
        IF jsonb_typeof(p_body -> 'amount') IS DISTINCT FROM 'string' OR (p_body ->> 'amount') !~ c_amount_pattern THEN
            RAISE EXCEPTION 'request_operation: amount must be a string of decimal digits' USING ERRCODE = '22023';
        END IF;
        RETURN request_transfer(p_body ->> 'operationId', p_body ->> 'from', p_body ->> 'to',
                                (p_body ->> 'amount')::BIGINT, p_body ->> 'currency');
    END IF;

    -- The ids each kind names: its own, the wallet it debits, and the payee, hold or original.
    FOREACH v_field IN ARRAY ARRAY['operationId', 'from'] || CASE v_kind WHEN 'hold' THEN ARRAY['to']
                                                                   WHEN 'capture' THEN ARRAY['hold']
                                                                   WHEN 'void' THEN ARRAY['hold']
                                                                   WHEN 'refund' THEN ARRAY['original']
                                                                   ELSE ARRAY[]::TEXT[] END LOOP
        IF jsonb_typeof(p_body -> v_field) IS DISTINCT FROM 'string' OR (p_body ->> v_field) !~ c_id_pattern THEN
            RAISE EXCEPTION 'request_operation: % must be 1-128 characters of [A-Za-z0-9._:-]', v_field USING ERRCODE = '22023';
        END IF;
    END LOOP;
    v_op := p_body ->> 'operationId';
    v_from := p_body ->> 'from';
    v_to := p_body ->> 'to';
    IF p_body ? 'amount' THEN
        IF jsonb_typeof(p_body -> 'amount') <> 'string' OR (p_body ->> 'amount') !~ c_amount_pattern
           OR (p_body ->> 'amount')::NUMERIC <= 0 THEN
            RAISE EXCEPTION 'request_operation: amount must be a string of decimal digits, positive' USING ERRCODE = '22023';
        END IF;
        v_amount := (p_body ->> 'amount')::BIGINT;
    END IF;
    IF p_body ? 'currency' THEN
        IF jsonb_typeof(p_body -> 'currency') <> 'string' OR (p_body ->> 'currency') !~ c_currency_pattern THEN
            RAISE EXCEPTION 'request_operation: currency must be three capital letters, like EUR' USING ERRCODE = '22023';
        END IF;
        v_currency := p_body ->> 'currency';
    END IF;

    IF v_kind = 'hold' THEN
        IF v_amount IS NULL THEN
            RAISE EXCEPTION 'request_operation: a hold needs an amount' USING ERRCODE = '22023';
        END IF;
        IF v_from = v_to THEN
            RAISE EXCEPTION 'request_operation: from and to are the same wallet' USING ERRCODE = '22023';
        END IF;
        IF (p_body ? 'expiresInMs') = (p_body ? 'expiresAt') THEN
            RAISE EXCEPTION 'request_operation: a hold needs exactly one of expiresInMs and expiresAt' USING ERRCODE = '22023';
        END IF;
        IF p_body ? 'expiresInMs' AND (jsonb_typeof(p_body -> 'expiresInMs') <> 'number'
            OR (p_body ->> 'expiresInMs') !~ '^[0-9]{1,12}$'
            OR (p_body ->> 'expiresInMs')::BIGINT NOT BETWEEN 1000 AND p_hold_expiry_max_ms) THEN
            RAISE EXCEPTION 'request_operation: expiresInMs must be a whole number from 1000 to %', p_hold_expiry_max_ms
                USING ERRCODE = '22023';
        END IF;
        IF p_body ? 'expiresAt' AND (jsonb_typeof(p_body -> 'expiresAt') <> 'string'
            OR (p_body ->> 'expiresAt') !~ c_time_pattern) THEN
            RAISE EXCEPTION 'request_operation: expiresAt must be a UTC time like 2026-12-02T10:00:00.000Z'
                USING ERRCODE = '22023';
        END IF;
        v_lines := ARRAY['v2', 'hold', v_from, v_to, v_amount::TEXT, coalesce(v_currency, ''),
                         coalesce(p_body ->> 'expiresInMs', ''), coalesce(p_body ->> 'expiresAt', '')];
    ELSIF v_kind = 'capture' THEN
        v_lines := ARRAY['v2', 'capture', v_from, p_body ->> 'hold', coalesce(v_amount::TEXT, '')];
    ELSIF v_kind = 'void' THEN
        v_lines := ARRAY['v2', 'void', v_from, p_body ->> 'hold'];
    ELSIF v_kind = 'refund' THEN
        v_lines := ARRAY['v2', 'refund', v_from, p_body ->> 'original', coalesce(v_amount::TEXT, '')];
    ELSE
        IF jsonb_typeof(p_body -> 'legs') IS DISTINCT FROM 'array' OR jsonb_array_length(p_body -> 'legs') NOT BETWEEN 2 AND 16 THEN
            RAISE EXCEPTION 'request_operation: legs must be an array of 2 to 16 {to, amount}' USING ERRCODE = '22023';
        END IF;
        FOR v_leg IN SELECT l FROM jsonb_array_elements(p_body -> 'legs') l LOOP
            IF jsonb_typeof(v_leg) <> 'object' OR EXISTS (SELECT 1 FROM jsonb_object_keys(v_leg) k WHERE k NOT IN ('to', 'amount'))
               OR jsonb_typeof(v_leg -> 'to') IS DISTINCT FROM 'string' OR (v_leg ->> 'to') !~ c_id_pattern
               OR jsonb_typeof(v_leg -> 'amount') IS DISTINCT FROM 'string' OR (v_leg ->> 'amount') !~ c_amount_pattern
               OR (v_leg ->> 'amount')::NUMERIC <= 0 THEN
                RAISE EXCEPTION 'request_operation: every leg must be {to, amount} with a wallet id and a positive amount'
                    USING ERRCODE = '22023';
            END IF;
            IF (v_leg ->> 'to') = v_from OR (v_leg ->> 'to') = ANY (v_leg_to) THEN
                RAISE EXCEPTION 'request_operation: a split pays each wallet once, never its source' USING ERRCODE = '22023';
            END IF;
            v_leg_to := v_leg_to || (v_leg ->> 'to');
            v_legs := v_legs || (v_leg ->> 'to') || ((v_leg ->> 'amount')::NUMERIC::TEXT);
            v_total := v_total + (v_leg ->> 'amount')::NUMERIC;
        END LOOP;
        IF v_total > 9223372036854775807 THEN
            RAISE EXCEPTION 'request_operation: the legs'' total is too large' USING ERRCODE = '22023';
        END IF;
        v_amount := v_total::BIGINT;
        v_lines := ARRAY['v2', 'split', v_from, coalesce(v_currency, '')] || v_legs;
    END IF;
    v_hash := encode(sha256(convert_to(array_to_string(v_lines, E'\n'), 'UTF8')), 'hex');

    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || v_op, 0));
    SELECT t.request_hash::TEXT, t.created_at INTO v_existing, v_decided
      FROM transfers t WHERE t.operation_id = v_op;
    INSERT INTO transfer_requests (operation_id, request_hash, kind, body, from_wallet, to_wallet, amount, currency,
                                   decided_at)
    VALUES (v_op, v_hash, v_kind, p_body, v_from, CASE WHEN v_kind = 'hold' THEN v_to END, v_amount, v_currency, v_decided)
    ON CONFLICT (operation_id) DO NOTHING;
    IF FOUND THEN
        IF v_existing IS NOT NULL AND v_existing <> v_hash THEN
            RAISE EXCEPTION 'conflict: operation % was decided with another body', v_op USING ERRCODE = '23505';
        END IF;
        RETURN CASE WHEN v_existing IS NULL THEN 'requested' ELSE 'duplicate' END;
    END IF;
    SELECT q.request_hash::TEXT INTO v_existing FROM transfer_requests q WHERE q.operation_id = v_op;
    IF v_existing <> v_hash THEN
        RAISE EXCEPTION 'conflict: operation % was requested with another body', v_op USING ERRCODE = '23505';
    END IF;
    RETURN 'duplicate';
END;
$$;
REVOKE EXECUTE ON FUNCTION "request_operation"(JSONB, BIGINT) FROM PUBLIC;

-- The give-up, as in the front-door-edges migration; its event now says which operation it was
-- and carries a payment request's body.
CREATE OR REPLACE FUNCTION "record_transfer_given_up"(
    p_operation_id TEXT,
    p_request_hash TEXT,
    p_reason       TEXT,
    p_send_count   INTEGER DEFAULT NULL
) RETURNS BOOLEAN
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_reason TEXT := left(coalesce(p_reason, 'no reason given'), 500);
BEGIN
    IF p_operation_id IS NULL OR p_request_hash IS NULL OR p_request_hash !~ '^[0-9a-f]{64}$' THEN
        RAISE EXCEPTION 'record_transfer_given_up: an operation and the 64-hex-digit hash of its body must be given'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
    IF EXISTS (SELECT 1 FROM transfers t WHERE t.operation_id = p_operation_id) THEN
        RETURN FALSE;
    END IF;
    WITH parked AS (
        UPDATE transfer_requests q
           SET given_up_at = clock_timestamp(), give_up_count = q.give_up_count + 1, give_up_reason = v_reason
         WHERE q.operation_id = p_operation_id AND q.decided_at IS NULL AND q.given_up_at IS NULL
           AND q.request_hash = p_request_hash AND (p_send_count IS NULL OR q.send_count = p_send_count)
        RETURNING q.operation_id, q.kind, q.body, q.from_wallet, q.to_wallet, q.amount, q.currency
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, from_wallet, to_wallet, amount, currency, detail)
    SELECT p.operation_id, 'given_up', v_reason, p.kind, p.from_wallet, p.to_wallet, p.amount, p.currency, p.body
      FROM parked p;
    RETURN FOUND;
END;
$$;

-- The sequencer, as in the front-door-edges migration, carrying the new columns.
CREATE OR REPLACE FUNCTION "outcome_feed_sequence"(p_limit INTEGER DEFAULT 10000) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_moved INTEGER;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outcome_feed_sequence: runs only in READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = '25000',
                  HINT = 'call it in a statement of its own, or set default_transaction_isolation to read committed for the role';
    END IF;
    IF NOT pg_try_advisory_xact_lock(hashtextextended('outcome_feed:sequencer', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM outcome_pending p
         WHERE p.ctid = ANY (ARRAY(SELECT ctid FROM outcome_pending LIMIT greatest(1, least(p_limit, 100000))))
        RETURNING p.*
    ), base AS (
        SELECT coalesce(max(e.position), 0) AS last FROM outcome_events e
    )
    INSERT INTO outcome_events (position, operation_id, kind, reason, from_wallet, to_wallet, amount, currency, decided_at,
                                operation, original_id, detail)
    SELECT b.last + row_number() OVER (ORDER BY m.id), m.operation_id, m.kind, m.reason, m.from_wallet, m.to_wallet,
           m.amount, m.currency, m.decided_at, m.operation, m.original_id, m.detail
      FROM moved m CROSS JOIN base b;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END;
$$;

-- Reading the feed, as in the front-door-edges migration, with the new columns last (a reader
-- that names its columns reads on unchanged). The return type changes, so the function is made
-- again and its readers are granted it again.
CREATE TEMPORARY TABLE "payments_feed_readers" AS
    SELECT DISTINCT a.grantee::regrole::text AS grantee
      FROM pg_proc p, aclexplode(p.proacl) a
     WHERE p.oid = 'outcome_events_after(bigint, integer)'::regprocedure
       AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0;
DROP FUNCTION "outcome_events_after"(BIGINT, INTEGER);
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
    decided_at     TIMESTAMPTZ,
    operation      TEXT,
    original_id    TEXT,
    detail         JSONB
)
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_first BIGINT;
BEGIN
    IF p_after IS NULL OR p_after < 0 OR p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'outcome_events_after: position must be 0 or more and the limit from 1 to 10000'
            USING ERRCODE = '22023';
    END IF;
    SELECT min(e.position) INTO v_first FROM outcome_events e;
    IF v_first IS NOT NULL AND p_after < v_first - 1 THEN
        RAISE EXCEPTION 'outcome_events_after: positions before % were pruned; position % is gone', v_first, p_after + 1
            USING ERRCODE = 'FT001',
                  DETAIL = format('first kept position: %s', v_first),
                  HINT = format('read after %s to start at the first event kept', v_first - 1);
    END IF;
    RETURN QUERY
        SELECT e.position, e.operation_id, e.kind, e.reason, e.from_wallet, e.to_wallet, e.amount,
               e.currency::TEXT, e.decided_at, e.operation, e.original_id, e.detail
          FROM outcome_events e
         WHERE e.position > p_after
         ORDER BY e.position
         LIMIT p_limit;
END;
$$;
REVOKE EXECUTE ON FUNCTION "outcome_events_after"(BIGINT, INTEGER) FROM PUBLIC;

DO $$
DECLARE
    v_grantee TEXT;
BEGIN
    EXECUTE format('ALTER FUNCTION %I.apply_payments(text[], text[], text[], text[], text[], bigint[], text[], text[], '
                   'bigint[], timestamptz[], jsonb[], bigint[], uuid[], bigint) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[]) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.holds_expire(integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.request_operation(jsonb, bigint) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    -- CREATE OR REPLACE reset these two to SECURITY INVOKER; they run as their owner, as before.
    EXECUTE format('ALTER FUNCTION %I.record_transfer_given_up(text, text, text, integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.outcome_feed_sequence(integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    EXECUTE format('ALTER FUNCTION %I.outcome_events_after(bigint, integer) '
                   'SECURITY DEFINER SET search_path = pg_catalog, %I, pg_temp', current_schema(), current_schema());
    -- Who decides transfers decides payments and sweeps holds; who requests transfers requests
    -- payments; who read the feed reads it still.
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'apply_transfers(text[], text[], text[], text[], bigint[], text[], bigint[], uuid[])'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION apply_payments(text[], text[], text[], text[], text[], bigint[], '
                       'text[], text[], bigint[], timestamptz[], jsonb[], bigint[], uuid[], bigint) TO %s', v_grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION holds_expire(integer) TO %s', v_grantee);
    END LOOP;
    FOR v_grantee IN
        SELECT DISTINCT a.grantee::regrole::text FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = 'request_transfer(text, text, text, bigint, text)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION request_operation(jsonb, bigint) TO %s', v_grantee);
    END LOOP;
    FOR v_grantee IN SELECT r.grantee FROM payments_feed_readers r LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION outcome_events_after(bigint, integer) TO %s', v_grantee);
    END LOOP;
END
$$;
DROP TABLE "payments_feed_readers";
