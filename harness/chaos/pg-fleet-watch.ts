// What the worker fleet did through one formation fault (pg-failover, pg-switchover), read from
// outside as an operator's probes would: each worker's /readyz every READY_POLL_MS (did it say not
// ready while the database had no primary, and ready again after), and every wallet lease in
// Redis (did any stay held longer than the bound the worker states for a database that does not
// answer: walletHoldBoundMs, the same bound a pg-blackhole is judged by).
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import { Check, type CheckResult } from './check-result.ts';
import { type BlackholeFigures, BlackholeWatch } from './pg-blackhole.ts';

/** How often each worker's /readyz is read during a formation fault. */
export const READY_POLL_MS = 200;
/** After the formation is healthy again, how long the workers have to say ready again. */
export const READY_AGAIN_MAX_MS = 30_000;
/**
 * A failover whose endpoint had no primary at least this long must show as not ready on every
 * worker that answered: three of the worker's probe rounds (HEALTH_PROBE_INTERVAL_MS, 1 s). A
 * switchover's gap is shorter than a probe round may notice, so it is not judged on this.
 */
export const NOT_READY_REQUIRED_AFTER_MS = 3_000;

/** A worker's /readyz status now: 200, 503, or 0 when it does not answer (killed, frozen). */
export interface ReadyProbe {
  readonly index: number;
  readyStatus(): Promise<number>;
}

/** What one formation fault did to the fleet's readiness and leases. */
export interface PgFleetFigures {
  /** Workers that answered /readyz at least once during the fault. */
  readonly workersAnswering: number;
  /** Of those, the workers that said not ready (503) at least once. */
  readonly workersNotReady: number;
  /** The longest run of 503s of any one worker (ms, at READY_POLL_MS resolution). */
  readonly notReadyMsMax: number;
  /**
   * From the fault's start until every answering worker said ready again (the first reading after
   * the last 503 with nothing but 200s); null if that was not so within READY_AGAIN_MAX_MS of the
   * formation being healthy again.
   */
  readonly readyAgainAfterMs: number | null;
  /** Every worker's wallet leases during the fault. */
  readonly leases: BlackholeFigures;
}

interface WorkerReadiness {
  answered: boolean;
  notReadySinceMs: number | null;
  notReadyMsMax: number;
  sawNotReady: boolean;
}

export class PgFleetWatch {
  private readonly workers = new Map<number, WorkerReadiness>();
  private running = true;
  private readyAgainAtMs: number | null = null;
  private readonly loop: Promise<void>;
  private readonly startedAtMs = performance.now();

  private constructor(
    private readonly probes: readonly ReadyProbe[],
    private readonly leases: BlackholeWatch,
  ) {
    for (const p of probes)
      this.workers.set(p.index, { answered: false, notReadySinceMs: null, notReadyMsMax: 0, sawNotReady: false });
    this.loop = this.run();
  }

  static start(
    probes: readonly ReadyProbe[],
    redis: RedisClient,
    lockKeyPrefix: string,
    lockTtlMs: number,
  ): PgFleetWatch {
    return new PgFleetWatch(probes, BlackholeWatch.startForEveryWorker(redis, lockKeyPrefix, lockTtlMs));
  }

  /**
   * Call once the formation is healthy again: waits (bounded) until every worker that answers says
   * ready, then stops watching and returns the figures.
   */
  async stop(): Promise<PgFleetFigures> {
    const deadline = performance.now() + READY_AGAIN_MAX_MS;
    while (this.readyAgainAtMs === null && performance.now() < deadline) await sleep(READY_POLL_MS);
    this.running = false;
    await this.loop;
    const leases = await this.leases.stop();
    const all = [...this.workers.values()];
    return {
      workersAnswering: all.filter((w) => w.answered).length,
      workersNotReady: all.filter((w) => w.sawNotReady).length,
      notReadyMsMax: Math.round(Math.max(0, ...all.map((w) => w.notReadyMsMax))),
      readyAgainAfterMs: this.readyAgainAtMs === null ? null : Math.round(this.readyAgainAtMs - this.startedAtMs),
      leases,
    };
  }

  /**
   * Runs one step of the fault; if it throws, stops watching at once (no figures: the failed fault
   * is judged by the faults check, not on them) and throws on.
   */
  async orAbandon<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      this.running = false;
      await this.loop;
      await this.leases.stop();
      throw err;
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      const statuses = await Promise.all(this.probes.map(async (p) => [p.index, await p.readyStatus()] as const));
      const nowMs = performance.now();
      for (const [index, status] of statuses) this.observe(index, status, nowMs);
      // Ready again: the first reading, since the last 503, in which every worker that answers says 200.
      const answering = statuses.filter(([, status]) => status !== 0);
      if (answering.some(([, status]) => status !== 200)) this.readyAgainAtMs = null;
      else if (answering.length > 0) this.readyAgainAtMs ??= nowMs;
      await sleep(READY_POLL_MS);
    }
  }

  private observe(index: number, status: number, nowMs: number): void {
    const w = this.workers.get(index);
    if (w === undefined || status === 0) return;
    w.answered = true;
    if (status === 200) {
      w.notReadySinceMs = null;
      return;
    }
    w.sawNotReady = true;
    w.notReadySinceMs ??= nowMs;
    w.notReadyMsMax = Math.max(w.notReadyMsMax, nowMs - w.notReadySinceMs);
  }
}

/**
 * The run's check on every formation fault: the workers said not ready through a failover's
 * missing primary, said ready again after it and after every switchover, and held no wallet
 * longer than the bound.
 */
export function pgFleetCheck(
  records: readonly { id: number; kind: string; pg?: { noPrimaryMs: number; fleet?: PgFleetFigures } }[],
): CheckResult {
  const judged = records.filter((r) => r.pg?.fleet !== undefined);
  const check = new Check(
    `the workers said not ready without a primary, ready again after, and held no wallet past the bound (${judged.length} failovers and switchovers)`,
    'queue',
  );
  for (const r of judged) {
    const f = r.pg?.fleet;
    if (f === undefined) continue;
    const problems: string[] = [];
    if (
      r.kind === 'pg-failover' &&
      (r.pg?.noPrimaryMs ?? 0) >= NOT_READY_REQUIRED_AFTER_MS &&
      f.workersNotReady < f.workersAnswering
    )
      problems.push(`${f.workersAnswering - f.workersNotReady} of ${f.workersAnswering} workers never said not ready`);
    if (f.readyAgainAfterMs === null) problems.push(`not every worker ready again within ${READY_AGAIN_MAX_MS} ms`);
    if (!f.leases.ok)
      problems.push(
        `wallet ${f.leases.longestHoldWallet} held ${f.leases.longestHoldMs} ms (bound ${f.leases.boundMs} ms)`,
      );
    if (problems.length > 0) check.fail({ fault: r.id, kind: r.kind, problem: problems.join('; ') });
  }
  return check.result();
}
