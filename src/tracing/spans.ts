// The product's spans and trace contexts, through @opentelemetry/api only. A transfer's trace
// context travels as a W3C carrier ({ traceparent, tracestate? }): the intake stores the
// producer's with the request (transfer_requests.trace_context), the relay and enqueueTransfer()
// put it on the job as BullMQ's telemetry metadata, and the worker's consumer span (BullMQ's
// `process`) continues it. Every helper here that makes a span returns at once when this process
// does not trace (tracingOn()); the carrier helpers ask the global propagator, which is the
// producer's own SDK in a producer's process and a no-op where no SDK runs.
import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { TRACER_NAME, tracingOn } from './tracing.ts';

export { type Span, SpanKind };

/** A W3C trace context as the intake stores it and BullMQ carries it (its telemetry metadata, as JSON). */
export interface TraceCarrier {
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** The largest carrier the intake stores (transfer_requests_trace_context_bounded). */
export const TRACE_CARRIER_BYTES_MAX = 1024;

/** The carrier of a context (the active one by default), or null when it holds no sampled-or-not span. */
export function traceCarrierOf(ctx: Context = context.active()): TraceCarrier | null {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  const { traceparent, tracestate } = carrier;
  if (typeof traceparent !== 'string' || traceparent === '') return null;
  const out: TraceCarrier = tracestate ? { traceparent, tracestate } : { traceparent };
  return JSON.stringify(out).length <= TRACE_CARRIER_BYTES_MAX ? out : { traceparent };
}

/** A carrier read back (from the database or a job): null when it is not one. */
export function traceCarrierFrom(value: unknown): TraceCarrier | null {
  if (typeof value === 'string') {
    try {
      return traceCarrierFrom(JSON.parse(value));
    } catch {
      return null;
    }
  }
  if (typeof value !== 'object' || value === null) return null;
  const { traceparent, tracestate } = value as Record<string, unknown>;
  if (typeof traceparent !== 'string') return null;
  return typeof tracestate === 'string' ? { traceparent, tracestate } : { traceparent };
}

/** The context a carrier continues (the root context when the propagator reads nothing from it). */
export function contextOfCarrier(carrier: TraceCarrier): Context {
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** BullMQ's job option that makes a job's consumer span a child of `carrier`'s span. */
export function jobTelemetryOf(carrier: TraceCarrier): { metadata: string } {
  return { metadata: JSON.stringify(carrier) };
}

export interface SpanOptions {
  readonly kind?: SpanKind;
  /** Default: the active context. */
  readonly parent?: Context;
  readonly links?: Link[];
}

function tracer() {
  return trace.getTracer(TRACER_NAME);
}

/** A span started by hand (ended by its owner), or null when this process does not trace. */
export function startSpan(name: string, attributes: Attributes, options: SpanOptions = {}): Span | null {
  if (!tracingOn()) return null;
  return tracer().startSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes, ...(options.links ? { links: options.links } : {}) },
    options.parent ?? context.active(),
  );
}

/** Ends a span with the error it failed with (when there is one). */
export function endSpan(span: Span | null, err?: unknown): void {
  if (span === null) return;
  if (err !== undefined) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
  }
  span.end();
}

/**
 * Runs `work` in a span of its own (its child spans, pg's and ioredis's among them, under it), or
 * plainly when this process does not trace.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  work: (span: Span | null) => Promise<T>,
  options: SpanOptions = {},
): Promise<T> {
  const span = startSpan(name, attributes, options);
  if (span === null) return work(null);
  try {
    const value = await context.with(trace.setSpan(options.parent ?? context.active(), span), () => work(span));
    span.end();
    return value;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/** Runs `work` with `span` active (plainly when there is none). */
export function withSpan<T>(span: Span | null, work: () => T): T {
  if (span === null) return work();
  return context.with(trace.setSpan(context.active(), span), work);
}

/** A context (the root one by default) with `span` as its span: what a carrier of that span is made from. */
export function contextWithSpan(span: Span, parent: Context = ROOT_CONTEXT): Context {
  return trace.setSpan(parent, span);
}

/** The span context of a span (for links), or undefined. */
export function spanContextOf(span: Span | null): SpanContext | undefined {
  return span?.spanContext();
}
