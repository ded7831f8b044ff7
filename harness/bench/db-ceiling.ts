// db-ceiling: the worker's own decision, apply_transfer() with the worker's arguments, called
// straight from a `pg` pool (the worker's pool settings, workers × lanes connections),
// one transfer per commit, no queue, no lock: what the database decision alone can do here.
// db-ceiling-first: the same with the first migration's function (first-decision.ts), the
// pinned anchor that today's single path is compared with in the same run.
// db-ceiling-paired: both in one case, alternating in blocks of transfers (today's, the first's,
// the first's, today's, ...) on one database and one pool. The two cases above run seconds apart, and this
// machine's speed drifts by more than the gap between the functions within a minute; blocks a
// few hundred milliseconds long put the same drift on both. Each function's rate is its calls
// over the summed spans of its blocks (first call sent to last answer, client clock).
// Before the clock starts, in all three cases, every connection calls each function the case
// runs a few times in transactions it rolls back (warmUpDecisions): a server connection's first
// calls load the tables' catalog entries, compile the function and plan its statements. In the
// paired case, whichever function ran the first block paid that for both: without the warm-up the
// ratio depended on which function ran first (docs/verification/results/performance-history.md).
// The two single cases measure the steady state the same way.
import type pg from 'pg';
import { endPool } from '../../src/db/pool-close.ts';
import { createPool } from '../../src/db/prisma.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { decide, type SqlRunner, spreadTransfers, UNLOCKED_FENCE, UNLOCKED_LEASE_ID } from './decision-call.ts';
import { decideFirst, firstDecisionSql } from './first-decision.ts';
import { type LaneDriver, runLanesCase } from './lanes-case.ts';

/** Which single decision a call runs: today's apply_transfer() or the first migration's. */
export type Decision = 'today' | 'first';

/** One decision through `which` function, with the worker's arguments; the outcome's name. */
function decideBy(runner: SqlRunner, which: Decision, request: TransferRequest): Promise<string> {
  return which === 'first' ? decideFirst(runner, request) : decide(runner, request);
}

/**
 * Gives every wallet the fence and lease that the riders of the bench's one lease leave behind.
 * The first function raises a wallet's fence without recording a lease; today's then refuses an
 * equal token from another lease. From this state both functions pass the check and do its work.
 */
export async function giveWalletsTheBenchLease(runner: SqlRunner): Promise<void> {
  await runner.query('UPDATE wallets SET last_fence = $1, last_lease = $2', [
    UNLOCKED_FENCE.toString(),
    UNLOCKED_LEASE_ID,
  ]);
}

export function runDbCeiling(ctx: CaseContext): Promise<CaseRunResult> {
  return runCeiling(ctx, 'today');
}

export function runDbCeilingFirst(ctx: CaseContext): Promise<CaseRunResult> {
  return runCeiling(ctx, 'first');
}

export function runDbCeilingPaired(ctx: CaseContext): Promise<CaseRunResult> {
  return runCeiling(ctx, 'paired');
}

/** Blocks per function in a paired run, at most: 20,000 transfers give blocks of 1,000. */
export const PAIRED_BLOCKS_PER_FUNCTION = 10;

/**
 * Transfers per block of a paired run: a tenth of each function's share, and at least four calls
 * per connection, so that the few calls of the previous block still running when a block starts
 * stay a small part of it.
 */
export function pairedBlockSize(transfers: number, lanes: number): number {
  return Math.max(4 * lanes, Math.floor(transfers / (2 * PAIRED_BLOCKS_PER_FUNCTION)));
}

/**
 * Which function block `block` of a paired run uses: today's, the first's, the first's, today's,
 * and again (ABBA), so that both functions' blocks sit, on average, at the same point of the run
 * (the tables grow as it goes, and the connections warm up).
 */
export function pairedDecisionOfBlock(block: number): Decision {
  const phase = block % 4;
  return phase === 0 || phase === 3 ? 'today' : 'first';
}

/**
 * Warm-up calls of each function per connection before the clock starts: PostgreSQL plans a
 * function's statement afresh for its first five runs on a connection (custom plans) before it
 * settles on one, so eight calls leave a function in the state the measured calls see.
 */
export const WARM_UP_CALLS = 8;

/**
 * Calls each of `decisions` WARM_UP_CALLS times on every connection of `clients` (all checked
 * out at once, so each server connection is warmed), each call in a transaction rolled back:
 * the run's tables are left as they were. With two decisions, connection c starts with
 * decisions[c % 2], so half the connections start with each.
 */
export async function warmUpDecisions(
  clients: readonly SqlRunner[],
  wallets: number,
  decisions: readonly Decision[],
  call: (client: SqlRunner, which: Decision, request: TransferRequest) => Promise<string>,
): Promise<void> {
  const perClient = WARM_UP_CALLS * decisions.length;
  const requests = spreadTransfers(clients.length * perClient, wallets, 'warm-up');
  await Promise.all(
    clients.map(async (client, c) => {
      const order = decisions.map((_, k) => decisions[(c + k) % decisions.length] as Decision);
      for (let i = 0; i < WARM_UP_CALLS; i++) {
        for (const [k, which] of order.entries()) {
          const request = requests[c * perClient + i * decisions.length + k] as TransferRequest;
          await client.query('BEGIN', []);
          try {
            const outcome = await call(client, which, request);
            if (outcome !== 'applied') throw new Error(`warm-up call of ${which}'s function answered ${outcome}`);
          } finally {
            await client.query('ROLLBACK', []);
          }
        }
      }
    }),
  );
}

interface BlockSpan {
  calls: number;
  startMs: number;
  endMs: number;
}

/** Calls per second of each function over the summed spans of its blocks; null when it ran no block. */
export function pairedRates(blocks: ReadonlyMap<number, BlockSpan>): Record<Decision, number | null> {
  const sums = { today: { calls: 0, ms: 0 }, first: { calls: 0, ms: 0 } };
  for (const [block, span] of blocks) {
    const sum = sums[pairedDecisionOfBlock(block)];
    sum.calls += span.calls;
    sum.ms += span.endMs - span.startMs;
  }
  const rate = (s: { calls: number; ms: number }) => (s.calls === 0 || s.ms <= 0 ? null : (s.calls * 1000) / s.ms);
  return { today: rate(sums.today), first: rate(sums.first) };
}

function runCeiling(ctx: CaseContext, decision: Decision | 'paired'): Promise<CaseRunResult> {
  return runLanesCase(ctx, (databaseUrl, lanes): LaneDriver => {
    let pool: pg.Pool | null = null;
    let unexpected = 0;
    let started = 0;
    const blockSize = pairedBlockSize(ctx.options.transfers, lanes);
    const blocks = new Map<number, BlockSpan>();
    const requirePool = () => {
      if (pool === null) throw new Error('db-ceiling pool is not open');
      return pool;
    };
    return {
      async open() {
        pool = createPool({ ...ctx.config, databaseUrl, dbPoolMax: lanes });
        if (decision !== 'today') await requirePool().query(firstDecisionSql());
        if (decision === 'paired') {
          await giveWalletsTheBenchLease(requirePool());
          await requirePool().query('VACUUM ANALYZE wallets');
        }
        // Every connection open before the first transfer, so the span holds no connection set-up.
        const clients = await Promise.all(Array.from({ length: lanes }, () => requirePool().connect()));
        try {
          const decisions: readonly Decision[] = decision === 'paired' ? ['today', 'first'] : [decision];
          await warmUpDecisions(clients, ctx.options.wallets, decisions, decideBy);
        } finally {
          for (const c of clients) c.release();
        }
      },
      async apply(request) {
        const decideWith = async (which: Decision) => {
          if ((await decideBy(requirePool(), which, request)) !== 'applied') unexpected += 1;
        };
        if (decision !== 'paired') return decideWith(decision);
        // driveLanes hands out the calls in order, so the count of calls started is the index.
        const block = Math.floor(started++ / blockSize);
        const t0 = performance.now();
        await decideWith(pairedDecisionOfBlock(block));
        const t1 = performance.now();
        const span = blocks.get(block);
        if (span === undefined) blocks.set(block, { calls: 1, startMs: t0, endMs: t1 });
        else {
          span.calls += 1;
          span.startMs = Math.min(span.startMs, t0);
          span.endMs = Math.max(span.endMs, t1);
        }
      },
      async close() {
        if (pool !== null) await endPool(pool);
      },
      notes: () => {
        if (decision !== 'paired') return { unexpectedOutcomes: unexpected };
        const rates = pairedRates(blocks);
        const notes: Record<string, number> = { unexpectedOutcomes: unexpected, blockSize, blocks: blocks.size };
        if (rates.today !== null) notes.todayPerS = Number(rates.today.toFixed(1));
        if (rates.first !== null) notes.firstPerS = Number(rates.first.toFixed(1));
        if (rates.today !== null && rates.first !== null)
          notes.todayToFirstRatio = Number((rates.today / rates.first).toFixed(3));
        return notes;
      },
    };
  });
}
