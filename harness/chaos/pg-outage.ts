// After an HA run (`--postgres ha`): what each formation fault cost, read from the decisions
// themselves, and whether every answer someone could have acted on survived the failovers.
//
// The write outage of a fault is the longest gap between two consecutive decisions
// (`transfers.created_at`, a decision's transaction start) that ends after the fault began
// (less OUTAGE_MARGIN_MS) and begins before it ended and before the next fault of the
// formation began: the workload
// keeps deciding every few milliseconds, so that gap is when writes stopped and resumed. Throughput is back at the first whole second after the resumption holding at least
// THROUGHPUT_BACK_SHARE of the median decisions per second of the BASELINE_S seconds before.
//
// The acknowledged answers: every job BullMQ holds completed with a decision (applied, rejected,
// duplicate) must find its operation's record in the database, with the status it answered.
// A lost commit (an asynchronous standby promoted) shows here by operation id; the intake's
// acknowledged requests and the feed's positions read have their own checks (intake-checks.ts).
import type pg from 'pg';
import type { ChaosMessage } from './chaos-workload.ts';
import { Check, type CheckResult } from './check-result.ts';
import type { FaultRecord } from './faults.ts';
import { type FinalJob, outcomeOf } from './final-job.ts';

export const OUTAGE_MARGIN_MS = 1_000;
/** How far after a fault's start its outage may end. */
export const OUTAGE_WINDOW_MS = 60_000;
export const THROUGHPUT_BACK_SHARE = 0.8;
const BASELINE_S = 5;

/** Fills each pg-failover and pg-switchover record's write outage (t0WallMs: the fault phase's origin, Date.now()). */
export async function attachWriteOutages(
  client: pg.Client,
  records: readonly FaultRecord[],
  t0WallMs: number,
): Promise<void> {
  for (const r of records) {
    if (r.pg === undefined || r.error !== null) continue;
    const startWall = t0WallMs + r.startMs;
    // The outage begins before this fault ended, and before the next fault of the formation began.
    const next = records.find((n) => n.pg !== undefined && n.startMs > r.startMs);
    const endWall = t0WallMs + Math.max(r.endMs, r.startMs + (r.pg.recoveredAfterMs ?? 0));
    const healthyWall = next === undefined ? endWall : Math.min(endWall, t0WallMs + next.startMs);
    const { rows } = await client.query<{ at: string }>(
      `SELECT (extract(epoch FROM created_at) * 1000)::float8 AS at FROM transfers
        WHERE created_at >= to_timestamp($1::float8 / 1000) AND created_at < to_timestamp($2::float8 / 1000)
        ORDER BY created_at`,
      [startWall - BASELINE_S * 1000, startWall + OUTAGE_WINDOW_MS],
    );
    const times = rows.map((row) => Number(row.at));
    const gap = longestGap(times, startWall - OUTAGE_MARGIN_MS, healthyWall);
    if (gap === null) {
      r.pg.writeOutageMs = null;
      continue;
    }
    r.pg.writeOutageMs = Math.round(gap.resumed - gap.stopped);
    r.pg.writesStoppedAtMs = Math.round(gap.stopped - t0WallMs);
    r.pg.writesResumedAtMs = Math.round(gap.resumed - t0WallMs);
    r.pg.throughputBackAfterMs = throughputBack(times, startWall, gap.resumed);
  }
}

/** The longest gap between consecutive times that ends after `from` and begins before `until`. */
export function longestGap(
  times: readonly number[],
  from: number,
  until: number,
): { stopped: number; resumed: number } | null {
  let best: { stopped: number; resumed: number } | null = null;
  for (let i = 1; i < times.length; i++) {
    const a = times[i - 1] as number;
    const b = times[i] as number;
    if (b < from || a > until) continue;
    if (best === null || b - a > best.resumed - best.stopped) best = { stopped: a, resumed: b };
  }
  return best;
}

/** Milliseconds from `resumed` to the start of the first second at THROUGHPUT_BACK_SHARE of the rate before `startWall`. */
export function throughputBack(times: readonly number[], startWall: number, resumed: number): number | null {
  const perSecond = (from: number) => times.filter((t) => t >= from && t < from + 1000).length;
  const before: number[] = [];
  for (let s = BASELINE_S; s >= 1; s--) before.push(perSecond(startWall - s * 1000));
  const sorted = [...before].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  if (median === 0) return null;
  const last = times.at(-1) ?? resumed;
  for (let from = resumed; from + 1000 <= last; from += 250) {
    if (perSecond(from) >= THROUGHPUT_BACK_SHARE * median) return Math.round(from - resumed);
  }
  return null;
}

interface RecordRow {
  operation_id: string;
  status: string;
}

/**
 * Every decision a job answered is in the database with the status it answered. The name says how
 * many answers were checked; a lost one is a counterexample with its operation id.
 */
export async function acknowledgedAnswersCheck(
  client: pg.Client,
  jobs: readonly FinalJob[],
  sent: ReadonlyMap<string, ChaosMessage>,
): Promise<CheckResult> {
  const answered: { jobId: string; operationId: string; outcome: string; status: string | null }[] = [];
  for (const job of jobs) {
    if (job.state !== 'completed') continue;
    const message = sent.get(job.jobId);
    if (message === undefined || message.operationId === null || message.kind === 'invalid') continue;
    const answer = outcomeOf(job.returnvalue);
    const outcome = answer?.outcome;
    if (outcome !== 'applied' && outcome !== 'rejected' && outcome !== 'duplicate') continue;
    const status = outcome === 'duplicate' ? (answer?.stored?.status ?? null) : outcome;
    answered.push({ jobId: job.jobId, operationId: message.operationId, outcome, status });
  }
  const ids = [...new Set(answered.map((a) => a.operationId))];
  const { rows } = await client.query<RecordRow>(
    'SELECT operation_id, status FROM transfers WHERE operation_id = ANY($1::text[])',
    [ids],
  );
  const stored = new Map(rows.map((r) => [r.operation_id, r.status]));
  const check = new Check(
    `every decision a job answered survived the failovers (${answered.length} answers of ${ids.length} operations checked)`,
    'exactly-once',
  );
  for (const a of answered) {
    const status = stored.get(a.operationId);
    if (status === undefined) {
      check.fail({ operationId: a.operationId, jobId: a.jobId, answered: a.outcome, problem: 'lost: no record' });
    } else if (a.status !== null && status !== a.status) {
      check.fail({ operationId: a.operationId, jobId: a.jobId, answered: a.outcome, stored: status });
    }
  }
  return check.result();
}

/**
 * The formation's faults ran to their end: none failed (a switchover that never finished, a node
 * that never came back), and each of pg-failover and pg-switchover that the run scheduled happened
 * at least once. Without it a run whose only failover could not be made would still pass.
 */
export function formationFaultsCheck(records: readonly FaultRecord[]): CheckResult {
  const kinds = ['pg-failover', 'pg-switchover', 'pg-standby-kill'] as const;
  const ours = records.filter((r) => (kinds as readonly string[]).includes(r.kind));
  const count = (kind: string) => ours.filter((r) => r.kind === kind && r.error === null).length;
  const check = new Check(
    `the formation's faults ran to their end (${count('pg-failover')} failovers, ${count('pg-switchover')} switchovers, ${count('pg-standby-kill')} standbys killed)`,
    'queue',
  );
  for (const r of ours) if (r.error !== null) check.fail({ fault: r.id, kind: r.kind, error: r.error.slice(0, 300) });
  for (const kind of ['pg-failover', 'pg-switchover'])
    if (ours.some((r) => r.kind === kind) && count(kind) === 0) check.fail({ kind, problem: 'scheduled, never done' });
  return check.result();
}
