// Checks a case after it ran: every transfer ended applied (and nothing else was recorded),
// the ledger invariants hold (src/ledger/reconciliation.ts), and the queue is drained with no job in
// the failed set; for e2e-payments, also every hold, capture and split leg as sent and every wallet
// at its expected balance. A figure from a run that fails these is not a figure: the bench stops.
import type { Queue } from 'bullmq';
import { OUTCOME_READ_LIMIT_MAX, readOutcomes } from '../../src/intake/outcome-feed.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { sequenceWholeFeed } from '../chaos/intake-state.ts';
import { PAYMENT_PART_KINDS, type PaymentPart } from './bench-options.ts';
import { type BenchPayments, paymentPrefixesOf } from './bench-workload.ts';
import type { Verification } from './case-result.ts';
import { BENCH_WALLET_PREFIX, type Sandbox } from './sandbox.ts';

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

/** What is wrong with a queue after a case that sent `expected` jobs: failed, left or missing ones. */
export function queueProblems(jobs: QueueState, expected: number): string[] {
  const problems: string[] = [];
  if (jobs.failedJobs > 0) problems.push(`${jobs.failedJobs} jobs failed`);
  if (jobs.jobsLeft > 0) problems.push(`${jobs.jobsLeft} jobs still queued`);
  if (jobs.completedJobs !== null && jobs.completedJobs !== expected) {
    problems.push(`${jobs.completedJobs} jobs completed, expected ${expected}`);
  }
  return problems;
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
  if (jobs !== null) problems.push(...queueProblems(jobs, expected));
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

/** The holding account of a payer, `$held:<wallet>`: its balance is the payer's `held`. */
export function holdingWalletOf(wallet: string): string {
  return `$held:${wallet}`;
}

/**
 * Every account's balance once e2e-payments' parts up to `through` (in PAYMENT_PARTS order) have
 * applied: `wallets` opened with `openingMinor`, every hold moved to its payer's holding account,
 * every capture moved its whole hold to the payee, every split moved each leg to its wallet.
 */
export function expectedPaymentBalances(
  payments: BenchPayments,
  wallets: number,
  openingMinor: bigint,
  through: PaymentPart,
): Map<string, bigint> {
  const balances = new Map<string, bigint>();
  for (let i = 1; i <= wallets; i++) balances.set(`${BENCH_WALLET_PREFIX}${i}`, openingMinor);
  const move = (from: string, to: string, amount: bigint) => {
    balances.set(from, (balances.get(from) ?? 0n) - amount);
    balances.set(to, (balances.get(to) ?? 0n) + amount);
  };
  for (const h of payments.holds) move(h.from, holdingWalletOf(h.from), BigInt(h.amount));
  if (through === 'e2e-payments-hold') return balances;
  for (const h of payments.holds) move(holdingWalletOf(h.from), h.to, BigInt(h.amount));
  if (through === 'e2e-payments-capture') return balances;
  for (const s of payments.splits) for (const leg of s.legs) move(s.from, leg.to, BigInt(leg.amount));
  return balances;
}

/** Sample of what went wrong, for a problem line: at most this many ids. */
const EXAMPLES_MAX = 3;

/**
 * e2e-payments' own checks after one part, beside verifyLedger() over every operation sent so far:
 * after the holds, every hold recorded as sent and active; after the captures, every hold captured
 * whole by its own capture, and each capture recorded as moving the hold to its payee; after the
 * splits, every leg recorded as sent. After each part, every wallet's balance and held amount are
 * the ones the operations sent so far give (expectedPaymentBalances).
 */
export async function verifyPaymentsPart(
  sandbox: Sandbox,
  part: PaymentPart,
  payments: BenchPayments,
  operationPrefix: string,
  wallets: number,
  openingMinor: bigint,
): Promise<{ problems: string[]; applied: number }> {
  const pool = sandbox.requirePool();
  const prefixes = paymentPrefixesOf(operationPrefix);
  const problems: string[] = [];
  const n = payments.holds.length;
  const holdIds = payments.holds.map((h) => h.operationId);
  const count = async (sql: string, values: unknown[]): Promise<number> =>
    Number((await pool.query<{ n: string }>(sql, values)).rows[0]?.n ?? 0);

  if (part === 'e2e-payments-hold') {
    const matching = await count(
      `SELECT count(*) AS n
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS w(hold_id, from_wallet, to_wallet, amount)
         JOIN holds h USING (hold_id)
        WHERE h.from_wallet = w.from_wallet AND h.to_wallet = w.to_wallet AND h.amount = w.amount
          AND h.state = 'active' AND h.captured = 0 AND h.released = 0 AND h.expires_at > now()`,
      [
        holdIds,
        payments.holds.map((h) => h.from),
        payments.holds.map((h) => h.to),
        payments.holds.map((h) => h.amount),
      ],
    );
    if (matching !== n) problems.push(`${n - matching} of ${n} holds not active as sent`);
  }
  if (part === 'e2e-payments-capture') {
    const captured = await count(
      `SELECT count(*) AS n
         FROM unnest($1::text[], $2::text[]) AS w(hold_id, capture_id)
         JOIN holds h USING (hold_id)
         JOIN transfers t ON t.operation_id = w.capture_id
        WHERE h.state = 'captured' AND h.captured = h.amount AND h.released = 0 AND h.ended_by = w.capture_id
          AND t.kind = 'capture' AND t.status = 'applied' AND t.original_id = h.hold_id
          AND t.from_wallet = h.from_wallet AND t.to_wallet = h.to_wallet AND t.amount = h.amount`,
      [holdIds, payments.captures.map((c) => c.operationId)],
    );
    if (captured !== n) problems.push(`${n - captured} of ${n} holds not captured whole by their capture`);
  }
  if (part === 'e2e-payments-split') {
    const legs = payments.splits.flatMap((s) => s.legs.map((leg, i) => ({ id: s.operationId, leg: i + 1, ...leg })));
    const matching = await count(
      `SELECT count(*) AS n
         FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[]) AS w(operation_id, leg, to_wallet, amount)
         JOIN split_legs l USING (operation_id, leg)
         JOIN transfers t USING (operation_id)
        WHERE l.to_wallet = w.to_wallet AND l.amount = w.amount AND t.kind = 'split' AND t.status = 'applied'`,
      [legs.map((l) => l.id), legs.map((l) => l.leg), legs.map((l) => l.to), legs.map((l) => l.amount)],
    );
    const recorded = await count('SELECT count(*) AS n FROM split_legs WHERE starts_with(operation_id, $1)', [
      prefixes.split,
    ]);
    if (matching !== legs.length || recorded !== legs.length) {
      problems.push(`${recorded} split legs recorded, ${matching} as sent, expected ${legs.length}`);
    }
  }
  // Every wallet, and its holding account (its `held`), at what the operations sent so far give.
  const expected = expectedPaymentBalances(payments, wallets, openingMinor, part);
  const { rows } = await pool.query<{ id: string; balance: string; held: string }>(
    'SELECT id, balance::text, held::text FROM wallets',
  );
  const off: string[] = [];
  const seen = new Set<string>();
  for (const row of rows) {
    const accounts: [string, string][] = [
      [row.id, row.balance],
      [holdingWalletOf(row.id), row.held],
    ];
    for (const [id, actual] of accounts) {
      seen.add(id);
      const want = expected.get(id) ?? 0n;
      if (BigInt(actual) !== want) off.push(`${id} ${actual} (expected ${want})`);
    }
  }
  for (const [id, want] of expected) if (!seen.has(id) && want !== 0n) off.push(`${id} missing (expected ${want})`);
  if (off.length > 0) {
    problems.push(`${off.length} wallets off their expected balance: ${off.slice(0, EXAMPLES_MAX).join(', ')}`);
  }
  const partPrefix = prefixes[PAYMENT_PART_KINDS[part]];
  const applied = await count(
    "SELECT count(*) AS n FROM transfers WHERE starts_with(operation_id, $1) AND status = 'applied' AND kind = $2",
    [partPrefix, PAYMENT_PART_KINDS[part]],
  );
  if (applied !== n) problems.push(`${applied} ${PAYMENT_PART_KINDS[part]}s applied, expected ${n}`);
  return { problems, applied };
}
