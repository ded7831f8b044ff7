-- The records of a batch's decisions, and in the same statement what they decide: the intake's
-- request (when the operation came through it) is marked decided, and one outcome event per record
-- joins the feed's pending events (a request that asked for another body gets a conflict event).
-- Element i was decided here when p_statuses[i] is set; what it recorded as its payee and amount is
-- the decision's (p_credited, p_recorded_amounts), its metadata the message's (p_metadata[i], kept
-- in the record and the event; p_metadata NULL: none has any). Then an `expired` event for each hold released
-- at its expiry here (p_expired), and the requests of operations answered from a record decided
-- before this batch (p_closed_ops, with that record's hash) are closed the same way. Answers how
-- many records' events it appended.
--
-- The records are a plain INSERT: every operation of the batch is under its advisory lock, none had
-- a record when the locks were held, and a twin inside the batch answered from the record decided
-- before it, so each row inserted here is new. A row that is there now was written by someone who
-- skipped the lock: the unique violation rolls back the whole batch, the money it moved included.
-- ON CONFLICT DO NOTHING would have kept that money unrecorded, and pays a speculative insertion
-- per record.
-- Called by decide_batch() only, under its settings (index lookups, generic plans).
CREATE OR REPLACE FUNCTION "decision_recorded"(
    p_kinds            TEXT[],
    p_operation_ids    TEXT[],
    p_request_hashes   TEXT[],
    p_froms            TEXT[],
    p_currencies       TEXT[],
    p_refs             TEXT[],
    p_fences           BIGINT[],
    p_lease_ids        UUID[],
    p_statuses         TEXT[],
    p_reasons          TEXT[],
    p_credited         TEXT[],
    p_recorded_amounts BIGINT[],
    p_details          JSONB[],
    p_expired          TEXT[],
    p_closed_ops       TEXT[],
    p_closed_hashes    TEXT[],
    p_metadata         JSONB[]
) RETURNS INTEGER
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_events INTEGER;
BEGIN
    IF p_metadata IS NOT NULL AND cardinality(p_metadata) <> cardinality(p_statuses) THEN
        RAISE EXCEPTION 'decision: % metadata for % operations', cardinality(p_metadata), cardinality(p_statuses)
            USING ERRCODE = '22023';
    END IF;
    WITH recorded AS (
        SELECT p_operation_ids[i] AS operation_id, p_request_hashes[i] AS request_hash, p_kinds[i] AS kind,
               CASE WHEN p_kinds[i] IN ('capture', 'void', 'refund') THEN p_refs[i] END AS original,
               CASE WHEN p_kinds[i] IN ('deposit', 'withdrawal') THEN p_refs[i] END AS reference,
               p_froms[i] AS from_wallet, p_credited[i] AS to_wallet, p_recorded_amounts[i] AS amount,
               p_currencies[i] AS currency, p_statuses[i] AS status, p_reasons[i] AS reason, p_fences[i] AS fence,
               p_lease_ids[i] AS lease, p_details[i] AS detail, p_metadata[i] AS metadata, i AS element
          FROM generate_subscripts(p_statuses, 1) i
         WHERE p_statuses[i] IS NOT NULL
    ), inserted AS (
        INSERT INTO transfers (operation_id, request_hash, kind, original_id, reference, from_wallet, to_wallet, amount,
                               currency, status, reason, fence, lease, metadata)
        SELECT d.operation_id, d.request_hash, d.kind, d.original, d.reference, d.from_wallet, d.to_wallet, d.amount,
               d.currency, d.status, d.reason, d.fence, d.lease, d.metadata
          FROM recorded d
    ), requested AS (
        UPDATE transfer_requests q SET decided_at = clock_timestamp()
          FROM recorded d
         WHERE q.operation_id = d.operation_id AND q.decided_at IS NULL
        RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                  q.amount, q.currency, d.request_hash AS decided_hash
    )
    INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                 currency, detail, metadata)
    SELECT d.operation_id, d.status, d.reason, d.kind, d.original, d.from_wallet, d.to_wallet, d.amount, d.currency,
           d.detail, d.metadata
      FROM recorded d
    UNION ALL
    SELECT q.operation_id, 'conflict', NULL, q.kind, NULL, q.from_wallet, q.to_wallet, q.amount, q.currency, q.body, NULL
      FROM requested q WHERE q.request_hash <> q.decided_hash;
    GET DIAGNOSTICS v_events = ROW_COUNT;

    IF cardinality(p_expired) > 0 THEN
        -- The release credits the source, as the sweep's does (holds_expire()).
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT h.hold_id, 'expired', NULL, 'hold', NULL, h.from_wallet, h.from_wallet, h.amount, h.currency, NULL
          FROM holds h WHERE h.hold_id = ANY (p_expired);
    END IF;
    -- Requests of operations decided before this batch (through the other door while the request
    -- was open, or a request sent again after its decision) are decided too; one that asked for
    -- another body than the record's gets its conflict event. Only batches with such answers pay.
    IF cardinality(p_closed_ops) > 0 THEN
        WITH closed AS (
            UPDATE transfer_requests q SET decided_at = clock_timestamp()
              FROM (SELECT DISTINCT x.op, x.hash FROM unnest(p_closed_ops, p_closed_hashes) AS x(op, hash)) d
             WHERE q.operation_id = d.op AND q.decided_at IS NULL
            RETURNING q.operation_id, q.request_hash::TEXT AS request_hash, q.kind, q.body, q.from_wallet, q.to_wallet,
                      q.amount, q.currency, d.hash AS decided_hash
        )
        INSERT INTO outcome_pending (operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount,
                                     currency, detail)
        SELECT c.operation_id, 'conflict', NULL, c.kind, NULL, c.from_wallet, c.to_wallet, c.amount, c.currency, c.body
          FROM closed c WHERE c.request_hash <> c.decided_hash;
    END IF;
    RETURN v_events;
END;
$$;

REVOKE EXECUTE ON FUNCTION decision_recorded(text[],text[],text[],text[],text[],text[],bigint[],uuid[],text[],text[],text[],bigint[],jsonb[],text[],text[],text[],jsonb[]) FROM PUBLIC;
