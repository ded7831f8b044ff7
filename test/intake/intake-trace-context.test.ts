// The intake keeps the producer's trace context with a new request (the intake-trace-context
// migration): a producer with a W3C propagator and a span active around requestTransfers() or
// requestOperations() has that span's context stored; a duplicate keeps the first one; a producer
// that traces nothing stores NULL; a context that is not {traceparent, tracestate?} is refused.
import { context, propagation, ROOT_CONTEXT, type SpanContext, TraceFlags, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestOperations, requestTransfer } from '../../src/intake/intake.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(async () => {
  db = await createTestDatabase('ft_itrace');
  await seedWallets(db.prisma, { wallets: 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  // What a producer's own SDK sets up: a context manager and the W3C propagator.
  context.setGlobalContextManager(contextManager.enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});

afterAll(async () => {
  propagation.disable();
  context.disable();
  await db?.drop();
});

function spanContext(traceHex: string): SpanContext {
  return { traceId: traceHex.repeat(32 / traceHex.length), spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED };
}

/** Runs `work` as if inside the producer's span of that trace. */
function inProducerSpan<T>(traceHex: string, work: () => Promise<T>): Promise<T> {
  return context.with(trace.setSpanContext(ROOT_CONTEXT, spanContext(traceHex)), work);
}

async function storedContext(operationId: string): Promise<unknown> {
  const { rows } = await db.pg.query('SELECT trace_context FROM transfer_requests WHERE operation_id = $1', [
    operationId,
  ]);
  return rows[0]?.trace_context;
}

describe('the intake and the trace context', () => {
  it('stores the active span’s context with a new request; a duplicate keeps the first', async () => {
    const wire = { operationId: 'tc-1', from: 'w1', to: 'w2', amount: '5' };
    expect(await inProducerSpan('a1', () => requestTransfer(db.pg, wire, 1000n))).toBe('requested');
    const first = { traceparent: `00-${'a1'.repeat(16)}-${'b'.repeat(16)}-01` };
    expect(await storedContext('tc-1')).toEqual(first);
    expect(await inProducerSpan('c2', () => requestTransfer(db.pg, wire, 1000n))).toBe('duplicate');
    expect(await storedContext('tc-1')).toEqual(first);
  });

  it('stores it for an operation of any kind too', async () => {
    const hold = {
      kind: 'hold' as const,
      operationId: 'tc-hold',
      from: 'w1',
      to: 'w2',
      amount: '3',
      expiresInMs: 60_000,
    };
    expect(await inProducerSpan('d3', () => requestOperations(db.pg, [hold], 1000n, 604_800_000))).toEqual([
      'requested',
    ]);
    expect(await storedContext('tc-hold')).toEqual({ traceparent: `00-${'d3'.repeat(16)}-${'b'.repeat(16)}-01` });
  });

  it('stores NULL when the producer traces nothing', async () => {
    expect(await requestTransfer(db.pg, { operationId: 'tc-none', from: 'w1', to: 'w2', amount: '5' }, 1000n)).toBe(
      'requested',
    );
    expect(await storedContext('tc-none')).toBeNull();
  });

  it('refuses a trace context that is not {traceparent, tracestate?} (22023), and requests nothing', async () => {
    const bad = [{ traceparent: 'nope' }, { traceparent: `00-${'e'.repeat(32)}-${'f'.repeat(16)}-01`, other: 'x' }, []];
    for (const [i, ctx] of bad.entries()) {
      const call = db.pg.query("SELECT request_transfer($1, 'w1', 'w2', 5, NULL, $2::jsonb)", [
        `tc-bad-${i}`,
        JSON.stringify(ctx),
      ]);
      await expect(call, JSON.stringify(ctx)).rejects.toMatchObject({ code: '22023' });
      expect(await storedContext(`tc-bad-${i}`)).toBeUndefined();
    }
  });
});
