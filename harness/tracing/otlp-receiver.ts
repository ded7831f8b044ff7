// An OTLP/HTTP receiver for spans, in the process that starts it: what a collector (Jaeger's
// OTLP port, 4318) would be to the worker and the relay, for the tests and the trace picture.
// It takes POST /v1/traces in OTLP's JSON encoding (what @opentelemetry/exporter-trace-otlp-http
// sends), answers 200, and keeps the spans, decoded to ExportedSpan; anything else is refused.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** OTLP's span kinds, by their number in the protocol. */
export const SPAN_KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'] as const;
export type ExportedSpanKind = (typeof SPAN_KINDS)[number];

export type AttributeValue = string | number | boolean;

/** One span as a collector got it. Ids in hex; times in nanoseconds since the epoch. */
export interface ExportedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** null for a span without a parent (the root of its trace, or a span that started one). */
  readonly parentSpanId: string | null;
  readonly name: string;
  readonly kind: ExportedSpanKind;
  /** The resource's service.name: which process made it. */
  readonly service: string;
  /** The instrumentation scope (tracer) that made it: fenced-transfers, bullmq, an instrumentation. */
  readonly scope: string;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
  readonly events: readonly string[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
}

/** The body of one OTLP/HTTP JSON export request is at most this big. */
const EXPORT_BYTES_MAX = 16 * 1024 * 1024;

interface JsonAnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: JsonKeyValue[];
  links?: { traceId: string; spanId: string }[];
  events?: { name: string }[];
  status?: { code?: number };
}
interface JsonExport {
  resourceSpans?: {
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: JsonSpan[] }[];
  }[];
}

function valueOfAttribute(v: JsonAnyValue | undefined): AttributeValue {
  if (v === undefined) return '';
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
}

function attributesOf(list: readonly JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, valueOfAttribute(kv.value)]));
}

/** The spans of one OTLP/HTTP JSON export request. */
export function decodeOtlpJson(body: JsonExport): ExportedSpan[] {
  const out: ExportedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? 'unknown');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ? s.parentSpanId : null,
          name: s.name,
          kind: SPAN_KINDS[s.kind ?? 0] ?? 'unspecified',
          service,
          scope: ss.scope?.name ?? '',
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
          events: (s.events ?? []).map((e) => e.name),
          statusCode: s.status?.code ?? 0,
        });
      }
    }
  }
  return out;
}

/** Spans as JSON (the times as decimal strings), for a file the trace picture reads. */
export function spansToJson(spans: readonly ExportedSpan[]): string {
  return `${JSON.stringify(
    spans.map((s) => ({ ...s, startNs: s.startNs.toString(), endNs: s.endNs.toString() })),
    null,
    1,
  )}\n`;
}

/** The spans of a file spansToJson() wrote. */
export function spansFromJson(text: string): ExportedSpan[] {
  return (JSON.parse(text) as (Omit<ExportedSpan, 'startNs' | 'endNs'> & { startNs: string; endNs: string })[]).map(
    (s) => ({ ...s, startNs: BigInt(s.startNs), endNs: BigInt(s.endNs) }),
  );
}

export interface OtlpReceiverOptions {
  /** Keep the spans (default), or only count them (a bench's sink: millions of spans). */
  readonly keep?: boolean;
}

export class OtlpReceiver {
  private readonly received: ExportedSpan[] = [];
  /** Spans received, kept or not. */
  count = 0;
  /** Requests refused (not POST /v1/traces in JSON, or a body that does not decode). */
  refused = 0;

  private constructor(
    private readonly server: Server,
    /** The base endpoint, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter adds /v1/traces). */
    readonly endpoint: string,
    private readonly keep: boolean,
  ) {}

  static async start(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | null = null;
    const server = createServer((req, res) => {
      void receiver?.handle(req, res);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${port}`, options.keep ?? true);
    return receiver;
  }

  /** Every span received so far. */
  get spans(): readonly ExportedSpan[] {
    return this.received;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let bytes = 0;
    for await (const chunk of req) {
      bytes += (chunk as Buffer).length;
      if (bytes > EXPORT_BYTES_MAX) break;
      chunks.push(chunk as Buffer);
    }
    const json = (req.headers['content-type'] ?? '').includes('application/json');
    if (req.method !== 'POST' || req.url !== '/v1/traces' || !json || bytes > EXPORT_BYTES_MAX) {
      this.refused += 1;
      res.writeHead(req.url === '/v1/traces' ? 415 : 404).end();
      return;
    }
    try {
      const spans = decodeOtlpJson(JSON.parse(Buffer.concat(chunks).toString('utf8')) as JsonExport);
      this.count += spans.length;
      if (this.keep) this.received.push(...spans);
    } catch {
      this.refused += 1;
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
