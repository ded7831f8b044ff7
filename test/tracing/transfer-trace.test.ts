// One trace per transfer, end to end, through the real OTLP/HTTP exporter to a receiver in this
// test (harness/tracing/otlp-receiver.ts): a producer's span requests a transfer through the
// intake; a relay process sends it; a worker process's first attempt fails on a transient error
// (the test holds the source wallet's row lock, so the decision runs into DB_LOCK_TIMEOUT_MS) and
// the retry applies it; the relay publishes its outcome. The spans of that one trace are checked
// as a tree, and nothing pg or ioredis did outside a transfer (the polling) was exported.
// Controls: with requireParentSpan off in src/tracing/tracing-sdk.ts the "no parentless
// pg/ioredis spans" check fails (the probes', sequencer's and sweeper's queries are exported); with
// the relay's `relay send` span left out of the job (no telemetry metadata on the add) the tree
// check fails (the attempts start traces of their own).
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { type ExportedSpan, OtlpReceiver, spansToJson } from '../../harness/tracing/otlp-receiver.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { requestTransfer } from '../../src/intake/intake.ts';
import { jobIdOf } from '../../src/intake/relay.ts';
import { flushTracing, startTracing, stopTracing } from '../../src/tracing/tracing.ts';
import { pipelinePerTest } from '../support/pipeline.ts';
import { waitFor } from '../support/worker-ops.ts';
import { spawnWorkerProcess, TEST_WORKER_LOG_ROOT } from '../support/worker-process.ts';

const RELAY_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'relay-cli.ts');
/** Where the spans of the checked trace are written when set (the trace picture reads them). */
const SPANS_OUT = process.env.TRACE_SPANS_OUT ?? '';
const SETTLE_TIMEOUT_MS = 30_000;

const newPipeline = pipelinePerTest();
let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await OtlpReceiver.start();
  // This process is the producer: it traces with the same SDK, to the same receiver.
  await startTracing('producer-service', { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
});

afterAll(async () => {
  await stopTracing();
  await receiver?.close();
});

function relayProcess(env: Record<string, string>): WorkerProcess {
  return new WorkerProcess(1, {
    logDir: mkdtempSync(join(mkdirSync(TEST_WORKER_LOG_ROOT, { recursive: true }) ?? TEST_WORKER_LOG_ROOT, 'relay-')),
    entry: RELAY_ENTRY,
    runtimeFlags: [],
    env: { ...env, RELAY_METRICS_PORT: '0', LOG_LEVEL: 'info' },
  });
}

/** The children of a span, by name. */
function childrenOf(spans: readonly ExportedSpan[], parent: ExportedSpan, name?: string | RegExp): ExportedSpan[] {
  return spans.filter(
    (s) =>
      s.parentSpanId === parent.spanId &&
      (name === undefined || (typeof name === 'string' ? s.name === name : name.test(s.name))),
  );
}

const isPg = (s: ExportedSpan) => s.attributes['db.system'] === 'postgresql' || s.scope.includes('instrumentation-pg');
const isRedis = (s: ExportedSpan) =>
  s.attributes['db.system'] === 'redis' || s.scope.includes('instrumentation-ioredis');

describe('one trace per transfer', () => {
  it('a transfer requested through the intake and retried once is one tree: request, send, both attempts, lock, batch, outcome', async () => {
    const p = await newPipeline({ DB_LOCK_TIMEOUT_MS: '300', JOB_ATTEMPTS_MAX: '5' });
    await p.seed(2, 1_000n);
    const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint };
    const worker = await spawnWorkerProcess(p, otel);
    const relay = relayProcess({ ...p.workerEnv, DATABASE_URL: p.db.url, RELAY_IDLE_MS: '20', ...otel });
    // The source wallet's row, locked until the first attempt has failed on it.
    const holder = await p.db.pg.connect();
    const operationId = 'traced-1';
    let producerTraceId = '';
    try {
      relay.start();
      await relay.waitUntilReady(60_000);
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM wallets WHERE id = 'w1' FOR UPDATE");
      await trace.getTracer('producer-service').startActiveSpan('producer request', async (span) => {
        producerTraceId = span.spanContext().traceId;
        const client = await p.db.pg.connect();
        try {
          await client.query('BEGIN');
          expect(
            await requestTransfer(
              client,
              { operationId, from: 'w1', to: 'w2', amount: '7' },
              p.config.transferAmountMax,
            ),
          ).toBe('requested');
          await client.query('COMMIT');
        } finally {
          client.release();
          span.setStatus({ code: SpanStatusCode.OK });
          span.end();
        }
      });
      const stored = await p.db.pg.query<{ trace_context: { traceparent: string } }>(
        'SELECT trace_context FROM transfer_requests WHERE operation_id = $1',
        [operationId],
      );
      expect(stored.rows[0]?.trace_context.traceparent).toContain(producerTraceId);
      await waitFor('the first attempt to fail', SETTLE_TIMEOUT_MS, async () => {
        const job = await p.queue.getJob(jobIdOf(operationId));
        return job !== undefined && job.attemptsMade >= 1 ? true : undefined;
      });
      await holder.query('COMMIT');
      await waitFor('the outcome published', SETTLE_TIMEOUT_MS, async () => {
        const { rows } = await p.db.pg.query<{ n: string }>(
          "SELECT count(*)::text AS n FROM outcome_cursors WHERE name = 'outcomes-queue' AND position > 0",
        );
        return rows[0]?.n === '1' ? true : undefined;
      });
      const job = await p.queue.getJob(jobIdOf(operationId));
      expect(job?.attemptsMade).toBe(2);
      expect(job?.returnvalue).toMatchObject({ outcome: 'applied' });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      // A graceful stop flushes each process's spans (stopTracing() at its exit).
      await worker.stop();
      await relay.stop();
      await flushTracing();
    }

    await waitFor('the spans of both processes', SETTLE_TIMEOUT_MS, () =>
      receiver.spans.some((s) => s.name === 'publish outcome') &&
      receiver.spans.filter((s) => s.name === 'decide batch').length >= 2
        ? true
        : undefined,
    );
    const spans = receiver.spans.filter((s) => s.traceId === producerTraceId);
    if (SPANS_OUT !== '') writeFileSync(SPANS_OUT, spansToJson(spans));
    const one = (name: string | RegExp, among: readonly ExportedSpan[] = spans) => {
      const found = among.filter((s) => (typeof name === 'string' ? s.name === name : name.test(s.name)));
      expect(
        found.map((s) => s.name),
        String(name),
      ).toHaveLength(1);
      return found[0] as ExportedSpan;
    };

    // The tree: one root, the producer's request, and every other span's parent in the trace.
    const root = one('producer request');
    expect(root.parentSpanId).toBeNull();
    expect(root.service).toBe('producer-service');
    const ids = new Set(spans.map((s) => s.spanId));
    expect(spans.filter((s) => s !== root && (s.parentSpanId === null || !ids.has(s.parentSpanId)))).toEqual([]);

    // The intake's statement ran under the producer's span; the relay's send is its child.
    expect(childrenOf(spans, root).some(isPg)).toBe(true);
    const send = one('relay send');
    expect(send).toMatchObject({ parentSpanId: root.spanId, service: 'fenced-transfers-relay', kind: 'producer' });
    expect(send.attributes).toMatchObject({ 'transfer.operation_id': operationId, 'transfer.wallet': 'w1' });

    // Both attempts: BullMQ's consumer spans, in the worker; the first under the send.
    const attempts = spans
      .filter((s) => s.kind === 'consumer' && s.name.startsWith('process '))
      .sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
    expect(attempts).toHaveLength(2);
    for (const a of attempts) expect(a.service).toBe('fenced-transfers-worker');
    expect((attempts[0] as ExportedSpan).parentSpanId).toBe(send.spanId);
    expect((attempts[0] as ExportedSpan).events).toContain('job failed');
    expect((attempts[1] as ExportedSpan).events).toContain('job completed');

    for (const [i, attempt] of attempts.entries()) {
      // The lock: a span per attempt, with its Redis call under it.
      const lock = one('lock wallet', childrenOf(spans, attempt));
      expect(lock.attributes).toMatchObject({ 'transfer.wallet': 'w1', 'lock.outcome': 'acquired' });
      expect(String(lock.attributes['lock.fence'])).toMatch(/^[0-9]+$/);
      expect(childrenOf(spans, lock).some(isRedis), `attempt ${i + 1}: the lock's Redis call`).toBe(true);
      // The decision: the wait in the batch, and the batch (its parent the first member's wait,
      // linked to it both ways), with the database call under it.
      const wait = one('await decision', childrenOf(spans, attempt));
      const batch = one('decide batch', childrenOf(spans, wait));
      expect(batch.attributes).toMatchObject({ 'batch.size': 1 });
      expect(batch.links).toContainEqual({ traceId: producerTraceId, spanId: wait.spanId });
      expect(wait.links).toContainEqual({ traceId: producerTraceId, spanId: batch.spanId });
      expect(childrenOf(spans, batch).some(isPg), `attempt ${i + 1}: the decision's SQL`).toBe(true);
      expect(batch.statusCode, `attempt ${i + 1}`).toBe(i === 0 ? 2 : 0);
    }
    expect(one('await decision', childrenOf(spans, attempts[1] as ExportedSpan)).attributes).toMatchObject({
      'decision.outcome': 'applied',
    });

    // The outcome's publication, by the relay, under the producer's request.
    const published = one('publish outcome');
    expect(published).toMatchObject({ parentSpanId: root.spanId, service: 'fenced-transfers-relay' });
    expect(published.attributes).toMatchObject({ 'transfer.operation_id': operationId, 'outcome.kind': 'applied' });

    // Polling exported nothing: no pg or ioredis span without a parent, in any trace, and no
    // span of the worker or the relay that starts a trace of its own.
    expect(receiver.spans.filter((s) => s.parentSpanId === null && (isPg(s) || isRedis(s)))).toEqual([]);
    expect(
      receiver.spans
        .filter((s) => s.parentSpanId === null && s.service !== 'producer-service')
        .map((s) => `${s.service}: ${s.name}`),
    ).toEqual([]);
    expect(receiver.refused).toBe(0);
  });

  it('tracing unconfigured (an empty endpoint, as Compose passes it): nothing exported, the SDK never loaded', async () => {
    const p = await newPipeline();
    await p.seed(2, 1_000n);
    mkdirSync(TEST_WORKER_LOG_ROOT, { recursive: true });
    const loads = join(mkdtempSync(join(TEST_WORKER_LOG_ROOT, 'loads-')), 'l');
    const recordLoads = ['--import', join(PROJECT_ROOT, 'test', 'tracing', 'record-loads.mjs')];
    const before = receiver.spans.length;
    let runs = 0;
    const run = async (env: Record<string, string>) => {
      runs += 1;
      writeFileSync(loads, '');
      const worker = new WorkerProcess(1, {
        logDir: mkdtempSync(join(TEST_WORKER_LOG_ROOT, 'worker-')),
        nodeArgs: recordLoads,
        env: { ...p.workerEnv, ...env, MODULE_LOADS_FILE: loads, LOG_LEVEL: 'info' },
      });
      worker.start();
      try {
        await worker.waitUntilReady(60_000);
        const job = await p.addRaw({
          operationId: `off-${runs}`,
          from: 'w1',
          to: 'w2',
          amount: '1',
        });
        expect(await p.result(job)).toMatchObject({ outcome: 'applied' });
      } finally {
        await worker.stop();
      }
      return readFileSync(loads, 'utf8').split('\n').filter(Boolean);
    };

    const off = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: '', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '' });
    expect(off).toEqual([]);
    const disabled = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_SDK_DISABLED: 'true' });
    expect(disabled).toEqual([]);
    expect(receiver.spans.length).toBe(before);
    // Control: the same probe, tracing on, sees the SDK load, and the worker exports.
    const on = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
    expect(on.some((url) => url.includes('@opentelemetry/sdk-trace'))).toBe(true);
    await waitFor('the traced worker’s spans', SETTLE_TIMEOUT_MS, () =>
      receiver.spans.length > before ? true : undefined,
    );
  });
});
