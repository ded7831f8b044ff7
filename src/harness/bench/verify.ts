// Checks a case after it ran: every transfer ended applied (and nothing else was recorded),
// the ledger invariants hold (src/ledger/reconciliation.ts), and the queue is drained with no job in
// the failed set. A figure from a run that fails these is not a figure: the bench stops.
import type { Queue } from 'bullmq';
import { OUTCOME_READ_LIMIT_MAX, readOutcomes } from '../../intake/outcome-feed.ts';
import { reconcile } from '../../ledger/reconciliation.ts';
import { sequenceWholeFeed } from '../chaos/intake-checks.ts';
import type { Verification } from './case-result.ts';
import type { Sandbox } from './sandbox.ts';

export interface QueueState {
  readonly failedJobs: number;
  readonly jobsLeft: number;
  /** null where completed jobs are deleted (Graphile Worker). */
  readonly completedJobs: number | null;
}

export async function bullmqState(queue: Queue): Promise<QueueState> {
  const c = await queue.getJobCounts(
    'waiting',
    'delayed',
    'active',
    'prioritized',
    'waiting-children',
    'completed',
    'failed',
  );
  const left =
    (c.waiting ?? 0) + (c.delayed ?? 0) + (c.active ?? 0) + (c.prioritized ?? 0) + (c['waiting-children'] ?? 0);
  return { failedJobs: c.failed ?? 0, jobsLeft: left, completedJobs: c.completed ?? 0 };
}

/** Jobs completed, none failed, none left: for the no-op queue case (no database). */
export function verifyJobs(expected: number, state: QueueState): Verification {
  const problems: string[] = [];
  if (state.failedJobs > 0) problems.push(`${state.failedJobs} jobs failed`);
  if (state.jobsLeft > 0) problems.push(`${state.jobsLeft} jobs still queued`);
  const completed = state.completedJobs ?? 0;
  if (completed !== expected) problems.push(`${completed} jobs completed, expected ${expected}`);
  return {
    ok: problems.length === 0,
    expected,
    applied: completed,
    notApplied: expected - completed,
    failedJobs: state.failedJobs,
    jobsLeft: state.jobsLeft,
    invariantsHeld: null,
    problems,
  };
}

/**
 * Every operation with the prefix is recorded as applied, exactly `expected` of them, and the
 * invariants hold; plus, when given, the job queue's state (BullMQ or Graphile Worker).
 */
export async function verifyLedger(
  sandbox: Sandbox,
  operationPrefix: string,
  expected: number,
  jobs: QueueState | null,
): Promise<Verification> {
  const pool = sandbox.requirePool();
  const { rows } = await pool.query<{ applied: string; total: string; others: string }>(
    `SELECT count(*) FILTER (WHERE starts_with(operation_id, $1) AND status = 'applied') AS applied,
            count(*) FILTER (WHERE starts_with(operation_id, $1)) AS total,
            count(*) FILTER (WHERE NOT starts_with(operation_id, $1)) AS others
       FROM transfers`,
    [operationPrefix],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('count query returned no row');
  const applied = Number(row.applied);
  const total = Number(row.total);
  const problems: string[] = [];
  if (applied !== expected) problems.push(`${applied} transfers applied, expected ${expected}`);
  if (total !== applied) problems.push(`${total - applied} transfers recorded with another outcome`);
  if (Number(row.others) > 0) problems.push(`${row.others} operations that the bench did not send`);
  if (sandbox.prisma === null) throw new Error('verifyLedger needs the case database');
  const report = await reconcile(sandbox.prisma);
  for (const inv of report.invariants) {
    if (!inv.ok) problems.push(`invariant violated: ${inv.name} ${JSON.stringify(inv.counterexamples.slice(0, 3))}`);
  }
  if (jobs !== null) {
    if (jobs.failedJobs > 0) problems.push(`${jobs.failedJobs} jobs failed`);
    if (jobs.jobsLeft > 0) problems.push(`${jobs.jobsLeft} jobs still queued`);
    if (jobs.completedJobs !== null && jobs.completedJobs !== expected) {
      problems.push(`${jobs.completedJobs} jobs completed, expected ${expected}`);
    }
  }
  return {
    ok: problems.length === 0,
    expected,
    applied,
    notApplied: expected - applied,
    failedJobs: jobs?.failedJobs ?? null,
    jobsLeft: jobs?.jobsLeft ?? null,
    invariantsHeld: report.ok,
    problems,
  };
}

/**
 * The intake cases' own checks, beside verifyLedger(): exactly `expected` requests with the
 * prefix, every one decided and none given up, and the outcome feed holding exactly one event per
 * request, each `applied`. Sequences whatever is still pending first, as the chaos checker does
 * (the workers that would have are stopped; reading does not sequence: outcome-feed.ts).
 */
export async function verifyIntake(
  sandbox: Sandbox,
  operationPrefix: string,
  expected: number,
): Promise<{ problems: string[]; feedEvents: number }> {
  const pool = sandbox.requirePool();
  const { rows } = await pool.query<{ total: string; undecided: string; given_up: string }>(
    `SELECT count(*) AS total,
            count(*) FILTER (WHERE decided_at IS NULL) AS undecided,
            count(*) FILTER (WHERE given_up_at IS NOT NULL) AS given_up
       FROM transfer_requests WHERE starts_with(operation_id, $1)`,
    [operationPrefix],
  );
  const row = rows[0];
  if (row === undefined) throw new Error('count query returned no row');
  const problems: string[] = [];
  if (Number(row.total) !== expected) problems.push(`${row.total} requests in the intake, expected ${expected}`);
  if (Number(row.undecided) > 0) problems.push(`${row.undecided} requests not decided`);
  if (Number(row.given_up) > 0) problems.push(`${row.given_up} requests given up`);

  const perOperation = new Map<string, number>();
  let notApplied = 0;
  let events = 0;
  let after = 0n;
  await sequenceWholeFeed(pool);
  for (;;) {
    const page = await readOutcomes(pool, after, OUTCOME_READ_LIMIT_MAX);
    if (page.length === 0) break;
    for (const event of page) {
      after = event.position;
      if (!event.operationId.startsWith(operationPrefix)) continue;
      events += 1;
      perOperation.set(event.operationId, (perOperation.get(event.operationId) ?? 0) + 1);
      if (event.kind !== 'applied') notApplied += 1;
    }
  }
  const twice = [...perOperation.values()].filter((n) => n > 1).length;
  if (perOperation.size !== expected) {
    problems.push(`${perOperation.size} operations in the outcome feed, expected ${expected}`);
  }
  if (twice > 0) problems.push(`${twice} operations with more than one feed event`);
  if (notApplied > 0) problems.push(`${notApplied} feed events not 'applied'`);
  return { problems, feedEvents: events };
}
