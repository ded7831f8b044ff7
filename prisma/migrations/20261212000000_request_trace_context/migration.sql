-- A request's trace context: the W3C `traceparent` (and `tracestate`, when there is one) of the
-- producer's span that requested it, as a JSON object of those two strings, so that the relay
-- that sends the request hands it to the queue and the transfer's trace starts where the
-- producer asked for it. NULL when the producer traces nothing. Bounded: a context is a few
-- dozen characters, never a document.
ALTER TABLE "transfer_requests" ADD COLUMN "trace_context" JSONB;
ALTER TABLE "transfer_requests" ADD CONSTRAINT "transfer_requests_trace_context_bounded"
    CHECK ("trace_context" IS NULL OR (jsonb_typeof("trace_context") = 'object' AND octet_length("trace_context"::text) <= 1024));
