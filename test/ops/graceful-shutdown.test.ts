// Graceful shutdown under load: three worker processes, a producer that keeps enqueueing, and
// SIGTERM to one of them while it holds jobs. It must exit 0 within SHUTDOWN_TIMEOUT_MS and
// leave no lock key of its own in Redis; the queue drains, the ledger reconciles, every
// operation has exactly one recorded outcome, none is applied twice, and the counters the
// workers flushed (the stopped one included) equal the database's counts, and no job stalled
// (none was abandoned mid-way). The negative control runs the same scenario with the shutdown
// switched off (TRANSFERS_UNSAFE=no-graceful-shutdown: exit at once, jobs in hand abandoned) and
// shows the stall check catching it.
//
// The jobs in hand at the signal are there by construction, not by timing: the test holds every
// wallet row, sees decisions of worker 1 waiting on that hold, signals, and lets the hold go
// only once worker 1 has logged what it had in hand. A worker that looked busy on a scrape can
// otherwise have finished everything by the time the signal lands (seen once: jobsInHand 0).
import { afterEach, describe, expect, it } from 'vitest';
import type { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { waitForDrain } from '../../src/queue/queue-drain.ts';
import { pick, randomInt, seededRandom } from '../../src/workload/prng.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';
import { sampleValue } from '../support/prometheus-text.ts';
import {
  databaseCounts,
  holdWallets,
  instanceIdOf,
  lockKeysOwnedBy,
  logEvents,
  scrape,
  WAIT_POLL_MS,
  type WalletHold,
  waitFor,
} from '../support/worker-ops.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

const WALLETS = 20;
const PRODUCER_TICK_MS = 50;
const PRODUCER_BATCH = 40;
/** The producer stops by itself here, whatever happens. */
const PRODUCER_JOBS_MAX = 6_000;
const SHUTDOWN_TIMEOUT_MS = 30_000;
/** BullMQ's job lock (and stalled-check interval) of every worker: see scenario(). */
const JOB_LOCK_MS = 15_000;
const DRAIN_TIMEOUT_MS = 240_000;
const ALLOW_UNSAFE = 'i-understand-this-breaks-guarantees';
/** Wallet locks the target holds when it is signalled, so the check that it leaves none means something. */
const LOCKS_AT_SIGNAL_MIN = 3;
/**
 * How long the target's decisions get to queue on a hold of the wallets, with LOCKS_AT_SIGNAL_MIN
 * locks in its hands (it takes tens of ms). Not there by then, the target's slots are all taken
 * by jobs of fewer wallets, which cannot move while the hold lasts (seen: 3 to 8 wallets): the
 * hold is let go and taken again, for at most HOLD_WAIT_MS in all.
 */
const HOLD_SETTLE_MS = 3_000;
const HOLD_WAIT_MS = 60_000;
/** Transfers the target decides between two holds, so its slots turn over. */
const DECIDED_BETWEEN_HOLDS = 20;
/** Bound on the wait for the target's worker_stopping line, the hold still on. */
const STOPPING_WAIT_MS = 30_000;
/**
 * DB_LOCK_TIMEOUT_MS and DB_STATEMENT_TIMEOUT_MS of every worker: a decision waiting on the
 * hold is never cancelled before the test lets go (its waits are bounded well below this), so
 * the target's jobs cannot leave its hands on a timeout either.
 */
const DECISION_WAIT_MS = 600_000;

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0)
    await cleanups
      .pop()?.()
      .catch(() => undefined);
});

interface Message {
  readonly jobData: { operationId: string; from: string; to: string; amount: string };
}

/** Keeps enqueueing until stopped: transfers, re-deliveries of earlier ones, and some that must be rejected. */
function startProducer(p: Pipeline) {
  const random = seededRandom(9);
  const sent: Message[] = [];
  let stopped = false;
  let n = 0;
  const done = (async () => {
    while (!stopped && sent.length < PRODUCER_JOBS_MAX) {
      const batch: Message[] = [];
      for (let i = 0; i < PRODUCER_BATCH; i++) {
        n += 1;
        const earlier = sent.length > 0 && n % 10 === 0 ? pick(random, sent) : null;
        if (earlier !== null) {
          batch.push(earlier);
          continue;
        }
        const from = randomInt(random, 1, WALLETS);
        const to = 1 + (from % WALLETS);
        const amount = n % 30 === 0 ? '100000000' : String(randomInt(random, 1, 50));
        batch.push({
          jobData: { operationId: `op-${n}`, from: `w${from}`, to: n % 25 === 0 ? 'w999' : `w${to}`, amount },
        });
      }
      await p.queue.addBulk(batch.map((m) => ({ name: TRANSFER_JOB_NAME, data: m.jobData })));
      sent.push(...batch);
      await new Promise((r) => setTimeout(r, PRODUCER_TICK_MS));
    }
  })();
  return {
    sent,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

interface ScenarioResult {
  exit: Awaited<ReturnType<WorkerProcess['stop']>>;
  /** The stopped worker's worker_stopping log line (jobsInHand, locksHeld at the signal). */
  stopping: Record<string, unknown>;
  /** Lock keys owned by the stopped worker right after it exited. */
  leftLocks: string[];
  /** Jobs BullMQ found stalled (a worker took them and never finished them) at least once. */
  stalledJobs: number;
  /** Jobs answered `applied` / `rejected` versus the decisions the database recorded. */
  answered: { applied: number; rejected: number };
  recorded: { applied: number; rejected: number };
}

/**
 * Holds every wallet, so that no decision of any worker can end, once decisions of the target
 * wait on the hold and it has at least LOCKS_AT_SIGNAL_MIN wallet locks. Each waiting decision
 * is a batch of jobs the target holds, each under its wallet's lock, and none of them can finish,
 * or time out (DECISION_WAIT_MS), before the caller lets the hold go.
 */
async function holdWithJobsInHand(
  p: Pipeline,
  target: WorkerProcess,
  role: string,
  instanceId: string,
): Promise<WalletHold> {
  const applied = async () =>
    sampleValue(await scrape(target.url('/metrics')), 'fenced_transfers_outcomes_total', { outcome: 'applied' });
  const deadline = performance.now() + HOLD_WAIT_MS;
  for (let holds = 1; ; holds += 1) {
    const hold = await holdWallets(p.db.pg);
    cleanups.push(() => hold.release());
    const settleBy = performance.now() + HOLD_SETTLE_MS;
    while (performance.now() < settleBy) {
      if ((await hold.waitingDecisionsOf(role)) >= 1) {
        const locks = await lockKeysOwnedBy(p.redis, p.config.lockKeyPrefix, instanceId);
        if (locks.length >= LOCKS_AT_SIGNAL_MIN) return hold;
      }
      await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
    }
    await hold.release();
    if (performance.now() > deadline) {
      throw new Error(
        `no hold of the wallets in ${holds} found decisions of worker 1 waiting with ${LOCKS_AT_SIGNAL_MIN} locks in its hands`,
      );
    }
    const before = await applied();
    await waitFor('worker 1 deciding transfers between two holds', 60_000, async () =>
      (await applied()) >= before + DECIDED_BETWEEN_HOLDS ? true : undefined,
    );
  }
}

/**
 * Starts three workers and the producer; once worker 1 has decided transfers, holds the wallets
 * while decisions of worker 1 wait on the hold, SIGTERMs it, lets the hold go once it has logged
 * worker_stopping (what it had in hand), and lets the rest drain the queue.
 */
async function scenario(p: Pipeline, targetEnv: Record<string, string>): Promise<ScenarioResult> {
  await p.seed(WALLETS, 1_000_000n);
  // Worker 1 logs in as a role of its own: its sessions are told apart from the others' by it.
  const targetRole = await p.db.anotherWorkerRole();
  const common = {
    // A job abandoned by a dead worker comes back after seconds (the negative control needs it).
    // Not fewer: a worker renews its jobs' locks every half of this, and on a loaded machine
    // (both cores busy beside the suite) a renewal came later than 5 s, so jobs of the two
    // workers never signalled stalled too (seen: 8) and the check said nothing of the target.
    JOB_LOCK_DURATION_MS: String(JOB_LOCK_MS),
    JOB_STALLED_INTERVAL_MS: String(JOB_LOCK_MS),
    SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    DB_LOCK_TIMEOUT_MS: String(DECISION_WAIT_MS),
    DB_STATEMENT_TIMEOUT_MS: String(DECISION_WAIT_MS),
    TRANSFERS_UNSAFE: '',
  };
  const workers: WorkerProcess[] = [];
  cleanups.push(async () => {
    for (const w of workers) await w.stop();
  });
  for (const index of [1, 2, 3]) {
    const own = index === 1 ? { DATABASE_URL: targetRole.url, ...targetEnv } : {};
    workers.push(await spawnWorkerProcess(p, { ...common, ...own }, index));
  }
  const [target, ...others] = workers as [WorkerProcess, WorkerProcess, WorkerProcess];
  const instanceId = instanceIdOf(target.logFile);
  const producer = startProducer(p);
  cleanups.push(() => producer.stop());

  await waitFor('worker 1 deciding transfers', 120_000, async () => {
    const m = await scrape(target.url('/metrics')).catch(() => null);
    if (m === null) return undefined;
    return sampleValue(m, 'fenced_transfers_outcomes_total', { outcome: 'applied' }) >= 50 ? true : undefined;
  });
  // Mid-batch, by construction: jobs the target cannot finish before the hold goes, which is after the signal.
  const hold = await holdWithJobsInHand(p, target, targetRole.role, instanceId);
  const exited = target.stop(SHUTDOWN_TIMEOUT_MS + 30_000);
  const stopping = await waitFor('worker 1 logging worker_stopping', STOPPING_WAIT_MS, () =>
    logEvents(target.logFile).find((e) => e.event === 'worker_stopping'),
  );
  await hold.release();
  const exit = await exited;
  const leftLocks = await lockKeysOwnedBy(p.redis, p.config.lockKeyPrefix, instanceId);
  await producer.stop();
  await waitForDrain(p.queue, DRAIN_TIMEOUT_MS);
  for (const w of others) expect(await w.stop()).toEqual({ code: 0, signal: null });

  // The database's guarantees hold either way: nothing lost, one outcome per operation, the
  // ledger reconciles, no job in the failed set.
  const jobs = await p.queue.getJobs(['completed', 'failed'], 0, -1);
  expect(jobs.length).toBe(producer.sent.length);
  expect(await p.queue.getFailedCount()).toBe(0);
  const report = await reconcile(p.db.prisma);
  expect(report.invariants.filter((i) => !i.ok)).toEqual([]);
  const operations = new Set(producer.sent.map((m) => m.jobData.operationId));
  const recorded = await p.db.pg.query<{ n: string }>(
    'SELECT count(*) AS n FROM transfers WHERE operation_id = ANY($1::text[])',
    [[...operations]],
  );
  expect(Number(recorded.rows[0]?.n)).toBe(operations.size);
  const db = await databaseCounts(p.db.pg);
  const answers = jobs.map((j) => (j.returnvalue as { outcome: string }).outcome);
  return {
    exit,
    stopping,
    leftLocks,
    stalledJobs: jobs.filter((j) => j.stalledCounter > 0).length,
    answered: {
      applied: answers.filter((a) => a === 'applied').length,
      rejected: answers.filter((a) => a === 'rejected').length,
    },
    recorded: { applied: db.applied, rejected: db.rejected },
  };
}

describe('SIGTERM to one of three workers under steady load', () => {
  it('finishes its jobs in hand, exits 0, leaves no lock of its own; nothing lost or applied twice; flushed counters equal the database', {
    timeout: 360_000,
  }, async () => {
    const p = await createPipeline({ WORKER_CONCURRENCY: '8', LOCK_TTL_MS: '10000', JOB_ATTEMPTS_MAX: '50' });
    cleanups.push(() => p.close());
    const r = await scenario(p, {});
    // What it had in hand at the signal: the jobs of its decisions waiting on the hold, under their locks.
    expect(r.stopping.jobsInHand).toBeGreaterThanOrEqual(1);
    expect(r.stopping.locksHeld).toBeGreaterThanOrEqual(1);
    expect(r.exit).toEqual({ code: 0, signal: null });
    expect(r.leftLocks).toEqual([]);
    expect(r.stalledJobs).toBe(0);
    // No decision was cut off from its answer: each recorded decision was answered once as such,
    // every other delivery of the operation from the record.
    expect(r.answered).toEqual(r.recorded);
    // The stopped worker's last counts reached the aggregate: the sums match the ledger exactly.
    const db = await databaseCounts(p.db.pg);
    const m = await p.metrics();
    expect({
      applied: m.applied ?? 0,
      rejected: m.rejected ?? 0,
      unknown: m['rejected:unknown_wallet'] ?? 0,
      poor: m['rejected:insufficient_funds'] ?? 0,
    }).toEqual({
      applied: db.applied,
      rejected: db.rejected,
      unknown: db.byReason.unknown_wallet ?? 0,
      poor: db.byReason.insufficient_funds ?? 0,
    });
  });

  it('negative control: without the graceful shutdown (TRANSFERS_UNSAFE=no-graceful-shutdown) the stall check catches the abandoned jobs', {
    timeout: 360_000,
  }, async () => {
    const p = await createPipeline({ WORKER_CONCURRENCY: '8', LOCK_TTL_MS: '10000', JOB_ATTEMPTS_MAX: '50' });
    cleanups.push(() => p.close());
    const r = await scenario(p, { TRANSFERS_UNSAFE: 'no-graceful-shutdown', TRANSFERS_ALLOW_UNSAFE: ALLOW_UNSAFE });
    expect(r.stopping.jobsInHand).toBeGreaterThanOrEqual(1);
    expect(r.stopping.locksHeld).toBeGreaterThanOrEqual(1);
    // The check the graceful test passes fails here: every job the worker had in hand stayed
    // active until its BullMQ lock expired, and came back as stalled.
    expect(r.stalledJobs).toBeGreaterThan(0);
    // Its wallet locks are left behind too (those of the jobs waiting on the hold), but only
    // until their TTL runs out, which a slow machine can pass before the scan after the exit:
    // that check cannot be the control.
  });
});
