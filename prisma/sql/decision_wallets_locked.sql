-- The wallets named, row-locked in id order (one global order: two decisions that cross wait for
-- each other, see the late payees in decision_state_read() for the one exception), as parallel
-- arrays sorted by id, each wallet's credit limit and status last. A wallet without a row is simply absent.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_wallets_locked"(
    p_ids          TEXT[],
    OUT w_id       TEXT[],
    OUT w_currency TEXT[],
    OUT w_balance  BIGINT[],
    OUT w_held     BIGINT[],
    OUT w_fence    BIGINT[],
    OUT w_lease    UUID[],
    OUT w_limit    BIGINT[],
    OUT w_status   TEXT[]
)
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    SELECT coalesce(array_agg(l.id ORDER BY l.id), '{}'), coalesce(array_agg(l.currency::TEXT ORDER BY l.id), '{}'),
           coalesce(array_agg(l.balance ORDER BY l.id), '{}'), coalesce(array_agg(l.held ORDER BY l.id), '{}'),
           coalesce(array_agg(l.last_fence ORDER BY l.id), '{}'), coalesce(array_agg(l.last_lease ORDER BY l.id), '{}'),
           coalesce(array_agg(l.credit_limit ORDER BY l.id), '{}'), coalesce(array_agg(l.status ORDER BY l.id), '{}')
      INTO w_id, w_currency, w_balance, w_held, w_fence, w_lease, w_limit, w_status
      FROM (SELECT w.id, w.currency, w.balance, w.held, w.last_fence, w.last_lease, w.credit_limit, w.status FROM wallets w
             WHERE w.id = ANY (p_ids) ORDER BY w.id FOR UPDATE) l;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_wallets_locked(text[]) FROM PUBLIC;
