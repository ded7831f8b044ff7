// Injects the scheduled faults at their offsets and heals each one when its window ends;
// records every start and end (with what it actually did) in the history. The clock is the
// harness's; a fault that cannot be injected (Redis down for another fault) is logged, not fatal.
// What each fault does, and how it heals, is its starter's (fault-starters.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import type { SlotGroup } from '../services/local-redis-cluster.ts';
import type { ChaosFleet } from './chaos-fleet.ts';
import { ETCD_LOCK_FAULT_KINDS, type FaultKind, PG_HA_FAULT_KINDS } from './chaos-options.ts';
import type { ChaosRelays } from './chaos-relays.ts';
import type { ChaosServices } from './chaos-services.ts';
import type { ClusterFaults, FailoverLoss, KillMasterResult } from './cluster-faults.ts';
import type { EtcdFaultFigures } from './etcd-faults.ts';
import type { FailoverRecovery } from './fault-load.ts';
import { FAULT_STARTERS, type FaultTargets } from './fault-starters.ts';
import type { History } from './history.ts';
import type { BlackholeFigures } from './pg-blackhole.ts';
import type { PgFaultFigures, PgFaults } from './pg-faults.ts';
import { describeFault, type FaultEvent } from './schedule.ts';

/** A topology fault (failover, restart of the masters) waits this long at most for the previous one to finish. */
export const TOPOLOGY_WAIT_MAX_MS = 120_000;
const TOPOLOGY_FAULTS: readonly FaultKind[] = ['failover-lossy', 'kill-master', 'restart-redis'];
/** Faults that act on every master: on a cluster they wait for a failover in progress to end (without holding the next one). */
const ALL_MASTERS_FAULTS: readonly FaultKind[] = ['delete-fences'];

/** What a failover did, measured (cluster-faults.ts), and on which slots. */
export type FailoverFigures =
  | ({ readonly kind: 'lossy'; readonly slots: string } & FailoverLoss)
  | ({ readonly kind: 'kill'; readonly slots: string } & KillMasterResult);

/** The load a fault met: transfers enqueued and not yet answered at some point of its window, and those answered inside it. */
export interface FaultLoad {
  readonly inFlight: number;
  readonly answeredDuring: number;
}

/** What a fault actually did, with its measured window (offsets from the start of the fault phase). */
export interface FaultRecord {
  readonly id: number;
  readonly kind: FaultKind;
  startMs: number;
  endMs: number;
  readonly worker: number | null;
  readonly link: string | null;
  /** kill-relay only. */
  readonly relay?: number;
  detail: string;
  error: string | null;
  /** Failovers only. */
  failover?: FailoverFigures;
  /** Failovers only: when the slots changed master (offset from the start of the fault phase). */
  failoverAtMs?: number;
  /** Filled after the run, from the jobs' enqueue and answer times. */
  load?: FaultLoad;
  /** Lossy failovers: how the fence recovered (filled after the run, fault-load.ts). */
  recovery?: FailoverRecovery;
  /** pg-blackhole only: how long the worker's wallets stayed held. */
  blackhole?: BlackholeFigures;
  /** pg-failover and pg-switchover: what the endpoint saw, and (after the run) the write outage. */
  pg?: PgFaultFigures;
  /** The etcd faults: the members acted on, the election, and through a quorum loss the fleet's readiness. */
  etcd?: EtcdFaultFigures;
}

/** The cluster a run's failovers act on, and which slot groups each kind may hit. */
export interface ClusterTargets {
  readonly faults: ClusterFaults;
  /**
   * Groups a lossy failover may hit: those holding no queue shard (it loses lock data only:
   * docs/verification/chaos.md), or, in an intake run, every group.
   */
  readonly lossyGroups: readonly SlotGroup[];
  readonly allGroups: readonly SlotGroup[];
  /** Groups holding a queue shard (where an intake run's first lossy failover is aimed). */
  readonly queueGroups: readonly SlotGroup[];
  /** BullMQ key bases (`<prefix>:<name>`) of the queue shards a group holds. */
  readonly queueKeyBasesOf: (group: SlotGroup) => string[];
}

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  private readonly pending = new Map<number, { timer: NodeJS.Timeout; heal: () => Promise<void> }>();
  /** Resolves when the topology fault in progress (if any) has ended: they never overlap. */
  private topology: Promise<void> = Promise.resolve();
  /** What the faults' starters act on (fault-starters.ts). */
  private readonly targets: FaultTargets;

  constructor(
    private readonly fleet: ChaosFleet,
    services: ChaosServices,
    /** A harness connection straight to Redis (not through a proxy). */
    redis: RedisClient,
    lockKeyPrefix: string,
    private readonly history: History,
    private readonly onChange?: () => void,
    private readonly cluster: ClusterTargets | null = null,
    /** The workers' LOCK_TTL_MS: part of the bound a blackhole is judged by. */
    lockTtlMs: number = 1_000,
    /** An intake run's relay processes (kill-relay). */
    private readonly relays: ChaosRelays | null = null,
    /** --postgres ha: the formation's faults. */
    pg: PgFaults | null = null,
  ) {
    this.targets = { fleet, services, redis, lockKeyPrefix, history, cluster, lockTtlMs, relays, pg };
  }

  get active(): number {
    return this.pending.size;
  }

  /** Runs the schedule until its end or until `signal` fires; faults still open are then healed. */
  async run(schedule: readonly FaultEvent[], signal: AbortSignal): Promise<void> {
    for (const event of schedule) {
      const waitMs = event.atMs - this.history.nowMs();
      if (waitMs > 0) {
        try {
          await sleep(waitMs, undefined, { signal });
        } catch {
          break;
        }
      }
      if (signal.aborted) break;
      await this.inject(event);
    }
  }

  /** Ends every open fault now (the fault phase is over). */
  async healAll(): Promise<void> {
    await Promise.all([...this.pending.values()].map((p) => p.heal()));
    await this.topology;
    this.fleet.healAll();
    this.relays?.healAll();
  }

  private async inject(event: FaultEvent): Promise<void> {
    // The formation's faults never overlap each other nor a Redis failover: each outage is its own.
    // Nor do the etcd cluster's: two at once would be a quorum loss the schedule did not ask for.
    const topological =
      (TOPOLOGY_FAULTS.includes(event.kind) && this.cluster !== null) ||
      (PG_HA_FAULT_KINDS as readonly FaultKind[]).includes(event.kind) ||
      (ETCD_LOCK_FAULT_KINDS as readonly FaultKind[]).includes(event.kind);
    let waitedMs = 0;
    let endTopology = () => {};
    if (topological || (ALL_MASTERS_FAULTS.includes(event.kind) && this.cluster !== null)) {
      const t = performance.now();
      // The bound's timer is cancelled as soon as the failover in progress ends: left running, it
      // kept the harness alive for up to two minutes after its report.
      const bound = new AbortController();
      try {
        await Promise.race([this.topology, sleep(TOPOLOGY_WAIT_MAX_MS, undefined, { signal: bound.signal })]);
      } finally {
        bound.abort();
      }
      waitedMs = Math.round(performance.now() - t);
    }
    if (topological)
      this.topology = new Promise<void>((resolve) => {
        endTopology = resolve;
      });
    const record: FaultRecord = {
      id: event.id,
      kind: event.kind,
      startMs: this.history.nowMs(),
      endMs: 0,
      worker: event.worker,
      link: event.link,
      ...(event.relay === undefined ? {} : { relay: event.relay }),
      detail: describeFault(event),
      error: null,
    };
    if (waitedMs > 100) record.detail += ` (started ${waitedMs} ms late: the previous failover was still going)`;
    this.records.push(record);
    const open = await this.injectRecorded(event, record);
    if (open === null) endTopology();
    else void open.ended.then(endTopology, endTopology);
  }

  /** Starts the fault and arranges its end; resolves with a promise of that end (null when over already). */
  private async injectRecorded(event: FaultEvent, record: FaultRecord): Promise<{ ended: Promise<void> } | null> {
    let ended: Promise<void> | null = null;
    try {
      const heal = await FAULT_STARTERS[event.kind](this.targets, event, record);
      this.history.write(
        {
          type: 'fault_start',
          faultId: event.id,
          kind: event.kind,
          worker: event.worker,
          link: event.link,
          detail: record.detail,
        },
        record.startMs,
      );
      if (heal === null) {
        record.endMs = this.history.nowMs();
        this.history.write({ type: 'fault_end', faultId: event.id, kind: event.kind, detail: record.detail });
      } else {
        let done = false;
        let endedResolve = () => {};
        ended = new Promise<void>((resolve) => {
          endedResolve = resolve;
        });
        const finish = async (detail?: string) => {
          if (done) return;
          done = true;
          const open = this.pending.get(event.id);
          if (open !== undefined) clearTimeout(open.timer);
          this.pending.delete(event.id);
          try {
            await heal();
          } catch (err) {
            record.error = err instanceof Error ? err.message : String(err);
            this.history.write({ type: 'fault_error', faultId: event.id, kind: event.kind, error: record.error });
          }
          record.endMs = this.history.nowMs();
          this.history.write({
            type: 'fault_end',
            faultId: event.id,
            kind: event.kind,
            ...(detail === undefined ? {} : { detail }),
          });
          this.onChange?.();
          endedResolve();
        };
        const timer = setTimeout(() => void finish(), event.durationMs);
        this.pending.set(event.id, { timer, heal: () => finish('healed at the end of the fault phase') });
      }
    } catch (err) {
      record.error = err instanceof Error ? err.message : String(err);
      record.endMs = this.history.nowMs();
      this.history.write({ type: 'fault_error', faultId: event.id, kind: event.kind, error: record.error });
    }
    this.onChange?.();
    return ended === null ? null : { ended };
  }
}
