// A process's tracing: started once at process start by the worker and the relay (before they
// load pg and ioredis, so their instrumentations can patch them) and flushed at their exit. Off
// unless OpenTelemetry's environment names an endpoint (tracing-env.ts); off, the SDK is never
// loaded (tracing-sdk.ts is imported on demand) and the product's span helpers (spans.ts) return
// at their first line. The product itself speaks only @opentelemetry/api.
import { type TracingEnv, tracingEnvOf } from './tracing-env.ts';

/**
 * BullMQ's `telemetry` option (its `Telemetry`), opaque here: this module sits under the intake,
 * which never loads BullMQ, not even for a type (the `intake-entry-reaches-queue` import rule).
 * The worker, which loads BullMQ, gives it its type back (src/queue/transfer-worker.ts).
 */
export type QueueTelemetry = object;

/** What a started SDK hands back: BullMQ's telemetry option, and the flush at exit. */
export interface TracingSdk {
  readonly telemetry: QueueTelemetry;
  /** Sends the spans ended so far. */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The name the product's own spans are made under (spans.ts). */
export const TRACER_NAME = 'fenced-transfers';

/** How long the exit waits for the last spans to reach the collector. */
export const TRACING_SHUTDOWN_TIMEOUT_MS = 5_000;

let sdk: TracingSdk | null = null;

/** Whether this process traces (its SDK started). Cheap: the product asks it before any span. */
export function tracingOn(): boolean {
  return sdk !== null;
}

/** BullMQ's `telemetry` option when this process traces, else undefined (BullMQ then traces nothing). */
export function bullmqTelemetry(): QueueTelemetry | undefined {
  return sdk?.telemetry;
}

/**
 * Starts tracing if the environment asks for it, as `serviceName` unless OTEL_SERVICE_NAME names
 * the service; answers what it found. Once per process.
 */
export async function startTracing(
  serviceName: string,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<TracingEnv> {
  const found = tracingEnvOf(env);
  if (!found.on || sdk !== null) return found;
  const { startTracingSdk } = await import('./tracing-sdk.ts');
  sdk = startTracingSdk(serviceName, found);
  return found;
}

/** Sends the spans ended so far (a no-op when this process does not trace). */
export async function flushTracing(): Promise<void> {
  await sdk?.flush();
}

/** Sends the spans still buffered and stops the SDK; at most TRACING_SHUTDOWN_TIMEOUT_MS. */
export async function stopTracing(): Promise<void> {
  const started = sdk;
  if (started === null) return;
  sdk = null;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    started.shutdown().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, TRACING_SHUTDOWN_TIMEOUT_MS);
    }),
  ]);
  clearTimeout(timer);
}
