// What each fault does to the run, and how it is healed: one starter per fault kind, in
// FAULT_STARTERS, which the injector (faults.ts) looks up by the event's kind. A starter acts on
// the run's processes, links and servers (FaultTargets), adds what it actually did to the record's
// detail, and returns the heal to run when the fault's window ends, or null when the fault is over
// already. A new fault is a kind in chaos-options.ts and one starter here: the table is keyed by
// every kind, so a kind without its starter does not type-check.
import { setTimeout as sleep } from 'node:timers/promises';
import { isCluster, type RedisClient } from '../../src/queue/redis-connection.ts';
import { dataNodesOf, deleteMatching, deleteMatchingOnNode } from '../../src/queue/redis-scan.ts';
import type { SlotGroup } from '../services/local-redis-cluster.ts';
import type { ChaosFleet, ChaosWorker } from './chaos-fleet.ts';
import { terminateLockSessions } from './chaos-lock.ts';
import type { FaultKind } from './chaos-options.ts';
import type { ChaosRelays } from './chaos-relays.ts';
import type { ChaosServices } from './chaos-services.ts';
import type { FailoverLoss } from './cluster-faults.ts';
import { ETCD_FAULT_STARTERS } from './etcd-faults.ts';
import type { LinkProxy } from './fault-proxy.ts';
import type { ClusterTargets, FaultRecord } from './faults.ts';
import type { History } from './history.ts';
import { BlackholeWatch } from './pg-blackhole.ts';
import type { PgFaults } from './pg-faults.ts';
import type { FaultEvent } from './schedule.ts';

/** kill-relay holds the relay's Redis link this long before SIGKILL (the producer requests every 100 ms). */
export const RELAY_KILL_HOLD_MS = 300;
/** delete-locks sweeps the lock keys this often during its window. */
export const LOCK_SWEEP_INTERVAL_MS = 10;

/** What the faults act on: the run's processes, their links, its servers, and its clock. */
export interface FaultTargets {
  readonly fleet: ChaosFleet;
  readonly services: ChaosServices;
  /** A harness connection straight to Redis (not through a proxy). */
  readonly redis: RedisClient;
  readonly lockKeyPrefix: string;
  readonly history: History;
  /** --redis cluster: the cluster the failovers act on. */
  readonly cluster: ClusterTargets | null;
  /** The workers' LOCK_TTL_MS: part of the bound a blackhole is judged by. */
  readonly lockTtlMs: number;
  /** An intake run's relay processes (kill-relay). */
  readonly relays: ChaosRelays | null;
  /** --postgres ha: the formation's faults. */
  readonly pg: PgFaults | null;
}

/** Ends a fault when its window does. */
export type Heal = () => Promise<void>;
/** Starts one fault; returns how to heal it, or null when it is over already. */
export type FaultStarter = (t: FaultTargets, event: FaultEvent, record: FaultRecord) => Promise<Heal | null>;

function pick<T>(items: readonly T[], target: number | undefined): T | undefined {
  return items.length === 0 ? undefined : items[(target ?? 0) % items.length];
}

const slotsOf = (g: SlotGroup) => `${g.fromSlot}-${g.toSlot}`;
const lockPattern = (t: FaultTargets) => `${t.lockKeyPrefix}{wallet:*}:lock`;
const fencePattern = (t: FaultTargets) => `${t.lockKeyPrefix}{wallet:*}:fence`;

function targetWorker(t: FaultTargets, event: FaultEvent): ChaosWorker {
  return t.fleet.worker(event.worker ?? 1);
}

function targetLink(t: FaultTargets, event: FaultEvent): LinkProxy {
  return targetWorker(t, event).proxies[event.link ?? 'redis'];
}

function requireCluster(t: FaultTargets, kind: FaultKind): ClusterTargets {
  if (t.cluster === null) throw new Error(`${kind} needs --redis cluster`);
  return t.cluster;
}

function requirePg(t: FaultTargets, kind: FaultKind): PgFaults {
  if (t.pg === null) throw new Error(`${kind} needs --postgres ha`);
  return t.pg;
}

async function killWorker(t: FaultTargets, event: FaultEvent): Promise<Heal> {
  const proc = targetWorker(t, event).process;
  await proc.kill();
  return async () => proc.start();
}

async function pauseWorker(t: FaultTargets, event: FaultEvent): Promise<Heal> {
  const proc = targetWorker(t, event).process;
  proc.freeze();
  return async () => proc.thaw();
}

async function deleteLocks(t: FaultTargets, _event: FaultEvent, record: FaultRecord): Promise<Heal> {
  // Locks are held for milliseconds, so one sweep mostly finds none: sweep again and
  // again for the fault's window, so that holders in the middle of a transfer lose theirs.
  const pattern = lockPattern(t);
  let deleted = 0;
  let sweeps = 0;
  let sweeping = true;
  const storm = (async () => {
    while (sweeping) {
      // Master by master: one that is down (restarting, failing over) does not spare the others.
      for (const node of await dataNodesOf(t.redis).catch(() => [])) {
        try {
          deleted += await deleteMatchingOnNode(node, pattern, isCluster(t.redis));
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

async function deleteFences(t: FaultTargets, _event: FaultEvent, record: FaultRecord): Promise<null> {
  const n = await deleteMatching(t.redis, fencePattern(t));
  record.detail += `: ${n} fence counters deleted`;
  return null;
}

async function restartRedis(t: FaultTargets, _event: FaultEvent, record: FaultRecord): Promise<null> {
  // The lock service loses its data (DESIGN: "Redis restarted without persistence"); the
  // queue, kept in the same AOF-backed server, survives the restart.
  const locks = await deleteMatching(t.redis, lockPattern(t));
  const fences = await deleteMatching(t.redis, fencePattern(t));
  const started = performance.now();
  const what = await t.services.restartRedis();
  record.detail +=
    `: ${locks} lock keys and ${fences} fence counters deleted, then SIGKILL and restart from AOF ` +
    `(${what}) in ${Math.round(performance.now() - started)} ms`;
  return null;
}

async function failoverLossy(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  const c = requireCluster(t, event.kind);
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
  const partitioned = queueKeyBases.length > 0 ? t.fleet.redisLinksTo(roles.master) : [];
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
          record.failoverAtMs = t.history.nowMs();
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
    t.services.recordPids();
  };
}

async function killRelay(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  if (t.relays === null) throw new Error('kill-relay needs relays: add --intake');
  const { process: proc, redis } = t.relays.relay(event.relay ?? 1);
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

async function killMaster(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  const c = requireCluster(t, event.kind);
  const group = pick(c.allGroups, event.target);
  if (group === undefined) throw new Error('no slot group');
  const killed = await c.faults.killMaster(group);
  t.services.recordPids();
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
    t.services.recordPids();
    record.failover = { kind: 'kill', slots: slotsOf(group), ...result };
    record.detail +=
      `: node ${result.replica} master after ${result.promotionMs} ms, node ${result.master} restarted ` +
      `and back as its replica after ${result.rejoinMs} ms`;
  };
}

async function terminateBackends(t: FaultTargets, _event: FaultEvent, record: FaultRecord): Promise<null> {
  const n = await t.services.terminateWorkerBackends();
  record.detail += `: ${n} worker sessions terminated`;
  return null;
}

async function terminateLockSessionsFault(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<null> {
  const { sessions, terminated } = await terminateLockSessions(
    t.services.databaseUrl,
    t.services.databaseName,
    event.target,
  );
  record.detail += `: ${terminated} of ${sessions} lock sessions terminated`;
  return null;
}

async function linkDelay(t: FaultTargets, event: FaultEvent): Promise<Heal> {
  const proxy = targetLink(t, event);
  proxy.setDelay(event.delayMs ?? 0, event.jitterMs ?? 0);
  return async () => proxy.setDelay(0, 0);
}

async function linkStall(t: FaultTargets, event: FaultEvent): Promise<Heal> {
  const proxy = targetLink(t, event);
  proxy.stall();
  return async () => proxy.unstall();
}

async function linkCut(t: FaultTargets, event: FaultEvent): Promise<Heal> {
  const proxy = targetLink(t, event);
  proxy.cut();
  return async () => proxy.uncut();
}

async function pgBlackhole(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  const proxy = targetWorker(t, event).proxies.postgres;
  const pid = targetWorker(t, event).process.pid;
  proxy.stall();
  const watch = pid === undefined ? null : BlackholeWatch.start(t.redis, t.lockKeyPrefix, pid, t.lockTtlMs);
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

async function pgFailover(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  const { detail, heal } = await requirePg(t, event.kind).failover((f) => {
    record.pg = f;
  });
  record.detail += detail;
  return async () => {
    record.detail += await heal();
  };
}

async function pgSwitchover(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<null> {
  record.detail += await requirePg(t, event.kind).switchover((f) => {
    record.pg = f;
  });
  return null;
}

async function pgStandbyKill(t: FaultTargets, event: FaultEvent, record: FaultRecord): Promise<Heal> {
  const { detail, heal } = await requirePg(t, event.kind).standbyKill(event.target ?? 0);
  record.detail += detail;
  return async () => {
    record.detail += await heal();
  };
}

/** Every fault kind's starter. */
export const FAULT_STARTERS: { readonly [K in FaultKind]: FaultStarter } = {
  'kill-worker': killWorker,
  'pause-worker': pauseWorker,
  'delete-locks': deleteLocks,
  'delete-fences': deleteFences,
  'restart-redis': restartRedis,
  'failover-lossy': failoverLossy,
  'kill-relay': killRelay,
  'kill-master': killMaster,
  'terminate-backends': terminateBackends,
  'terminate-lock-sessions': terminateLockSessionsFault,
  'link-delay': linkDelay,
  'link-stall': linkStall,
  'link-cut': linkCut,
  'pg-blackhole': pgBlackhole,
  'pg-failover': pgFailover,
  'pg-switchover': pgSwitchover,
  'pg-standby-kill': pgStandbyKill,
  ...ETCD_FAULT_STARTERS,
};
