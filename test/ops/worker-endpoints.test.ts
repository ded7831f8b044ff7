// The worker as an operator runs it: `npm run worker` with METRICS_PORT answers /healthz,
// /readyz and /metrics (Prometheus text, our families), its transfer counters summed over the
// workers equal the database's counts and the shared aggregate, and SIGTERM ends it with exit
// 0. Pointed at a database it cannot reach (a TCP proxy that refuses every connection) it takes
// no job and says so on /readyz, and takes the job once the database answers; the same at run
// time. A bad URL or a taken port stops it at start with one line naming the variable.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../harness/chaos/fault-proxy.ts';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { freePort } from '../../harness/services/free-port.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { aggregateKeys, readCounterTotals } from '../../src/metrics/counter-aggregate.ts';
import { METRIC_PREFIX, seriesId } from '../../src/metrics/worker-metrics.ts';
import { runCommand } from '../support/cli-process.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';
import { type MetricFamily, sampleValue } from '../support/prometheus-text.ts';
import {
  databaseCounts,
  httpStatus,
  logEvents,
  type NpmWorker,
  scrape,
  startNpmWorker,
  waitFor,
} from '../support/worker-ops.ts';

const READY_TIMEOUT_MS = 90_000;
const SETTLE_TIMEOUT_MS = 60_000;
/**
 * The answer of a job once the database is back: applied by that attempt, or by an earlier one
 * whose answer a loaded machine lost, answered from the record on the retry (`duplicate`). The
 * balances each test reads afterwards show the money moved once either way.
 */
const APPLIED_ONCE = ['applied', 'duplicate'];
/** How long the control waits for an ungated worker to spend an attempt (under the test's own 60 s). */
const TAKEN_TIMEOUT_MS = 30_000;
/** How long the tests watch a gated worker leave a job alone: several probe rounds. */
const GATE_WATCH_MS = 4_000;
const ALLOW_UNSAFE = 'i-understand-this-breaks-guarantees';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => undefined);
});

async function open(env: Record<string, string> = {}): Promise<Pipeline> {
  const p = await createPipeline(env);
  cleanups.push(() => p.close());
  return p;
}

function workerEnv(p: Pipeline, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: p.db.url,
    REDIS_URL: p.config.redisUrl,
    QUEUE_NAME: p.config.queueName,
    LOCK_KEY_PREFIX: p.config.lockKeyPrefix,
    LOCK_TTL_MS: String(p.config.lockTtlMs),
    WORKER_CONCURRENCY: String(p.config.workerConcurrency),
    DB_POOL_MAX: String(p.config.dbPoolMax),
    JOB_ATTEMPTS_MAX: String(p.config.jobAttemptsMax),
    LOG_LEVEL: 'info',
    TRANSFERS_UNSAFE: '',
    ...extra,
  };
}

function ours(families: Map<string, MetricFamily>): MetricFamily[] {
  return [...families.values()].filter((f) => f.name.startsWith(METRIC_PREFIX) && f.type !== 'untyped');
}

describe('npm run worker with METRICS_PORT', () => {
  it('answers /healthz and /readyz, serves Prometheus text whose counters over the workers equal the database, and exits 0 on SIGTERM', async () => {
    // One job at a time per worker, so that both take their share of the load.
    const p = await open({ WORKER_CONCURRENCY: '1' });
    await p.seed(5, 1_000n);
    const ports = [await freePort(), await freePort()];
    const workers: NpmWorker[] = ports.map((port) =>
      startNpmWorker(workerEnv(p, { METRICS_PORT: String(port), METRICS_HOST: '127.0.0.1' })),
    );
    cleanups.push(async () => {
      for (const w of workers) w.killAll();
    });
    for (const [i, port] of ports.entries()) {
      await waitFor(`worker ${i + 1} /readyz 200\n${workers[i]?.output()}`, READY_TIMEOUT_MS, async () =>
        (await httpStatus(`http://127.0.0.1:${port}/readyz`)).status === 200 ? true : undefined,
      );
      expect((await httpStatus(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    }

    // 40 transfers, 5 to a wallet that does not exist, 5 beyond the balance, 10 re-deliveries.
    const sent: Record<string, unknown>[] = [];
    for (let i = 1; i <= 40; i++)
      sent.push({
        operationId: `ok-${i}`,
        from: `w${1 + (i % 5)}`,
        to: `w${1 + ((i + 1) % 5)}`,
        amount: String(1 + (i % 7)),
      });
    for (let i = 1; i <= 5; i++) sent.push({ operationId: `unknown-${i}`, from: 'w1', to: 'w99', amount: '1' });
    for (let i = 1; i <= 5; i++) sent.push({ operationId: `poor-${i}`, from: 'w2', to: 'w3', amount: '1000000' });
    for (let i = 1; i <= 10; i++) sent.push({ ...sent[i * 3] });
    const jobs = await Promise.all(sent.map((data) => p.addRaw(data)));
    // One wait at a time (each adds a listener to the queue); the workers run the jobs meanwhile.
    const outcomes: TransferOutcome[] = [];
    for (const j of jobs) outcomes.push((await p.result(j, SETTLE_TIMEOUT_MS)) as TransferOutcome);
    expect(outcomes.filter((o) => o.outcome === 'duplicate')).toHaveLength(10);

    const scraped = await Promise.all(ports.map((port) => scrape(`http://127.0.0.1:${port}/metrics`)));
    for (const families of scraped) {
      const names = ours(families).map((f) => f.name);
      expect(names.length).toBeGreaterThanOrEqual(5);
      expect(names).toEqual(
        expect.arrayContaining([
          'fenced_transfers_outcomes_total',
          'fenced_transfers_rejections_total',
          'fenced_transfers_decision_duration_seconds',
          'fenced_transfers_lock_wait_seconds',
          'fenced_transfers_retries_total',
          'fenced_transfers_queue_jobs',
        ]),
      );
      expect(families.get('fenced_transfers_decision_duration_seconds')?.type).toBe('histogram');
      expect(families.has('process_cpu_user_seconds_total')).toBe(true);
      expect(
        sampleValue(families, 'fenced_transfers_queue_jobs', { queue: p.config.queueName, state: 'completed' }),
      ).toBe(jobs.length);
      // The pool gauges read the worker's own pg pool: it has decided transfers, so it holds a connection.
      const pooled = (state: string) => sampleValue(families, 'fenced_transfers_db_pool_connections', { state });
      expect(pooled('busy') + pooled('idle')).toBeGreaterThanOrEqual(1);
      expect(families.get('fenced_transfers_db_pool_waiting')?.samples).toHaveLength(1);
    }
    const sum = (family: string, labels: Record<string, string>) =>
      scraped.reduce((acc, f) => acc + sampleValue(f, family, labels), 0);
    const db = await databaseCounts(p.db.pg);
    expect(db).toEqual({ applied: 40, rejected: 10, byReason: { unknown_wallet: 5, insufficient_funds: 5 } });
    expect(sum('fenced_transfers_outcomes_total', { outcome: 'applied' })).toBe(db.applied);
    expect(sum('fenced_transfers_outcomes_total', { outcome: 'rejected' })).toBe(db.rejected);
    for (const reason of ['unknown_wallet', 'insufficient_funds', 'currency_mismatch', 'same_wallet']) {
      expect(sum('fenced_transfers_rejections_total', { reason })).toBe(db.byReason[reason] ?? 0);
    }
    expect(sum('fenced_transfers_outcomes_total', { outcome: 'duplicate' })).toBe(10);
    // Each worker is used: the load was shared (otherwise "summed over workers" says little).
    for (const families of scraped)
      expect(sampleValue(families, 'fenced_transfers_decision_duration_seconds_count')).toBeGreaterThan(0);

    // The demo's and the chaos harness's numbers are the same counters, copied to Redis every
    // second: every counter series of ours, summed over the scrapes, equals the aggregate.
    const scrapedTotals: Record<string, number> = {};
    for (const families of scraped) {
      for (const family of ours(families).filter((f) => f.type === 'counter')) {
        for (const s of family.samples) {
          const id = seriesId(s.name, s.labels);
          scrapedTotals[id] = (scrapedTotals[id] ?? 0) + s.value;
        }
      }
    }
    expect(Object.keys(scrapedTotals).length).toBeGreaterThanOrEqual(15);
    const keys = aggregateKeys(p.config.lockKeyPrefix, p.config.queueName);
    await waitFor('the Redis aggregate to equal the scraped counters', 15_000, async () => {
      const totals = await readCounterTotals(p.redis, keys);
      return JSON.stringify(Object.entries(totals).sort()) === JSON.stringify(Object.entries(scrapedTotals).sort())
        ? true
        : undefined;
    });
    expect(await p.metrics()).toMatchObject({
      applied: 40,
      rejected: 10,
      'rejected:unknown_wallet': 5,
      'rejected:insufficient_funds': 5,
      duplicate: 10,
    });

    for (const w of workers) w.child.kill('SIGTERM');
    const exits = await Promise.all(workers.map((w) => w.exited));
    expect(exits, workers.map((w) => w.output()).join('\n')).toEqual([
      { code: 0, signal: null },
      { code: 0, signal: null },
    ]);
    expect(workers[0]?.output()).toContain('"event":"worker_stopped"');
  });
});

describe('readiness gate', () => {
  /**
   * Watches a job for GATE_WATCH_MS. Untouched means: no attempt made and no decision recorded
   * the whole time, and waiting at the end. (A job BullMQ hands over right as the worker pauses
   * is put back untouched, so it may show as active for a moment.)
   */
  async function watchJob(
    p: Pipeline,
    jobId: string,
    readyzUrl: string,
  ): Promise<{ untouched: boolean; readyz: number[]; seen: string[] }> {
    const deadline = performance.now() + GATE_WATCH_MS;
    const readyz: number[] = [];
    const seen = new Set<string>();
    let untouched = true;
    const operationId = (await p.queue.getJob(jobId))?.data.operationId as string;
    for (;;) {
      const job = await p.queue.getJob(jobId);
      seen.add(`${await job?.getState()}/attempts=${job?.attemptsMade ?? '?'}`);
      readyz.push((await httpStatus(readyzUrl)).status);
      const recorded = await p.db.pg.query('SELECT 1 FROM transfers WHERE operation_id = $1', [operationId]);
      if ((job?.attemptsMade ?? 0) > 0 || recorded.rowCount !== 0) untouched = false;
      if (performance.now() >= deadline) {
        if ((await job?.getState()) !== 'waiting') untouched = false;
        return { untouched, readyz, seen: [...seen] };
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  async function gatedWorker(p: Pipeline, env: Record<string, string> = {}) {
    const target = new URL(p.db.url);
    const proxy = await FaultProxy.start('worker:postgres', target.hostname, Number(target.port || 5432));
    cleanups.push(() => proxy.close());
    const viaProxy = new URL(p.db.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const logDir = mkdtempSync(join(tmpdir(), 'ft-gate-'));
    cleanups.push(async () => rmSync(logDir, { recursive: true, force: true }));
    const worker = new WorkerProcess(1, {
      logDir,
      env: workerEnv(p, { DATABASE_URL: viaProxy.toString(), STARTUP_TIMEOUT_MS: '300000', ...env }),
    });
    cleanups.push(() => worker.stop());
    return { proxy, worker };
  }

  it('takes no job while the database does not answer (at start and at run time), and takes it once it does', async () => {
    const p = await open({ WORKER_CONCURRENCY: '2' });
    await p.seed(2, 100n);
    const { proxy, worker } = await gatedWorker(p);
    proxy.cut();
    worker.start();
    await worker.waitForPort(READY_TIMEOUT_MS);
    await waitFor('/healthz 200', READY_TIMEOUT_MS, async () =>
      (await httpStatus(worker.url('/healthz'))).status === 200 ? true : undefined,
    );
    // Until the first probe round is over the reason is just "starting"; then it names the server.
    const notReady = await waitFor('/readyz to say why', 30_000, async () => {
      const r = await httpStatus(worker.url('/readyz'));
      return r.body.includes('PostgreSQL') ? r : undefined;
    });
    expect(notReady.status).toBe(503);
    // The cut proxy accepts, then resets: the client sees that in its connect or in its first
    // read, depending on which comes first.
    expect(notReady.body).toMatch(
      /^not ready: starting: PostgreSQL at postgresql:\/\/.*: (connect|read) ECONN(REFUSED|RESET)/,
    );

    const first = await p.addRaw({ operationId: 'while-down-at-start', from: 'w1', to: 'w2', amount: '5' });
    const atStart = await watchJob(p, first.id as string, worker.url('/readyz'));
    expect(atStart).toMatchObject({ untouched: true, readyz: atStart.readyz.map(() => 503) });

    proxy.uncut();
    expect(APPLIED_ONCE).toContain(((await p.result(first, SETTLE_TIMEOUT_MS)) as { outcome: string }).outcome);
    await worker.waitUntilReady(READY_TIMEOUT_MS);

    // At run time: the health monitor sees the outage, pauses, and resumes by itself.
    proxy.cut();
    await waitFor('/readyz 503 after the cut', 30_000, async () =>
      (await httpStatus(worker.url('/readyz'))).status === 503 ? true : undefined,
    );
    const second = await p.addRaw({ operationId: 'while-down-at-run-time', from: 'w1', to: 'w2', amount: '5' });
    const atRunTime = await watchJob(p, second.id as string, worker.url('/readyz'));
    expect(atRunTime).toMatchObject({ untouched: true, readyz: atRunTime.readyz.map(() => 503) });
    proxy.uncut();
    expect(APPLIED_ONCE).toContain(((await p.result(second, SETTLE_TIMEOUT_MS)) as { outcome: string }).outcome);
    await worker.waitUntilReady(READY_TIMEOUT_MS);
    expect(await p.balances()).toEqual({ w1: 90n, w2: 110n });

    expect(await worker.stop()).toEqual({ code: 0, signal: null });
  });

  it("negative control: with the gate switched off (TRANSFERS_UNSAFE=no-readiness) the worker burns the job's attempts on the unreachable database", async () => {
    const p = await open({ WORKER_CONCURRENCY: '2' });
    await p.seed(2, 100n);
    const { proxy, worker } = await gatedWorker(p, {
      TRANSFERS_UNSAFE: 'no-readiness',
      TRANSFERS_ALLOW_UNSAFE: ALLOW_UNSAFE,
    });
    proxy.cut();
    worker.start();
    await worker.waitForPort(READY_TIMEOUT_MS);
    await waitFor('/healthz 200', READY_TIMEOUT_MS, async () =>
      (await httpStatus(worker.url('/healthz'))).status === 200 ? true : undefined,
    );
    const job = await p.addRaw({ operationId: 'while-down-ungated', from: 'w1', to: 'w2', amount: '5' });
    // What the gate prevents happens: the job is taken and an attempt spent on the unreachable
    // database. Waited for, not watched for a fixed window: a loaded machine can take longer than
    // GATE_WATCH_MS to get to the job, and the control would then fail for the wrong reason.
    await waitFor('an attempt spent on the job while the database is away', TAKEN_TIMEOUT_MS, async () =>
      ((await p.queue.getJob(job.id as string))?.attemptsMade ?? 0) > 0 ? true : undefined,
    );
    expect((await p.db.pg.query("SELECT 1 FROM transfers WHERE operation_id = 'while-down-ungated'")).rowCount).toBe(0);
    proxy.uncut();
    expect(APPLIED_ONCE).toContain(((await p.result(job, SETTLE_TIMEOUT_MS)) as { outcome: string }).outcome);
  });
});

describe('forced exits', () => {
  it('SHUTDOWN_TIMEOUT_MS passing, or a second signal, ends a worker whose jobs cannot finish with a non-zero exit', async () => {
    const p = await open({ WORKER_CONCURRENCY: '2' });
    await p.seed(4, 100n);
    // The decisions wait on the wallets' row locks, held by this test, for as long as it likes.
    const holder = await p.db.pg.connect();
    cleanups.push(async () => {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    });
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM wallets FOR UPDATE');
    const start = async (index: number, shutdownTimeoutMs: number) => {
      const logDir = mkdtempSync(join(tmpdir(), 'ft-forced-'));
      cleanups.push(async () => rmSync(logDir, { recursive: true, force: true }));
      const w = new WorkerProcess(index, {
        logDir,
        env: workerEnv(p, {
          SHUTDOWN_TIMEOUT_MS: String(shutdownTimeoutMs),
          DB_LOCK_TIMEOUT_MS: '600000',
          DB_STATEMENT_TIMEOUT_MS: '600000',
          LOCK_TTL_MS: '5000',
        }),
      });
      cleanups.push(() => w.stop());
      w.start();
      await w.waitUntilReady(READY_TIMEOUT_MS);
      return w;
    };
    const timedOut = await start(1, 2_000);
    const twice = await start(2, 120_000);
    // Four sources, four slots (2 workers × concurrency 2): every job gets its wallet's lock and waits in PostgreSQL.
    for (let i = 1; i <= 4; i++)
      await p.addRaw({ operationId: `stuck-${i}`, from: `w${i}`, to: `w${1 + (i % 4)}`, amount: '1' });
    await waitFor('both workers holding two jobs', 30_000, async () => {
      const inHand = await Promise.all(
        [timedOut, twice].map(async (w) =>
          sampleValue(await scrape(w.url('/metrics')), 'fenced_transfers_jobs_in_progress'),
        ),
      );
      return inHand.every((n) => n === 2) ? true : undefined;
    });

    expect(await timedOut.stop(120_000)).toEqual({ code: 1, signal: null });
    expect(logEvents(timedOut.logFile).some((e) => e.event === 'shutdown_timed_out')).toBe(true);

    process.kill(twice.pid as number, 'SIGTERM');
    await waitFor('worker 2 stopping', 30_000, () =>
      logEvents(twice.logFile).some((e) => e.event === 'worker_stopping') ? true : undefined,
    );
    // A repeat within a second is taken as the same request (Ctrl-C through npm arrives twice).
    await new Promise((r) => setTimeout(r, 1_200));
    expect(twice.running).toBe(true);
    process.kill(twice.pid as number, 'SIGTERM');
    await waitFor('worker 2 to exit', 60_000, () => (twice.running ? undefined : true));
    expect(await twice.stop()).toEqual({ code: 1, signal: null });
    expect(logEvents(twice.logFile).some((e) => e.event === 'shutdown_forced')).toBe(true);
  });
});

describe('start-up errors', () => {
  it('an unreachable database or Redis, or a taken METRICS_PORT, stops the worker with one line naming the variable, password hidden', async () => {
    const closedPort = await freePort();
    const db = await runCommand('npm', ['run', '-s', 'worker'], {
      DATABASE_URL: `postgresql://postgres:s3cret-pw@127.0.0.1:${closedPort}/transfers`,
      METRICS_PORT: 'off',
      STARTUP_TIMEOUT_MS: '3000',
      LOG_LEVEL: 'silent',
    });
    expect(db.code).toBe(1);
    const dbErrors = db.stderr.split('\n').filter((l) => l.startsWith('error'));
    expect(dbErrors).toEqual([
      `error: DATABASE_URL: PostgreSQL at postgresql://postgres:***@127.0.0.1:${closedPort}/transfers: connect ECONNREFUSED 127.0.0.1:${closedPort}; ` +
        'still not ready after STARTUP_TIMEOUT_MS=3000 ms',
    ]);
    expect(db.stdout + db.stderr).not.toContain('s3cret-pw');

    const redis = await runCommand('npm', ['run', '-s', 'worker'], {
      REDIS_URL: `redis://:s3cret-pw@127.0.0.1:${closedPort}`,
      METRICS_PORT: 'off',
      STARTUP_TIMEOUT_MS: '3000',
      LOG_LEVEL: 'silent',
    });
    expect(redis.code).toBe(1);
    expect(redis.stderr).toMatch(
      new RegExp(
        `^error: REDIS_URL(, DATABASE_URL)?: Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${closedPort}: connect ECONNREFUSED`,
        'm',
      ),
    );
    expect(redis.stdout + redis.stderr).not.toContain('s3cret-pw');

    const taken = createServer();
    const port = await new Promise<number>((resolve) =>
      taken.listen(0, '127.0.0.1', () => resolve((taken.address() as { port: number }).port)),
    );
    try {
      const busy = await runCommand('npm', ['run', '-s', 'worker'], {
        METRICS_PORT: String(port),
        METRICS_HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
      });
      expect(busy.code).toBe(1);
      expect(busy.stderr.trim()).toBe(
        `error: METRICS_PORT: port ${port} is already in use (127.0.0.1:${port}); ` +
          'give each worker process its own METRICS_PORT, or set METRICS_PORT=off',
      );
    } finally {
      taken.close();
    }
  });
});
