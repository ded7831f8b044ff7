// The OpenTelemetry SDK of a process that traces, loaded only then (tracing.ts imports this file
// on demand): a tracer provider with the OTLP/HTTP exporter behind a batch processor, the W3C
// trace-context propagator, the async-hooks context manager, and the pg and ioredis
// instrumentations. Those two make spans only under a parent span (requireParentSpan), so the
// polling that runs outside any transfer (health probes, the feed sequencer, the hold sweeper,
// the counter publisher, the relay's claims) exports nothing; the sampler drops the spans BullMQ
// opens for its own background work (a fetch that found no job, the stalled-job check, a worker's
// pause and close) when they have no parent.
import { createRequire } from 'node:module';
import { type Attributes, type Context, context, type Link, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  SamplingDecision,
  type SamplingResult,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { BullMQOtel } from 'bullmq-otel';
import type { TracingSdk } from './tracing.ts';
import type { TracingEnv } from './tracing-env.ts';

/**
 * BullMQ operations that run on their own, outside any job: its polling (a fetch, the stalled-job
 * check, a rate limit's wait) and a worker's life (pause, resume, close). A span of one of these
 * without a parent is dropped; with a parent (a fetch that brought a job: its context comes with
 * the job) it is kept.
 */
const BULLMQ_BACKGROUND_SPAN =
  /^(getNextJob|moveStalledJobsToWait|startStalledCheckTimer|rateLimit|delay|pause|resume|close)( |$)/;

/** Drops BullMQ's parentless background spans, and asks `inner` about every other span. */
export class QuietPollingSampler implements Sampler {
  constructor(private readonly inner: Sampler) {}

  shouldSample(
    ctx: Context,
    traceId: string,
    spanName: string,
    spanKind: SpanKind,
    attributes: Attributes,
    links: Link[],
  ): SamplingResult {
    if (spanKind === SpanKind.INTERNAL && trace.getSpanContext(ctx) === undefined) {
      if (BULLMQ_BACKGROUND_SPAN.test(spanName)) return { decision: SamplingDecision.NOT_RECORD };
    }
    return this.inner.shouldSample(ctx, traceId, spanName, spanKind, attributes, links);
  }

  toString(): string {
    return `QuietPolling{${this.inner.toString()}}`;
  }
}

function samplerOf(found: TracingEnv & { on: true }): Sampler {
  const root = (): Sampler => {
    switch (found.sampler) {
      case 'always_on':
      case 'parentbased_always_on':
        return new AlwaysOnSampler();
      case 'always_off':
      case 'parentbased_always_off':
        return new AlwaysOffSampler();
      default:
        return new TraceIdRatioBasedSampler(found.ratio);
    }
  };
  const inner = found.sampler.startsWith('parentbased_') ? new ParentBasedSampler({ root: root() }) : root();
  return new QuietPollingSampler(inner);
}

export function startTracingSdk(serviceName: string, found: TracingEnv & { on: true }): TracingSdk {
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, name the service over our default.
  const resource = resourceFromAttributes({ 'service.name': serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const provider = new TracerProvider({
    resource,
    sampler: samplerOf(found),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: found.tracesUrl }) })],
  });
  const contextManager = new AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);

  const instrumentations = [
    new PgInstrumentation({ requireParentSpan: true }),
    new IORedisInstrumentation({ requireParentSpan: true }),
  ];
  for (const instrumentation of instrumentations) {
    instrumentation.setTracerProvider(provider);
    instrumentation.enable();
  }
  // The instrumentations patch a module when it is require()d. The product imports pg and ioredis
  // as ES modules, which Node loads without require(); requiring them here, before anything else
  // loads them, patches the very objects (prototypes) those imports then get.
  const require = createRequire(import.meta.url);
  for (const name of ['pg', 'pg-pool', 'ioredis']) require(name);

  return {
    telemetry: new BullMQOtel({ tracerName: 'bullmq' }),
    flush: () => provider.forceFlush(),
    async shutdown() {
      for (const instrumentation of instrumentations) instrumentation.disable();
      await provider.shutdown();
    },
  };
}
