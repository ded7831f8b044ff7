// The demo, the project's main job: from nothing to a reconciled ledger under a frozen worker.
// Services → migrate → 50 wallets opened and funded through the decision (db:seed's path) → 3
// worker processes → 5,000 transfers with 20 % duplicates, conflicts and invalid messages → one
// worker frozen past its lock TTL and resumed → drain → reconcile → a summary table. Uses its own database, queue and key prefix.
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import { type Config, redisTargetEnv, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR, PROJECT_ROOT } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { createPrisma } from '../../src/db/prisma.ts';
import { ensureWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { type ReconcileReport, reconcile } from '../../src/ledger/reconciliation.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import type { Logger } from '../../src/log/logger.ts';
import { aggregateKeys, readCounterTotals, transferCounterSummary } from '../../src/metrics/counter-aggregate.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { enqueueTransfers, TransferQueues } from '../../src/queue/producer.ts';
import { queueProgress, waitForDrain } from '../../src/queue/queue-drain.ts';
import { bullmqConnection, type RedisClient } from '../../src/queue/redis-connection.ts';
import { deleteMatching } from '../../src/queue/redis-scan.ts';
import { seedByOperations } from '../../src/queue/seed-by-operations.ts';
import { randomWorkload } from '../../src/workload/random-transfers.ts';
import { WorkerFleet } from '../fleet/worker-processes.ts';
import { ensureServices } from '../services/ensure-services.ts';

export const DEMO_DATABASE = 'transfers_demo';
export const DEMO_QUEUE = 'transfers-demo';
export const DEMO_KEY_PREFIX = 'demo:';
/** The workers' login role (cluster-wide, kept between runs like the database; updated each run). */
export const DEMO_WORKER_ROLE = 'transfers_demo_worker';
const WORKER_PASSWORD_BYTES = 24;
export const DEMO_WALLETS = 50;
export const DEMO_BALANCE_MINOR = 2_000n;
export const DEMO_TRANSFERS = 5_000;
export const DEMO_DUPLICATE_RATE = 0.2;
export const DEMO_CONFLICTS = 10;
export const DEMO_WORKERS = 3;
export const DEMO_LOCK_TTL_MS = 2_000;
/** The frozen worker stays stopped this many lock TTLs: long enough to lose its locks. */
export const DEMO_FREEZE_TTLS = 2.5;
export const DEMO_DRAIN_TIMEOUT_MS = 100_000;
export const DEMO_FREEZE_AFTER_COMPLETED = 600;
export const DEMO_PROGRESS_INTERVAL_MS = 2_000;

async function waitForCompleted(queues: readonly Queue[], count: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await queueProgress(queues)).completed < count) {
    if (performance.now() > deadline) throw new Error(`fewer than ${count} jobs completed within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Messages a foreign producer might send; each must fail with its reason and move nothing. */
const INVALID_MESSAGES: unknown[] = [
  null,
  'not json',
  { operationId: 'bad-1', from: 'wallet-1', to: 'wallet-2', amount: 12.5 },
  { operationId: 'bad-2', from: 'wallet-1', to: 'wallet-2', amount: '-5' },
  { operationId: 'bad-3', from: 'wallet-1', to: 'wallet-1', amount: '5' },
  { operationId: 'x'.repeat(5_000), from: 'wallet-1', to: 'wallet-2', amount: '5' },
  { operationId: "bad-5'; DROP TABLE wallets; --", from: 'wallet-1', to: 'wallet-2', amount: '5' },
  { operationId: 'bad-6', from: 'wallet-1', to: 'wallet-2', amount: '1e3' },
];

export interface DemoSummary {
  durationS: number;
  enqueued: { jobs: number; operations: number; duplicates: number; conflicts: number; invalid: number };
  outcomes: Record<string, number>;
  failedJobs: number;
  frozenWorker: { index: number; frozeForMs: number };
  reconcile: ReconcileReport;
  operationsWithoutOutcome: number;
  ok: boolean;
}

async function resetDemoState(config: Config, queues: TransferQueues, connection: RedisClient): Promise<string> {
  const databaseUrl = withDatabase(config.databaseUrl, DEMO_DATABASE);
  await dropDatabase(databaseUrl);
  for (const queue of queues.queues) await queue.obliterate({ force: true });
  await deleteMatching(connection, `${DEMO_KEY_PREFIX}*`);
  return databaseUrl;
}

export async function runDemo(config: Config, logger: Logger, out: NodeJS.WritableStream): Promise<DemoSummary> {
  const startedAtMs = performance.now();
  const say = (line: string) => out.write(`${line}\n`);
  say('· making Redis and PostgreSQL reachable');
  await ensureServices(config, logger);

  const connection = bullmqConnection(config);
  // Cluster mode and QUEUE_SHARDS carry over from the configuration; the names are the demo's own.
  const queues = TransferQueues.open(connection, { ...config, queueName: DEMO_QUEUE }, config.jobAttemptsMax);
  const queue = queues.queues[0] as Queue;
  const runDir = join(PROJECT_ROOT, '.runs', `demo-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  mkdirSync(runDir, { recursive: true });
  const databaseUrl = await resetDemoState(config, queues, connection);
  const prisma = createPrisma({ ...config, databaseUrl });
  let fleet: WorkerFleet | null = null;
  try {
    say(`· migrating ${DEMO_DATABASE}`);
    await migrate(databaseUrl, MIGRATIONS_DIR, logger);
    say(`· opening ${DEMO_WALLETS} wallets of ${DEMO_BALANCE_MINOR}: lock, fence, decision (npm run db:seed's path)`);
    const lock = new FencedLock({ redis: connection, lockTtlMs: DEMO_LOCK_TTL_MS, keyPrefix: DEMO_KEY_PREFIX });
    const wallets = { wallets: DEMO_WALLETS, balanceMinor: DEMO_BALANCE_MINOR, prefix: 'wallet-', currency: 'EUR' };
    await seedByOperations(prisma, lock, wallets);
    // The owner migrated and seeded; the workers log in as the least-privilege role, which
    // can call the decision function and nothing else. A fresh password each run: only the
    // workers started below need it.
    const workerPassword = randomBytes(WORKER_PASSWORD_BYTES).toString('hex');
    await ensureWorkerRole(databaseUrl, DEMO_WORKER_ROLE, workerPassword, config);
    say(`· workers log in as the role ${DEMO_WORKER_ROLE} (EXECUTE on the decision function only)`);
    fleet = WorkerFleet.create(DEMO_WORKERS, {
      logDir: runDir,
      entry: config.workerEntry,
      env: {
        DATABASE_URL: roleUrl(databaseUrl, DEMO_WORKER_ROLE, workerPassword),
        ...redisTargetEnv(config),
        QUEUE_NAME: DEMO_QUEUE,
        QUEUE_SHARDS: String(config.queueShards),
        QUEUE_SHARDS_CONSUMED: '',
        LOCK_KEY_PREFIX: DEMO_KEY_PREFIX,
        LOCK_TTL_MS: String(DEMO_LOCK_TTL_MS),
        LOG_LEVEL: 'info',
        TRANSFERS_UNSAFE: '',
      },
    });

    say(`· starting ${DEMO_WORKERS} worker processes (logs in ${runDir})`);
    fleet.startAll();

    const workload = randomWorkload({
      transfers: DEMO_TRANSFERS,
      wallets: DEMO_WALLETS,
      walletPrefix: 'wallet-',
      duplicateRate: DEMO_DUPLICATE_RATE,
      conflicts: DEMO_CONFLICTS,
      amountMaxMinor: 100,
      seed: 2026,
      operationPrefix: 'demo-',
    });
    say(`· enqueueing ${workload.length} transfer jobs and ${INVALID_MESSAGES.length} invalid messages`);
    await enqueueTransfers(
      queues,
      workload.map((m) => m.wire),
      config.transferAmountMax,
    );
    await queue.addBulk(INVALID_MESSAGES.map((data) => ({ name: TRANSFER_JOB_NAME, data })));

    const frozen = fleet.workers[1];
    if (frozen === undefined) throw new Error('the demo needs at least two workers');
    const frozeForMs = Math.round(DEMO_LOCK_TTL_MS * DEMO_FREEZE_TTLS);
    // Freeze in full flight: once every worker is up and jobs are completing, the frozen
    // one is almost surely holding locks and has decisions in hand.
    await waitForCompleted(queues.queues, DEMO_FREEZE_AFTER_COMPLETED, DEMO_DRAIN_TIMEOUT_MS);
    say(
      `· freezing worker ${frozen.index} (SIGSTOP) for ${frozeForMs} ms, longer than its ${DEMO_LOCK_TTL_MS} ms lock TTL`,
    );
    frozen.freeze();
    const thaw = setTimeout(() => {
      frozen.thaw();
      say(`· worker ${frozen.index} resumed (SIGCONT)`);
    }, frozeForMs);

    const total = workload.length + INVALID_MESSAGES.length;
    let lastProgressMs = 0;
    await waitForDrain(queues.queues, DEMO_DRAIN_TIMEOUT_MS, (p) => {
      if (performance.now() - lastProgressMs < DEMO_PROGRESS_INTERVAL_MS) return;
      lastProgressMs = performance.now();
      say(
        `  progress: ${p.completed + p.failed}/${total} done, ${p.active} active, ${p.waiting + p.delayed + p.prioritized} queued`,
      );
    });
    clearTimeout(thaw);
    frozen.thaw();

    // Stopped first: each worker copies its counters to Redis one last time as it stops.
    say('· stopping the workers (SIGTERM)');
    await fleet.stopAll();
    say('· reconciling the ledger');
    const report = await reconcile(prisma);
    const metrics = transferCounterSummary(
      await readCounterTotals(connection, aggregateKeys(DEMO_KEY_PREFIX, DEMO_QUEUE)),
    );
    const operations = new Set(workload.map((m) => m.wire.operationId));
    const recorded = await prisma.$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM transfers WHERE operation_id = ANY(${[...operations]}::text[])`;
    const operationsWithoutOutcome = operations.size - Number(recorded[0]?.n ?? 0n);
    const failedJobs = (await queueProgress(queues.queues)).failed;
    const summary: DemoSummary = {
      durationS: Math.round((performance.now() - startedAtMs) / 100) / 10,
      enqueued: {
        jobs: total,
        operations: operations.size,
        duplicates: workload.filter((m) => m.kind === 'duplicate').length,
        conflicts: workload.filter((m) => m.kind === 'conflict').length,
        invalid: INVALID_MESSAGES.length,
      },
      outcomes: metrics,
      failedJobs,
      frozenWorker: { index: frozen.index, frozeForMs },
      reconcile: report,
      operationsWithoutOutcome,
      ok: report.ok && operationsWithoutOutcome === 0 && failedJobs === INVALID_MESSAGES.length,
    };
    return summary;
  } finally {
    await fleet?.stopAll();
    await prisma.$disconnect();
    await queues.close();
    connection.disconnect();
  }
}

export function formatSummary(s: DemoSummary): string {
  const m = s.outcomes;
  const rejected = Object.entries(m)
    .filter(([k]) => k.startsWith('rejected:'))
    .map(([k, v]) => [`  rejected: ${k.slice('rejected:'.length)}`, v] as const);
  const rows: (readonly [string, string | number])[] = [
    ['jobs enqueued', s.enqueued.jobs],
    ['  distinct operations', s.enqueued.operations],
    ['  duplicate deliveries', s.enqueued.duplicates],
    ['  conflicting reuses of an id', s.enqueued.conflicts],
    ['  invalid messages', s.enqueued.invalid],
    ['applied', m.applied ?? 0],
    ...rejected,
    ['duplicates answered from the record', m.duplicate ?? 0],
    ['conflicts', m.conflict ?? 0],
    ['invalid (failed at once, with reason)', m.invalid ?? 0],
    ['stale fences refused by the database', m.stale_fence ?? 0],
    ['lock losses detected before commit', m.lock_lost ?? 0],
    ['leases lost with a decision in flight', m.lease_lost_in_flight ?? 0],
    ['busy-lock deferrals', m.lock_busy ?? 0],
    ['transient errors retried', m.transient_error ?? 0],
    ['jobs in the failed set', s.failedJobs],
    ['operations without an outcome', s.operationsWithoutOutcome],
    [`worker ${s.frozenWorker.index} frozen for`, `${s.frozenWorker.frozeForMs} ms`],
    ['duration', `${s.durationS} s`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length), ...s.reconcile.invariants.map((i) => i.name.length + 2)) + 2;
  const lines = rows.map(([k, v]) => `${k.padEnd(width)}${v}`);
  lines.push('', 'invariants');
  for (const inv of s.reconcile.invariants) {
    lines.push(
      `  ${inv.name.padEnd(width - 2)}${inv.ok ? 'holds' : `VIOLATED ${JSON.stringify(inv.counterexamples)}`}`,
    );
  }
  const { balanceSum, openingSum, settledSum } = s.reconcile.totals;
  lines.push('', `balances: ${balanceSum} now, ${openingSum} opened, ${settledSum} deposited less withdrawn`);
  lines.push(s.ok ? 'RESULT: every invariant holds, every operation has one outcome' : 'RESULT: FAILED');
  return lines.join('\n');
}
