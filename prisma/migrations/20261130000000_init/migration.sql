-- Fenced transfers: wallets, the idempotency record, the double-entry ledger, and the
-- one-round-trip transfer decision apply_transfer(). See DESIGN.md, "The database decision".

CREATE TABLE "wallets" (
    "id"         TEXT        NOT NULL,
    "currency"   CHAR(3)     NOT NULL,
    "balance"    BIGINT      NOT NULL DEFAULT 0,
    "last_fence" BIGINT      NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "wallets_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "wallets_balance_non_negative" CHECK ("balance" >= 0),
    CONSTRAINT "wallets_last_fence_non_negative" CHECK ("last_fence" >= 0),
    CONSTRAINT "wallets_currency_format" CHECK ("currency" ~ '^[A-Z]{3}$')
);

CREATE TABLE "transfers" (
    "operation_id" TEXT        NOT NULL,
    "request_hash" CHAR(64)    NOT NULL,
    "from_wallet"  TEXT        NOT NULL,
    "to_wallet"    TEXT        NOT NULL,
    "amount"       BIGINT      NOT NULL,
    "currency"     CHAR(3),
    "status"       TEXT        NOT NULL,
    "reason"       TEXT,
    "fence"        BIGINT      NOT NULL,
    "created_at"   TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "transfers_pkey" PRIMARY KEY ("operation_id"),
    CONSTRAINT "transfers_amount_positive" CHECK ("amount" > 0),
    CONSTRAINT "transfers_status_known" CHECK ("status" IN ('applied', 'rejected')),
    CONSTRAINT "transfers_reason_matches_status" CHECK (
        ("status" = 'applied' AND "reason" IS NULL) OR
        ("status" = 'rejected' AND "reason" IN
            ('insufficient_funds', 'unknown_wallet', 'currency_mismatch', 'same_wallet', 'invalid_request'))
    )
);

CREATE TABLE "ledger_entries" (
    "id"           BIGSERIAL   NOT NULL,
    "operation_id" TEXT        NOT NULL,
    "wallet_id"    TEXT        NOT NULL,
    "kind"         TEXT        NOT NULL,
    "amount"       BIGINT      NOT NULL,
    "fence"        BIGINT,
    "created_at"   TIMESTAMPTZ(6) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "ledger_entries_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "ledger_entries_kind_known" CHECK ("kind" IN ('opening', 'funding', 'debit', 'credit')),
    CONSTRAINT "ledger_entries_sign_matches_kind" CHECK (
        ("kind" IN ('opening', 'credit') AND "amount" > 0) OR
        ("kind" IN ('funding', 'debit') AND "amount" < 0)
    )
);

CREATE INDEX "ledger_entries_wallet_id_idx" ON "ledger_entries" ("wallet_id");
CREATE INDEX "ledger_entries_operation_id_idx" ON "ledger_entries" ("operation_id");

-- The whole transfer decision in one statement, so a transfer costs one round trip and one
-- commit. Returns exactly one row:
--   outcome       'applied' | 'rejected' | 'duplicate' | 'conflict' | 'stale_fence'
--   status        the stored terminal status ('applied' | 'rejected'); NULL for stale_fence
--   reason        the stored rejection reason, when status = 'rejected'
--   fence         the fence stored with the operation (NULL for stale_fence)
--   wallet_fence  the source wallet's last_fence after the call (what a stale holder lost to)
--
-- p_check_idempotency / p_check_fence exist only for the chaos harness's negative controls
-- (the worker refuses them unless explicitly allowed); production calls pass TRUE, TRUE.
CREATE FUNCTION "apply_transfer"(
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
DECLARE
    v_existing  RECORD;
    v_wallet    RECORD;
    v_from      RECORD;
    v_to        RECORD;
    v_found_from BOOLEAN := FALSE;
    v_found_to   BOOLEAN := FALSE;
    v_reason    TEXT := NULL;
    v_rows      INTEGER;
BEGIN
    IF p_amount IS NULL OR p_amount <= 0 OR p_fence IS NULL OR p_fence < 1 THEN
        RAISE EXCEPTION 'apply_transfer: amount and fence must be positive'
            USING ERRCODE = '22023';
    END IF;

    IF p_check_idempotency THEN
        -- Twins of one operation queue here, so the second one sees the first one's row
        -- (each statement of a VOLATILE function takes a fresh snapshot) instead of racing
        -- it into a unique violation.
        PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));
        SELECT t.request_hash, t.status, t.reason, t.fence INTO v_existing
          FROM transfers t WHERE t.operation_id = p_operation_id;
        IF FOUND THEN
            RETURN QUERY SELECT
                CASE WHEN v_existing.request_hash = p_request_hash THEN 'duplicate' ELSE 'conflict' END,
                v_existing.status, v_existing.reason, v_existing.fence, NULL::BIGINT;
            RETURN;
        END IF;
    END IF;

    -- Lock both rows in one fixed order (by id), so A->B and B->A cannot deadlock.
    FOR v_wallet IN
        SELECT w.id, w.currency, w.balance, w.last_fence
          FROM wallets w WHERE w.id IN (p_from, p_to) ORDER BY w.id FOR UPDATE
    LOOP
        IF v_wallet.id = p_from THEN v_from := v_wallet; v_found_from := TRUE; END IF;
        IF v_wallet.id = p_to THEN v_to := v_wallet; v_found_to := TRUE; END IF;
    END LOOP;

    IF v_found_from THEN
        -- The fence guards the source wallet only. The destination's last_fence comes from
        -- another wallet's counter and is never compared with our token.
        IF p_check_fence AND v_from.last_fence > p_fence THEN
            RETURN QUERY SELECT 'stale_fence'::TEXT, NULL::TEXT, NULL::TEXT, NULL::BIGINT, v_from.last_fence;
            RETURN;
        END IF;
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
            -- Unreachable while the row is locked above; a credit that misses must never
            -- let the debit commit alone.
            RAISE EXCEPTION 'apply_transfer: credit of % touched % rows', p_to, v_rows
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

    RETURN QUERY SELECT
        CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END,
        CASE WHEN v_reason IS NULL THEN 'applied' ELSE 'rejected' END,
        v_reason, p_fence,
        CASE WHEN v_found_from THEN GREATEST(v_from.last_fence, p_fence) ELSE NULL END;
END;
$$;
