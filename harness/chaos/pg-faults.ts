// The faults of the HA formation (`--postgres ha`): what each does to the pg_auto_failover
// formation, and what it measured on the endpoint every client goes through.
//
// - pg-failover: SIGKILL of the primary's keeper and server at once, mid-load; the monitor
//   promotes a standby. The killed node is started again when the fault's window ends and
//   rejoins as a standby. With --unsafe async-standby the primary's WAL senders are frozen first
//   (ASYNC_HOLD_MS), so that the standbys lack its last commits when it dies.
// - pg-switchover: a planned switchover (the monitor's `perform_failover()`, what `pg_autoctl
//   perform switchover` calls), to its end.
// - pg-standby-kill: SIGKILL of one standby, started again when the window ends; the other keeps
//   the formation synchronous.
// Each waits, before it ends, for the formation to be healthy again (one primary, the rest
// secondary): they never overlap one another, so each one's outage is its own.
import { setTimeout as sleep } from 'node:timers/promises';
import type { LocalPgFormation } from '../services/local-pg-formation.ts';
import { FOLLOW_INTERVAL_MS, type PrimaryEndpoint } from '../services/primary-endpoint.ts';
import type { PgFleetFigures, PgFleetWatch } from './pg-fleet-watch.ts';

/** --unsafe async-standby: how long the WAL senders are frozen before the primary is killed. */
export const ASYNC_HOLD_MS = 1_500;

/** What a formation fault did, as the endpoint saw it; the write outage is filled after the run, from the commits. */
export interface PgFaultFigures {
  readonly primaryBefore: string | null;
  primaryAfter: string | null;
  /** How long the endpoint had no primary to lead to (ms). */
  noPrimaryMs: number;
  /** Connections the endpoint refused meanwhile. */
  refused: number;
  /** From the start of the fault until the formation was healthy again (ms). */
  recoveredAfterMs: number | null;
  /** Filled after the run (pg-outage.ts): the longest gap between two decisions around the fault. */
  writeOutageMs?: number | null;
  writesStoppedAtMs?: number | null;
  writesResumedAtMs?: number | null;
  /** After writes resumed, until a second held a decision rate of at least THROUGHPUT_BACK_SHARE of the one before the fault. */
  throughputBackAfterMs?: number | null;
  /** The workers' /readyz and wallet leases through the fault (pg-failover, pg-switchover). */
  fleet?: PgFleetFigures;
}

export class PgFaults {
  constructor(
    private readonly formation: LocalPgFormation,
    private readonly endpoint: PrimaryEndpoint,
    private readonly asyncControl: boolean,
    /** Starts watching the fleet's readiness and leases for one fault. */
    private readonly watchFleet: () => PgFleetWatch,
  ) {}

  /** The endpoint's changes since `fromWallMs`: how long it had no primary, and who it leads to now. */
  private measure(fig: PgFaultFigures, fromWallMs: number): void {
    let noPrimaryMs = 0;
    let since: number | null = null;
    for (const c of this.endpoint.changes) {
      if (c.atMs < fromWallMs) continue;
      if (c.node === null && since === null) since = c.atMs;
      if (c.node !== null && since !== null) {
        noPrimaryMs += c.atMs - since;
        since = null;
      }
    }
    if (since !== null) noPrimaryMs += Date.now() - since;
    fig.noPrimaryMs = noPrimaryMs;
    fig.primaryAfter = this.endpoint.current;
  }

  /** Kills the primary (after freezing its WAL senders in the async control); returns the heal. */
  async failover(fig: (f: PgFaultFigures) => void): Promise<{ detail: string; heal: () => Promise<string> }> {
    const t0 = Date.now();
    const refusedBefore = this.endpoint.refused;
    const primary = await this.formation.primary();
    if (primary === null) throw new Error('no primary to fail over');
    const watch = this.watchFleet();
    let held = '';
    await watch.orAbandon(async () => {
      if (this.asyncControl) {
        const frozen = await this.formation.freezeWalSenders();
        await sleep(ASYNC_HOLD_MS);
        held = `, after its ${frozen.pids.length} WAL senders were frozen for ${ASYNC_HOLD_MS} ms`;
      }
      await this.formation.kill(primary.name);
    });
    const figures: PgFaultFigures = {
      primaryBefore: primary.name,
      primaryAfter: null,
      noPrimaryMs: 0,
      refused: 0,
      recoveredAfterMs: null,
    };
    fig(figures);
    return {
      detail: ` (SIGKILL of primary ${primary.name}, its keeper and server${held})`,
      heal: async () => {
        await watch.orAbandon(async () => {
          await this.formation.restart(primary.name);
          await this.formation.waitHealthy();
        });
        figures.recoveredAfterMs = Date.now() - t0;
        this.measure(figures, t0);
        figures.refused = this.endpoint.refused - refusedBefore;
        figures.fleet = await watch.stop();
        return (
          `: ${figures.primaryAfter ?? 'nobody'} primary, the endpoint without a primary for ${figures.noPrimaryMs} ms ` +
          `(${figures.refused} connections refused); ${primary.name} back as a standby, ` +
          `healthy ${figures.recoveredAfterMs} ms after the kill; ${describeFleet(figures.fleet)}`
        );
      },
    };
  }

  async switchover(fig: (f: PgFaultFigures) => void): Promise<string> {
    const t0 = Date.now();
    const refusedBefore = this.endpoint.refused;
    const before = (await this.formation.primary())?.name ?? null;
    const watch = this.watchFleet();
    await watch.orAbandon(async () => {
      await this.formation.switchover();
      await this.formation.waitHealthy();
    });
    // The endpoint follows the monitor at its own pace: let it see the new primary.
    await sleep(2 * FOLLOW_INTERVAL_MS);
    const figures: PgFaultFigures = {
      primaryBefore: before,
      primaryAfter: null,
      noPrimaryMs: 0,
      refused: this.endpoint.refused - refusedBefore,
      recoveredAfterMs: Date.now() - t0,
    };
    this.measure(figures, t0);
    figures.fleet = await watch.stop();
    fig(figures);
    return (
      `: ${before ?? 'nobody'} → ${figures.primaryAfter ?? 'nobody'}, the endpoint without a primary for ` +
      `${figures.noPrimaryMs} ms (${figures.refused} connections refused), healthy after ${figures.recoveredAfterMs} ms; ` +
      describeFleet(figures.fleet)
    );
  }

  /** Kills one standby (`target` picks which); returns the heal. */
  async standbyKill(target: number): Promise<{ detail: string; heal: () => Promise<string> }> {
    const t0 = Date.now();
    const primary = (await this.formation.primary())?.name ?? null;
    const standbys = this.formation.nodes.filter((n) => n.name !== primary);
    const victim = standbys[target % Math.max(1, standbys.length)];
    if (victim === undefined) throw new Error('no standby to kill');
    await this.formation.kill(victim.name);
    return {
      detail: ` (SIGKILL of standby ${victim.name})`,
      heal: async () => {
        await this.formation.restart(victim.name);
        await this.formation.waitHealthy();
        return `: ${victim.name} back as a standby, healthy ${Date.now() - t0} ms after the kill`;
      },
    };
  }
}

function describeFleet(f: PgFleetFigures): string {
  return (
    `${f.workersNotReady} of ${f.workersAnswering} workers said not ready (longest ${f.notReadyMsMax} ms), ` +
    (f.readyAgainAfterMs === null
      ? 'not all ready again'
      : `all ready again ${f.readyAgainAfterMs} ms after the start`) +
    `; longest wallet lease ${f.leases.longestHoldMs} ms (bound ${f.leases.boundMs} ms)`
  );
}
