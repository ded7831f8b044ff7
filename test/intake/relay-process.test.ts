// `npm run relay` as a process (src/cli/relay-cli.ts): /healthz, /readyz (503 naming the server that
// does not answer, 200 once Redis and PostgreSQL do), /metrics (lag, open and given-up requests,
// sends, outcomes published and the publisher's cursor), and the graceful stop on SIGTERM (exit 0,
// `relay_stopped` logged).
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WorkerProcess } from '../../src/harness/fleet/worker-processes.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { RELAY_METRICS } from '../../src/intake/relay-metrics.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { pipelinePerTest } from '../support/pipeline.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { httpStatus, logEvents, scrape, waitFor } from '../support/worker-ops.ts';
import { TEST_WORKER_LOG_ROOT } from '../support/worker-process.ts';

const RELAY_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'relay-cli.ts');
const newPipeline = pipelinePerTest();

function relayProcess(env: Record<string, string>): WorkerProcess {
  return new WorkerProcess(1, {
    logDir: mkdtempSync(join(mkdirSync(TEST_WORKER_LOG_ROOT, { recursive: true }) ?? TEST_WORKER_LOG_ROOT, 'relay-')),
    entry: RELAY_ENTRY,
    runtimeFlags: [],
    env: { ...env, RELAY_METRICS_PORT: '0', LOG_LEVEL: 'info' },
  });
}

describe('npm run relay', () => {
  it('serves /healthz, /readyz and /metrics, sends and publishes, and stops gracefully on SIGTERM', async () => {
    const p = await newPipeline();
    const env = { ...p.workerEnv, DATABASE_URL: p.db.url, RELAY_IDLE_MS: '20' };
    const wires = [1, 2].map((i) => ({ operationId: `proc-${i}`, from: 'w1', to: 'w2', amount: '1' }));
    await requestTransfers(p.db.pg, wires, p.config.transferAmountMax);
    await p.db.pg.query("UPDATE transfer_requests SET requested_at = requested_at - interval '7 seconds'");
    const relay = relayProcess(env);
    const outcomes = new Queue(`${p.config.queueName}-outcomes`, { connection: bullmqConnection(p.config) });
    relay.start();
    try {
      await relay.waitUntilReady(60_000);
      expect((await httpStatus(relay.url('/healthz'))).status).toBe(200);
      const metric = (m: { name: string }) => async () => sampleValue(await scrape(relay.url('/metrics')), m.name);
      await waitFor('both sent', 20_000, async () => ((await metric(RELAY_METRICS.sent)()) === 2 ? true : undefined));
      const families = await scrape(relay.url('/metrics'));
      expect(sampleValue(families, RELAY_METRICS.lag.name)).toBe(0);
      expect(sampleValue(families, RELAY_METRICS.waiting.name)).toBe(2);
      expect(sampleValue(families, RELAY_METRICS.resent.name)).toBe(0);
      expect(sampleValue(families, RELAY_METRICS.lost.name)).toBe(0);
      for (const m of Object.values(RELAY_METRICS)) expect(families.has(m.name), m.name).toBe(true);

      await p.db.pg.query("SELECT record_transfer_given_up('proc-1', 'w1', 'w2', 1, NULL, 'by hand')");
      await waitFor('the event published', 20_000, async () =>
        (await metric(RELAY_METRICS.published)()) === 1 ? true : undefined,
      );
      const after = await scrape(relay.url('/metrics'));
      expect(sampleValue(after, RELAY_METRICS.givenUp.name)).toBe(1);
      expect(sampleValue(after, RELAY_METRICS.cursor.name)).toBe(1);
      expect((await outcomes.getJob('outcome-1'))?.data).toMatchObject({ operationId: 'proc-1', kind: 'given_up' });

      const exit = await relay.stop();
      expect(exit).toEqual({ code: 0, signal: null });
      const events = logEvents(relay.logFile).map((e) => e.event);
      expect(events).toEqual(expect.arrayContaining(['relay_started', 'relay_stopping', 'relay_stopped']));
    } finally {
      await relay.stop();
      await outcomes.obliterate({ force: true }).catch(() => undefined);
      await outcomes.close();
    }
  });

  it('is not ready while Redis does not answer, says so on /readyz, and a SIGTERM then exits 0', async () => {
    const p = await newPipeline();
    const relay = relayProcess({
      ...p.workerEnv,
      DATABASE_URL: p.db.url,
      REDIS_URL: 'redis://127.0.0.1:1',
      STARTUP_TIMEOUT_MS: '60000',
    });
    relay.start();
    try {
      await relay.waitForPort(60_000);
      const ready = await waitFor('a reason', 20_000, async () => {
        const r = await httpStatus(relay.url('/readyz'));
        return r.body.includes('Redis') ? r : undefined;
      });
      expect(ready.status).toBe(503);
      expect((await httpStatus(relay.url('/healthz'))).status).toBe(200);
      expect(await relay.stop()).toEqual({ code: 0, signal: null });
    } finally {
      await relay.stop();
    }
  });
});
