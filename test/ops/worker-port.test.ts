// How a launcher (the demo, the chaos harness, the bench, these tests) learns a worker's HTTP
// port: the worker binds METRICS_PORT=0, a port the kernel picks at that moment, and reports it
// over the IPC channel, so no other process can take a port picked in advance (a worker whose
// port is taken stops at start). And how a start-up failure reaches the launcher: at once, with
// how the process ended and the end of its log, instead of a timeout that says "see the logs".
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerProcess, waitForWorkersConnected } from '../../harness/fleet/worker-processes.ts';
import { createPipeline } from '../support/pipeline.ts';
import { logEvents } from '../support/worker-ops.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

/** A worker with a bad configuration exits within a second or two; the launcher must not wait for its own time-out. */
const FAIL_FAST_MS = 20_000;
const NEVER_READY_TIMEOUT_MS = 120_000;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => undefined);
});

describe("the worker's HTTP port", () => {
  it("each worker binds a port of the kernel's choosing and reports it; the launcher reaches /healthz, /readyz and /metrics there", async () => {
    const p = await createPipeline();
    cleanups.push(() => p.close());
    const workers = [await spawnWorkerProcess(p, {}, 1), await spawnWorkerProcess(p, {}, 2)];
    cleanups.push(async () => {
      for (const w of workers) await w.stop();
    });
    const ports = workers.map((w) => w.metricsPort);
    expect(ports.every((port) => port !== null && port > 0 && port !== 9464)).toBe(true);
    expect(new Set(ports).size).toBe(2);
    for (const w of workers) {
      expect((await fetch(w.url('/healthz'))).status).toBe(200);
      expect(await w.readyStatus()).toBe(200);
      expect(await (await fetch(w.url('/metrics'))).text()).toContain('fenced_transfers_');
      // The log says the port bound, not the 0 it was given.
      const started = logEvents(w.logFile).find((e) => e.event === 'worker_started');
      expect(started?.metricsPort).toBe(w.metricsPort);
    }
  });
});

describe('a worker that fails at start', () => {
  function badlyConfigured(): WorkerProcess {
    const logDir = mkdtempSync(join(tmpdir(), 'ft-port-'));
    cleanups.push(async () => rmSync(logDir, { recursive: true, force: true }));
    const w = new WorkerProcess(1, { logDir, env: { DATABASE_URL: 'not-a-url', LOG_LEVEL: 'info' } });
    cleanups.push(() => w.stop());
    return w;
  }

  it('fails waitUntilReady() at once, with its exit code and the end of its log', async () => {
    const w = badlyConfigured();
    const t0 = performance.now();
    w.start();
    const err = await w.waitUntilReady(NEVER_READY_TIMEOUT_MS).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(performance.now() - t0).toBeLessThan(FAIL_FAST_MS);
    expect(err?.message).toMatch(/^worker 1 exited with code 1; the end of .*worker-1\.log:\n/);
    expect(err?.message).toContain('configuration error: DATABASE_URL');
  });

  it('fails waitForWorkersConnected() at once in the same way, whatever the count says', async () => {
    const w = badlyConfigured();
    const t0 = performance.now();
    w.start();
    const err = await waitForWorkersConnected([w], async () => 0, NEVER_READY_TIMEOUT_MS).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(performance.now() - t0).toBeLessThan(FAIL_FAST_MS);
    expect(err?.message).toContain('configuration error: DATABASE_URL');
  });

  it("a time-out names every worker's state and quotes the log of each that is not ready", async () => {
    const logDir = mkdtempSync(join(tmpdir(), 'ft-port-'));
    cleanups.push(async () => rmSync(logDir, { recursive: true, force: true }));
    // Redis on a port nothing listens on: the worker waits (STARTUP_TIMEOUT_MS) and is never ready.
    const w = new WorkerProcess(1, {
      logDir,
      env: { REDIS_URL: 'redis://127.0.0.1:1', STARTUP_TIMEOUT_MS: '600000', LOG_LEVEL: 'info' },
    });
    cleanups.push(() => w.stop());
    w.start();
    await w.waitForPort(60_000);
    const err = await waitForWorkersConnected([w], async () => 0, 2_000).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(
      /^only 0 of 1 workers connected within 2000 ms\nworker 1: running, HTTP port \d+, \/readyz 503; the end of /,
    );
    expect(err?.message).toContain('worker_starting');
  });
});
