-- What a batch's decisions did, written once per table: the wallets opened (those after the
-- p_wallets_read read; one another decision inserted meanwhile fails the batch with 40001, which
-- the worker retries, and the retry answers wallet_exists), then every row read that moved or had
-- its fence, credit limit or status changed, or nothing commits (CHECK (balance >= -credit_limit),
-- CHECK (held >= 0) and a closed wallet's CHECK (balance = 0 AND held = 0) stay the last line of
-- defence), the ledger in decision order (a negative amount
-- is a debit; each entry with its account's balance after it and, on a wallet's entry, the credit
-- limit in force then, stamped with the clock once every lock is held, so a wallet's entries
-- ascend in time as they do in id), the holds placed (after p_holds_read in
-- p_holds) and those that ended, and the legs of the splits applied (after p_legs_read in p_legs).
-- The records and events follow (decision_recorded()). Answers how many wallet rows it wrote.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_written"(
    p_wallet_ids      TEXT[],
    p_currencies      TEXT[],
    p_balances        BIGINT[],
    p_helds           BIGINT[],
    p_fences          BIGINT[],
    p_leases          UUID[],
    p_limits          BIGINT[],
    p_statuses        TEXT[],
    p_touched         BOOLEAN[],
    p_wallets_read    INTEGER,
    p_entry_ops       TEXT[],
    p_entry_wallets   TEXT[],
    p_entry_amounts   BIGINT[],
    p_entry_balances  BIGINT[],
    p_entry_limits    BIGINT[],
    p_entry_fences    BIGINT[],
    p_entry_leases    UUID[],
    p_holds           holds[],
    p_holds_read      INTEGER,
    p_holds_ended     BOOLEAN[],
    p_legs            split_legs[],
    p_legs_read       INTEGER
) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_touched INTEGER := 0;
    v_opened  INTEGER := cardinality(p_wallet_ids) - p_wallets_read;
    v_rows    INTEGER;
BEGIN
    IF v_opened > 0 THEN
        INSERT INTO wallets (id, currency, balance, held, credit_limit, status, last_fence, last_lease)
        SELECT u.id, u.currency, u.balance, u.held, u.credit_limit, u.status, u.last_fence, u.last_lease
          FROM unnest(p_wallet_ids[p_wallets_read + 1:], p_currencies[p_wallets_read + 1:],
                      p_balances[p_wallets_read + 1:], p_helds[p_wallets_read + 1:], p_limits[p_wallets_read + 1:],
                      p_statuses[p_wallets_read + 1:], p_fences[p_wallets_read + 1:], p_leases[p_wallets_read + 1:])
               AS u(id, currency, balance, held, credit_limit, status, last_fence, last_lease)
        ON CONFLICT (id) DO NOTHING;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_opened THEN
            RAISE EXCEPTION 'decision: % of the % wallets this batch opens were opened by another decision meanwhile',
                v_opened - v_rows, v_opened USING ERRCODE = '40001';
        END IF;
    END IF;
    -- A settlement account (`$settlement:`) has no row: its entries are all there is of it.
    FOR v_rows IN 1 .. p_wallets_read LOOP
        IF p_touched[v_rows] AND p_wallet_ids[v_rows] NOT LIKE '$%' THEN v_touched := v_touched + 1; END IF;
    END LOOP;
    IF v_touched > 0 THEN
        UPDATE wallets w
           SET balance = u.balance, held = u.held, last_fence = u.last_fence, last_lease = u.last_lease,
               credit_limit = u.credit_limit, status = u.status, updated_at = CURRENT_TIMESTAMP
          FROM unnest(p_wallet_ids[1:p_wallets_read], p_balances, p_helds, p_fences, p_leases, p_limits, p_statuses,
                      p_touched[1:p_wallets_read])
               AS u(id, balance, held, last_fence, last_lease, credit_limit, status, touched)
         WHERE w.id = u.id AND u.touched;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        IF v_rows <> v_touched THEN
            -- Unreachable while the rows are locked; a credit that misses must never let the
            -- debit commit alone.
            RAISE EXCEPTION 'decision: % wallets moved but % rows were written', v_touched, v_rows
                USING ERRCODE = 'XX000';
        END IF;
    END IF;
    IF cardinality(p_entry_ops) > 0 THEN
        INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount, balance_after, credit_limit, fence, lease,
                                    created_at)
        SELECT e.op, e.wallet, CASE WHEN e.amount < 0 THEN 'debit' ELSE 'credit' END, e.amount, e.balance, e.credit_limit,
               e.fence, e.lease, clock_timestamp()
          FROM unnest(p_entry_ops, p_entry_wallets, p_entry_amounts, p_entry_balances, p_entry_limits, p_entry_fences,
                      p_entry_leases)
               WITH ORDINALITY AS e(op, wallet, amount, balance, credit_limit, fence, lease, n)
         ORDER BY e.n;
    END IF;
    IF cardinality(p_holds) > p_holds_read THEN
        INSERT INTO holds (hold_id, from_wallet, to_wallet, amount, currency, expires_at, state, captured, released,
                           ended_by, ended_at)
        SELECT (x).hold_id, (x).from_wallet, (x).to_wallet, (x).amount, (x).currency, (x).expires_at, (x).state,
               (x).captured, (x).released, (x).ended_by, (x).ended_at
          FROM unnest(p_holds[p_holds_read + 1:]) x;
    END IF;
    IF p_holds_read > 0 AND TRUE = ANY (p_holds_ended[1:p_holds_read]) THEN
        UPDATE holds h
           SET state = (x).state, captured = (x).captured, released = (x).released, ended_by = (x).ended_by,
               ended_at = (x).ended_at
          FROM unnest(ARRAY(SELECT p_holds[i] FROM generate_subscripts(p_holds, 1) i
                             WHERE i <= p_holds_read AND p_holds_ended[i])) x
         WHERE h.hold_id = (x).hold_id;
    END IF;
    IF cardinality(p_legs) > p_legs_read THEN
        INSERT INTO split_legs (operation_id, leg, to_wallet, amount)
        SELECT (x).operation_id, (x).leg, (x).to_wallet, (x).amount FROM unnest(p_legs[p_legs_read + 1:]) x;
    END IF;
    RETURN v_touched;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_written(text[],text[],bigint[],bigint[],bigint[],uuid[],bigint[],text[],boolean[],integer,text[],text[],bigint[],bigint[],bigint[],bigint[],uuid[],holds[],integer,boolean[],split_legs[],integer) FROM PUBLIC;
