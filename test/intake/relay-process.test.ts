// `npm run relay` as a process (src/cli/relay-cli.ts): /healthz, /readyz (503 naming the server that
// does not answer, 200 once Redis and PostgreSQL do), /metrics (lag, open and given-up requests,
// sends, outcomes published and the publisher's cursor), the graceful stop on SIGTERM (exit 0,
// `relay_stopped` logged), and a relay killed with SIGKILL between claiming a batch and adding its
// jobs, recovered by another relay's re-sends. Control: with RESEND_AFTER_MS at its maximum
// (86400000) the killed relay's batch is never decided and that test times out. Logged in as the
// owner it warns at start (relay_role_too_strong, with the role and the fix); logged in as the
// relay role (`npm run db:relay-role`) it does not, and still sends, re-sends and publishes: the
// requests are decided end to end and their outcomes reach the outcomes queue.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { FaultProxy } from '../../harness/chaos/fault-proxy.ts';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { ensureRelayRole } from '../../src/db/relay-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { outcomeJobIdOf } from '../../src/intake/outcome-publisher.ts';
import { jobIdOf } from '../../src/intake/relay.ts';
import { RELAY_METRICS } from '../../src/intake/relay-metrics.ts';
import { bullmqConnection } from '../../src/queue/redis-connection.ts';
import { settledRead } from '../support/feed.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import { uniqueName } from '../support/test-db.ts';
import { httpStatus, logEvents, scrape, waitFor } from '../support/worker-ops.ts';
import { TEST_WORKER_LOG_ROOT } from '../support/worker-process.ts';

/** The re-send delay of the relay that recovers the killed one's batch (the control sets it to its maximum). */
const RESEND_AFTER_MS = '500';
/**
 * Bound on the wait for each step of the relay (a request sent, found lost, published): tens of
 * milliseconds alone, but seen past 20 s with both cores busy beside the suite. A bound on a
 * wait for an event, not a measure of speed.
 */
const STEP_WAIT_MS = 60_000;
/** Each test: a relay start and a few steps, each within STEP_WAIT_MS. */
const TEST_TIMEOUT_MS = 240_000;
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

/** Tries at making the queue lose an add (below); one is enough unless a re-send races it each time. */
const LOSE_ADD_TRIES_MAX = 5;

/** The pipeline's transfer requests that match `where` (with `params` bound). */
async function requestCount(p: Pipeline, where: string, params: unknown[] = []): Promise<number> {
  const { rows } = await p.db.pg.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM transfer_requests WHERE ${where}`,
    params,
  );
  return Number(rows[0]?.n);
}

/**
 * Removes the job of `operationId` until the relay has found it missing: a re-send then counts it
 * lost (in the request's lost_count, before it adds the job again). The removal can fall between
 * a re-send's look (the job there) and its add, which puts the job back uncounted: no lost add,
 * so the job is removed again.
 */
async function loseAdd(p: Pipeline, operationId: string): Promise<void> {
  const jobId = jobIdOf(operationId);
  for (let tries = 1; tries <= LOSE_ADD_TRIES_MAX; tries += 1) {
    await (await p.queue.getJob(jobId))?.remove();
    await waitFor('the job added again', STEP_WAIT_MS, async () => ((await p.queue.getJob(jobId)) ? true : undefined));
    if ((await requestCount(p, 'operation_id = $1 AND lost_count > 0', [operationId])) > 0) return;
  }
  throw new Error(`every one of ${LOSE_ADD_TRIES_MAX} removals of ${operationId} was undone by a re-send uncounted`);
}

describe('npm run relay', { timeout: TEST_TIMEOUT_MS }, () => {
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
      await waitFor('both sent', STEP_WAIT_MS, async () =>
        (await metric(RELAY_METRICS.sent)()) === 2 ? true : undefined,
      );
      const families = await scrape(relay.url('/metrics'));
      expect(sampleValue(families, RELAY_METRICS.lag.name)).toBe(0);
      expect(sampleValue(families, RELAY_METRICS.waiting.name)).toBe(2);
      expect(sampleValue(families, RELAY_METRICS.resent.name)).toBe(0);
      expect(sampleValue(families, RELAY_METRICS.lost.name)).toBe(0);
      for (const m of Object.values(RELAY_METRICS)) expect(families.has(m.name), m.name).toBe(true);

      const byHand = await p.db.pg.query<{ recorded: boolean }>(
        "SELECT record_transfer_given_up(operation_id, request_hash, 'by hand', send_count) AS recorded FROM transfer_requests WHERE operation_id = 'proc-1'",
      );
      expect(byHand.rows[0]?.recorded).toBe(true);
      await waitFor('the event published', STEP_WAIT_MS, async () =>
        (await metric(RELAY_METRICS.published)()) === 1 ? true : undefined,
      );
      const after = await scrape(relay.url('/metrics'));
      expect(sampleValue(after, RELAY_METRICS.givenUp.name)).toBe(1);
      expect(sampleValue(after, RELAY_METRICS.cursor.name)).toBe(1);
      const jobId = outcomeJobIdOf({ position: 1n, operationId: 'proc-1', kind: 'given_up' });
      expect((await outcomes.getJob(jobId))?.data).toMatchObject({ operationId: 'proc-1', kind: 'given_up' });

      const exit = await relay.stop();
      expect(exit).toEqual({ code: 0, signal: null });
      const events = logEvents(relay.logFile).map((e) => e.event);
      expect(events).toEqual(expect.arrayContaining(['relay_started', 'relay_stopping', 'relay_stopped']));
      const owner = (await p.db.pg.query<{ me: string }>('SELECT current_user AS me')).rows[0]?.me;
      const warned = logEvents(relay.logFile).filter((e) => e.event === 'relay_role_too_strong');
      expect(warned).toHaveLength(1);
      expect(warned[0]).toMatchObject({
        level: 40,
        role: owner,
        fix: expect.stringContaining('npm run db:relay-role'),
      });
      expect(warned[0]?.tablesOwned).toBeGreaterThan(0);
    } finally {
      await relay.stop();
      await outcomes.obliterate({ force: true }).catch(() => undefined);
      await outcomes.close();
    }
  });

  it('runs as the relay role: no warning, and requests are sent, re-sent after a lost add, decided and published', async () => {
    const p = await newPipeline();
    await p.seed(4, 1_000n);
    const role = uniqueName('ft_rl');
    const password = 'relay-process-password-42';
    await ensureRelayRole(p.db.url, role, password, p.config);
    const env = {
      ...p.workerEnv,
      DATABASE_URL: roleUrl(p.db.url, role, password),
      RELAY_IDLE_MS: '20',
      INTAKE_RESEND_AFTER_MS: RESEND_AFTER_MS,
    };
    const wires = [1, 2, 3].map((i) => ({ operationId: `role-${i}`, from: 'w1', to: 'w2', amount: '1' }));
    const relay = relayProcess(env);
    const outcomes = new Queue(`${p.config.queueName}-outcomes`, { connection: bullmqConnection(p.config) });
    relay.start();
    try {
      await relay.waitUntilReady(60_000);
      await requestTransfers(p.db.pg, wires, p.config.transferAmountMax);
      const metric = (m: { name: string }) => async () => sampleValue(await scrape(relay.url('/metrics')), m.name);
      await waitFor('all sent', STEP_WAIT_MS, async () =>
        (await metric(RELAY_METRICS.sent)()) === 3 ? true : undefined,
      );
      // An add the queue lost: sent again, counted lost, through the relay role's functions.
      await loseAdd(p, 'role-1');
      await waitFor('the lost add found', STEP_WAIT_MS, async () =>
        (await metric(RELAY_METRICS.lost)()) === 1 ? true : undefined,
      );
      await p.startWorker();
      await waitFor('all published', STEP_WAIT_MS, async () =>
        (await metric(RELAY_METRICS.published)()) === 3 ? true : undefined,
      );
      const published = await outcomes.getJobs(['waiting', 'active', 'completed']);
      expect(published.map((j) => [j.data.operationId, j.data.kind]).sort()).toEqual(
        wires.map((w) => [w.operationId, 'applied']),
      );
      expect(sampleValue(await scrape(relay.url('/metrics')), RELAY_METRICS.cursor.name)).toBe(3);
      const { rows } = await p.db.pg.query<{ decided: string; lost: string }>(
        "SELECT count(*) FILTER (WHERE decided_at IS NOT NULL)::text AS decided, sum(lost_count)::text AS lost FROM transfer_requests WHERE operation_id LIKE 'role-%'",
      );
      expect(rows[0]).toEqual({ decided: '3', lost: '1' });
      expect(await relay.stop()).toEqual({ code: 0, signal: null });
      const logged = logEvents(relay.logFile);
      expect(logged.map((e) => e.event)).toContain('relay_started');
      expect(
        logged.filter((e) => e.event === 'relay_role_too_strong' || e.event === 'relay_role_check_failed'),
      ).toEqual([]);
    } finally {
      await relay.stop();
      await outcomes.obliterate({ force: true }).catch(() => undefined);
      await outcomes.close();
      await dropWorkerRole(p.db.url, role);
    }
  });

  it('killed with SIGKILL mid-batch (rows claimed, jobs not added): every request is still decided exactly once, by re-sends', async () => {
    const p = await newPipeline();
    await p.seed(6, 1_000_000n);
    const n = 60;
    const wires = Array.from({ length: n }, (_, i) => ({
      operationId: `kill-${i}`,
      from: `w${1 + (i % 3)}`,
      to: `w${4 + (i % 3)}`,
      amount: '1',
    }));
    const env = { ...p.workerEnv, DATABASE_URL: p.db.url, RELAY_BATCH_MAX: '20', RELAY_IDLE_MS: '20' };
    const count = (where: string) => requestCount(p, where);
    // Its Redis link goes through a proxy that then holds every byte: the relay claims a batch
    // (PostgreSQL), and its addBulk() never reaches Redis; the SIGKILL lands right there.
    const redis = new URL(p.config.redisUrl);
    const proxy = await FaultProxy.start('relay-redis', redis.hostname, Number(redis.port || 6379));
    const killed = relayProcess({ ...env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` });
    killed.start();
    try {
      await killed.waitUntilReady(60_000);
      proxy.stall();
      await requestTransfers(p.db.pg, wires, p.config.transferAmountMax);
      await waitFor('a claimed batch', 30_000, async () => ((await count('send_count > 0')) > 0 ? true : undefined));
      await killed.kill();
    } finally {
      await killed.stop();
      await proxy.close();
    }
    expect(await count('send_count > 0')).toBe(20);
    for (const w of wires) expect(await p.queue.getJob(jobIdOf(w.operationId)), w.operationId).toBeFalsy();

    await p.startWorker();
    const relay = relayProcess({ ...env, INTAKE_RESEND_AFTER_MS: RESEND_AFTER_MS });
    relay.start();
    try {
      await waitFor('every decision', 30_000, async () =>
        (await count('decided_at IS NULL')) === 0 ? true : undefined,
      );
      const { rows } = await p.db.pg.query<{ transfers: string; lost: string }>(
        `SELECT (SELECT count(*) FROM transfers WHERE operation_id LIKE 'kill-%')::text AS transfers,
                (SELECT sum(lost_count) FROM transfer_requests)::text AS lost`,
      );
      // Read through the feed once every event decided is in it (the workers and the relay sequence it).
      const applied = (await settledRead(p.db.pg, 0n, 10_000)).filter((e) => e.kind === 'applied');
      expect(new Set(applied.map((e) => e.operationId)).size).toBe(n);
      expect(applied).toHaveLength(n);
      expect(rows[0]).toEqual({ transfers: String(n), lost: '20' });
      expect(await relay.stop()).toEqual({ code: 0, signal: null });
    } finally {
      await relay.stop();
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
      const ready = await waitFor('a reason', STEP_WAIT_MS, async () => {
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
