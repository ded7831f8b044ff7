// Injects the scheduled faults at their offsets and heals each one when its window ends;
// records every start and end (with what it actually did) in the history. The clock is the
// harness's; a fault that cannot be injected (Redis down for another fault) is logged, not fatal.
import { setTimeout as sleep } from 'node:timers/promises';
import { isCluster, type RedisClient } from '../../src/queue/redis-connection.ts';
import { dataNodesOf, deleteMatching, deleteMatchingOnNode } from '../../src/queue/redis-scan.ts';
import type { SlotGroup } from '../services/local-redis-cluster.ts';
import type { ChaosFleet } from './chaos-fleet.ts';
import { type FaultKind, PG_HA_FAULT_KINDS } from './chaos-options.ts';
import type { ChaosRelays } from './chaos-relays.ts';
import type { ChaosServices } from './chaos-services.ts';
import type { ClusterFaults, FailoverLoss, KillMasterResult } from './cluster-faults.ts';
import type { FailoverRecovery } from './fault-load.ts';
import type { History } from './history.ts';
import { type BlackholeFigures, BlackholeWatch } from './pg-blackhole.ts';
import type { PgFaultFigures, PgFaults } from './pg-faults.ts';
import { describeFault, type FaultEvent } from './schedule.ts';

/** kill-relay holds the relay's Redis link this long before SIGKILL (the producer requests every 100 ms). */
export const RELAY_KILL_HOLD_MS = 300;
/** delete-locks sweeps the lock keys this often during its window. */
export const LOCK_SWEEP_INTERVAL_MS = 10;

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

function pick<T>(items: readonly T[], target: number | undefined): T | undefined {
  return items.length === 0 ? undefined : items[(target ?? 0) % items.length];
}

const slotsOf = (g: SlotGroup) => `${g.fromSlot}-${g.toSlot}`;

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  private readonly pending = new Map<number, { timer: NodeJS.Timeout; heal: () => Promise<void> }>();
  /** Resolves when the topology fault in progress (if any) has ended: they never overlap. */
  private topology: Promise<void> = Promise.resolve();

  constructor(
    private readonly fleet: ChaosFleet,
    private readonly services: ChaosServices,
    /** A harness connection straight to Redis (not through a proxy). */
    private readonly redis: RedisClient,
    private readonly lockKeyPrefix: string,
    private readonly history: History,
    private readonly onChange?: () => void,
    private readonly cluster: ClusterTargets | null = null,
    /** The workers' LOCK_TTL_MS: part of the bound a blackhole is judged by. */
    private readonly lockTtlMs: number = 1_000,
    /** An intake run's relay processes (kill-relay). */
    private readonly relays: ChaosRelays | null = null,
    /** --postgres ha: the formation's faults. */
    private readonly pg: PgFaults | null = null,
  ) {}

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
    const topological =
      (TOPOLOGY_FAULTS.includes(event.kind) && this.cluster !== null) ||
      (PG_HA_FAULT_KINDS as readonly FaultKind[]).includes(event.kind);
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
      const heal = await this.start(event, record);
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

  private requirePg(kind: FaultKind): PgFaults {
    if (this.pg === null) throw new Error(`${kind} needs --postgres ha`);
    return this.pg;
  }

  private requireCluster(kind: FaultKind): ClusterTargets {
    if (this.cluster === null) throw new Error(`${kind} needs --redis cluster`);
    return this.cluster;
  }

  /** Starts one fault; returns how to heal it, or null when it is over already. */
  private async start(event: FaultEvent, record: FaultRecord): Promise<(() => Promise<void>) | null> {
    const target = () => this.fleet.worker(event.worker ?? 1);
    const lockPattern = `${this.lockKeyPrefix}{wallet:*}:lock`;
    const fencePattern = `${this.lockKeyPrefix}{wallet:*}:fence`;
    switch (event.kind) {
      case 'kill-worker': {
        const proc = target().process;
        await proc.kill();
        return async () => proc.start();
      }
      case 'pause-worker': {
        const proc = target().process;
        proc.freeze();
        return async () => proc.thaw();
      }
      case 'delete-locks': {
        // Locks are held for milliseconds, so one sweep mostly finds none: sweep again and
        // again for the fault's window, so that holders in the middle of a transfer lose theirs.
        let deleted = 0;
        let sweeps = 0;
        let sweeping = true;
        const storm = (async () => {
          while (sweeping) {
            // Master by master: one that is down (restarting, failing over) does not spare the others.
            for (const node of await dataNodesOf(this.redis).catch(() => [])) {
              try {
                deleted += await deleteMatchingOnNode(node, lockPattern, isCluster(this.redis));
              } catch {
                // Down for another fault: swept again on the next tick.
              }
            }
            sweeps += 1;
            await sleep(LOCK_SWEEP_INTERVAL_MS);
          }
        })();
        return async () => {
          sweeping = false;
          await storm;
          record.detail += `: ${deleted} held lock keys deleted in ${sweeps} sweeps`;
        };
      }
      case 'delete-fences': {
        const n = await deleteMatching(this.redis, fencePattern);
        record.detail += `: ${n} fence counters deleted`;
        return null;
      }
      case 'restart-redis': {
        // The lock service loses its data (DESIGN: "Redis restarted without persistence"); the
        // queue, kept in the same AOF-backed server, survives the restart.
        const locks = await deleteMatching(this.redis, lockPattern);
        const fences = await deleteMatching(this.redis, fencePattern);
        const t = performance.now();
        const what = await this.services.restartRedis();
        record.detail +=
          `: ${locks} lock keys and ${fences} fence counters deleted, then SIGKILL and restart from AOF ` +
          `(${what}) in ${Math.round(performance.now() - t)} ms`;
        return null;
      }
      case 'failover-lossy': {
        const c = this.requireCluster(event.kind);
        const group = event.onQueue === true ? pick(c.queueGroups, event.target) : pick(c.lossyGroups, event.target);
        if (group === undefined)
          throw new Error(
            'every slot group holds a queue shard: a lossy failover would lose acknowledged jobs too (lower --queue-shards, or --intake)',
          );
        const queueKeyBases = c.queueKeyBasesOf(group);
        const roles = await c.faults.stallReplication(group);
        // On a queue shard's master, the workers are partitioned from it too (the producers and
        // relays are not): the adds it acknowledges meanwhile wait there unconsumed, and the
        // takeover loses them, as a partition that isolates a master with its clients does.
        const partitioned = queueKeyBases.length > 0 ? this.fleet.redisLinksTo(roles.master) : [];
        for (const link of partitioned) link.stall();
        record.detail +=
          ` (slots ${slotsOf(group)}, master node ${roles.master}, replica node ${roles.replica}` +
          `${queueKeyBases.length > 0 ? `, ${queueKeyBases.length} queue shard(s) here, workers partitioned from the master` : ''})`;
        return async () => {
          let loss: FailoverLoss;
          try {
            loss = await c.faults.lossyTakeover(
              roles,
              () => {
                record.failoverAtMs = this.history.nowMs();
              },
              queueKeyBases,
            );
          } finally {
            for (const link of partitioned) link.unstall();
          }
          record.failover = { kind: 'lossy', slots: slotsOf(group), ...loss };
          record.detail +=
            `: replica behind by ${loss.replicationLagBytes} bytes; lost ${loss.fenceIncrementsLost} fence increments ` +
            `on ${loss.fenceKeysBehind} wallets and ${loss.lockKeysLost} of ${loss.lockKeysBefore} lock keys` +
            (queueKeyBases.length > 0 ? `, and ${loss.queueJobsLost} of ${loss.queueJobsBefore} queue jobs` : '') +
            `; node ${loss.replica} master after ${loss.promotionMs} ms, node ${loss.master} back as its replica after ${loss.rejoinMs} ms`;
          this.services.recordPids();
        };
      }
      case 'kill-relay': {
        if (this.relays === null) throw new Error('kill-relay needs relays: add --intake');
        const { process: proc, redis } = this.relays.relay(event.relay ?? 1);
        // Mid-batch: its Redis link is held first, so the batch it claims meanwhile (rows marked
        // sent in PostgreSQL) is waiting on its adds when SIGKILL comes; the held adds die with
        // its connections.
        redis.stall();
        try {
          await sleep(RELAY_KILL_HOLD_MS);
          await proc.kill();
          redis.cut();
        } finally {
          redis.uncut();
          redis.unstall();
        }
        record.detail += ` (its Redis link held ${RELAY_KILL_HOLD_MS} ms before, to catch it mid-batch)`;
        return async () => proc.start();
      }
      case 'kill-master': {
        const c = this.requireCluster(event.kind);
        const group = pick(c.allGroups, event.target);
        if (group === undefined) throw new Error('no slot group');
        const killed = await c.faults.killMaster(group);
        this.services.recordPids();
        record.detail += ` (slots ${slotsOf(group)}, SIGKILL of master node ${killed.master})`;
        const startedMs = record.startMs;
        void killed.promoted.then(
          (ms) => {
            record.failoverAtMs = startedMs + ms;
          },
          () => undefined,
        );
        return async () => {
          const result = await c.faults.rejoin(killed);
          this.services.recordPids();
          record.failover = { kind: 'kill', slots: slotsOf(group), ...result };
          record.detail +=
            `: node ${result.replica} master after ${result.promotionMs} ms, node ${result.master} restarted ` +
            `and back as its replica after ${result.rejoinMs} ms`;
        };
      }
      case 'terminate-backends': {
        const n = await this.services.terminateWorkerBackends();
        record.detail += `: ${n} worker sessions terminated`;
        return null;
      }
      case 'link-delay': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.setDelay(event.delayMs ?? 0, event.jitterMs ?? 0);
        return async () => proxy.setDelay(0, 0);
      }
      case 'link-stall': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.stall();
        return async () => proxy.unstall();
      }
      case 'pg-blackhole': {
        const proxy = target().proxies.postgres;
        const pid = target().process.pid;
        proxy.stall();
        const watch =
          pid === undefined ? null : BlackholeWatch.start(this.redis, this.lockKeyPrefix, pid, this.lockTtlMs);
        return async () => {
          const b = await watch?.stop();
          proxy.unstall();
          if (b === undefined) return;
          record.blackhole = b;
          record.detail +=
            (b.heldAtStart === 0
              ? ': no wallet held at the start'
              : `: ${b.heldAtStart} wallets held at the start, ` +
                (b.releasedAfterMs === null ? 'not all free by the end' : `all free after ${b.releasedAfterMs} ms`)) +
            `; ${b.heldMax} held at most, longest hold ${b.longestHoldMs} ms (bound ${b.boundMs} ms)`;
        };
      }
      case 'link-cut': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.cut();
        return async () => proxy.uncut();
      }
      case 'pg-failover': {
        const { detail, heal } = await this.requirePg(event.kind).failover((f) => {
          record.pg = f;
        });
        record.detail += detail;
        return async () => {
          record.detail += await heal();
        };
      }
      case 'pg-switchover': {
        record.detail += await this.requirePg(event.kind).switchover((f) => {
          record.pg = f;
        });
        return null;
      }
      case 'pg-standby-kill': {
        const { detail, heal } = await this.requirePg(event.kind).standbyKill(event.target ?? 0);
        record.detail += detail;
        return async () => {
          record.detail += await heal();
        };
      }
    }
  }
}
