// A batch in the traces (docs/concepts/batching-and-leases.md, "A batch in the traces"): three transfers of three traces
// decided in one batch make one `decide batch` span whose parent is the first member's wait, linked
// to every member's wait, each of which links back to it; the decision's own work runs under the
// batch's span. Spans go through the real SDK and OTLP/HTTP exporter to a receiver in the test.
// Control: a batcher whose items carry no span makes no batch span.
import { context, SpanKind, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ExportedSpan, OtlpReceiver } from '../../harness/tracing/otlp-receiver.ts';
import type { FencedOperation } from '../../src/ledger/apply-payments.ts';
import { DecisionBatcher } from '../../src/ledger/decision-batcher.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import { endSpan, startSpan } from '../../src/tracing/spans.ts';
import { flushTracing, startTracing, stopTracing } from '../../src/tracing/tracing.ts';
import { waitFor } from '../support/worker-ops.ts';

const LEASE_ID = '00000000-0000-4000-8000-000000000001';
let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await OtlpReceiver.start();
  await startTracing('batch-test', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
});

afterAll(async () => {
  await stopTracing();
  await receiver?.close();
});

function operation(n: number): FencedOperation {
  return {
    request: { operationId: `bt-${n}`, from: `w${n}`, to: 'w0', amountMinor: 1n, currency: null },
    fence: 1n,
    leaseId: LEASE_ID,
  };
}

/** Decides in one call; the call itself makes a span, as pg's instrumentation would. */
async function decide(operations: readonly FencedOperation[]): Promise<ApplyResult[]> {
  const span = trace.getTracer('fake-db').startSpan('fake sql', { kind: SpanKind.CLIENT }, context.active());
  span.end();
  return operations.map((o) => ({ outcome: 'applied', operationId: o.request.operationId, fence: String(o.fence) }));
}

describe('DecisionBatcher and tracing', () => {
  it('one batch of three traces: one span, parent the first wait, linked both ways to every wait', async () => {
    const batcher = new DecisionBatcher({ decide, batchMax: 3, waitMs: 1_000, inFlightMax: 1 });
    const expected = [1, 2, 3].map(() => batcher.expect());
    const waits = [1, 2, 3].map((n) => {
      // Each member's attempt is the root of a trace of its own.
      const attempt = startSpan(`attempt ${n}`, {}) as NonNullable<ReturnType<typeof startSpan>>;
      const wait = startSpan('await decision', {}, { parent: trace.setSpan(context.active(), attempt) });
      return { attempt, wait: wait as NonNullable<typeof wait> };
    });
    const results = await Promise.all(
      expected.map((e, i) => e.submit({ ...operation(i + 1), span: (waits[i] as (typeof waits)[number]).wait })),
    );
    expect(results.map((r) => r.outcome)).toEqual(['applied', 'applied', 'applied']);
    for (const { attempt, wait } of waits) {
      endSpan(wait);
      endSpan(attempt);
    }
    await flushTracing();
    const batches = await waitFor('the batch span', 10_000, () => {
      const found = receiver.spans.filter((s) => s.name === 'decide batch');
      return found.length > 0 ? found : undefined;
    });
    expect(batches).toHaveLength(1);
    const batch = batches[0] as ExportedSpan;
    const waitSpans = receiver.spans.filter((s) => s.name === 'await decision');
    expect(new Set(waitSpans.map((s) => s.traceId)).size).toBe(3);
    const first = waitSpans.find((s) => s.spanId === waits[0]?.wait.spanContext().spanId) as ExportedSpan;
    expect(batch).toMatchObject({ traceId: first.traceId, parentSpanId: first.spanId });
    expect(batch.attributes).toMatchObject({ 'batch.size': 3, 'batch.traced': 3 });
    expect(new Set(batch.links.map((l) => l.spanId))).toEqual(new Set(waitSpans.map((s) => s.spanId)));
    for (const w of waitSpans) {
      expect(w.links).toEqual([{ traceId: batch.traceId, spanId: batch.spanId }]);
      expect(w.attributes['batch.size']).toBe(3);
    }
    const sql = receiver.spans.filter((s) => s.name === 'fake sql');
    expect(sql.map((s) => s.parentSpanId)).toEqual([batch.spanId]);
  });

  it('control: items without spans make no batch span', async () => {
    const before = receiver.spans.filter((s) => s.name === 'decide batch').length;
    const batcher = new DecisionBatcher({ decide, batchMax: 2, waitMs: 1_000, inFlightMax: 1 });
    const expected = [1, 2].map(() => batcher.expect());
    await Promise.all(expected.map((e, i) => e.submit(operation(10 + i))));
    await flushTracing();
    await waitFor('the fake SQL span', 10_000, () =>
      receiver.spans.filter((s) => s.name === 'fake sql').length >= 2 ? true : undefined,
    );
    expect(receiver.spans.filter((s) => s.name === 'decide batch').length).toBe(before);
  });
});
