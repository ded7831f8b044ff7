// The fault schedule of a run: a pure function of the seed and the options, so the same seed
// injects the same faults at the same offsets, against the same workers and links.
import { type Random, randomInt, seededRandom } from '../../src/workload/prng.ts';
import { type ChaosOptions, ETCD_LOCK_FAULT_KINDS, type FaultKind } from './chaos-options.ts';
import { BLACKHOLE_PAST_BOUND_MS_MAX, BLACKHOLE_PAST_BOUND_MS_MIN, walletHoldBoundMs } from './pg-blackhole.ts';

export type LinkName = 'redis' | 'postgres';

export interface FaultEvent {
  /** 1-based, in start order. */
  readonly id: number;
  readonly kind: FaultKind;
  /** Offset from the start of the fault phase. */
  readonly atMs: number;
  /** How long the fault lasts before it is healed; 0 for instantaneous ones (fence deletion, terminations, restart). */
  readonly durationMs: number;
  /** 1-based worker index for worker and link faults; null for the others. */
  readonly worker: number | null;
  readonly link: LinkName | null;
  /** link-delay only. */
  readonly delayMs: number | null;
  readonly jitterMs: number | null;
  /**
   * Cluster faults only: picks the slot group among those the fault may hit at its start
   * (index modulo their number), so the same seed aims at the same group.
   */
  readonly target?: number;
  /**
   * Intake runs: this lossy failover hits a slot group holding a queue shard (the schedule of
   * an intake run marks its first one so), with the workers partitioned from that master.
   */
  readonly onQueue?: boolean;
  /** kill-relay only: 1-based relay index. */
  readonly relay?: number;
}

export type ScheduleOptions = Pick<
  ChaosOptions,
  'faults' | 'durationS' | 'faultsMax' | 'faultIntervalMs' | 'lockTtlMs' | 'workers'
> &
  Partial<Pick<ChaosOptions, 'intake' | 'relays'>>;

/** Faults start after this offset (the first jobs are flowing) ... */
export const SCHEDULE_START_MS = 1_500;
/** ... and no later than this share of the fault phase, so most end before it does. */
export const SCHEDULE_END_SHARE = 0.8;
/** Mixed into the seed so the schedule does not share its random stream with the workload. */
const SCHEDULE_SEED_SALT = 0x5eed_fa17;

const WORKER_FAULTS: readonly FaultKind[] = ['kill-worker', 'pause-worker'];
const LINK_FAULTS: readonly FaultKind[] = ['link-delay', 'link-stall', 'link-cut', 'pg-blackhole'];
/** How long the replication link is stalled before the lossy takeover (the writes that will be lost). */
export const LOSSY_STALL_MS_MIN = 1_500;
export const LOSSY_STALL_MS_MAX = 4_000;
/** How long a killed master stays down; its replica is promoted after cluster-node-timeout meanwhile. */
export const MASTER_DOWN_MS_MIN = 3_000;
export const MASTER_DOWN_MS_MAX = 6_000;
/** How long a killed primary stays down; a standby is promoted meanwhile (about 10 s: local-pg-formation.ts). */
export const PG_PRIMARY_DOWN_MS_MIN = 12_000;
export const PG_PRIMARY_DOWN_MS_MAX = 18_000;
/** How long a killed standby stays down. */
export const PG_STANDBY_DOWN_MS_MIN = 2_000;
export const PG_STANDBY_DOWN_MS_MAX = 5_000;
/** Slot groups the target index picks among (modulo the candidates at run time). */
const TARGET_SPREAD = 1_000;
/** The slot a run on the PostgreSQL or etcd lock service gives a fault of its service when the rounds left them out. */
const LOCK_SERVICE_SLOT = 3;
/** How long an etcd member stays killed, cut off or frozen. */
export const ETCD_MEMBER_DOWN_MS_MIN = 2_000;
export const ETCD_MEMBER_DOWN_MS_MAX = 5_000;
/** How long two of the three etcd members stay down: past the workers' probe rounds, and on etcd's TTL too. */
export const ETCD_QUORUM_LOSS_MS_MIN = 4_000;
export const ETCD_QUORUM_LOSS_MS_MAX = 7_000;
/** How long etcd-delete-locks deletes the lock keys again and again (as delete-locks does Redis's). */
export const ETCD_DELETE_LOCKS_MS_MIN = 3_000;
export const ETCD_DELETE_LOCKS_MS_MAX = 6_000;
const ETCD_KINDS: readonly FaultKind[] = ETCD_LOCK_FAULT_KINDS;

function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * The kinds of the schedule's slots, in shuffled rounds; a run of a sort that must hold a kind
 * gets it in a fixed slot when the rounds left it out: an intake run a lossy failover (the first
 * is aimed at a queue shard), an HA run a failover and a switchover of the formation, a run on
 * the PostgreSQL lock service a termination of the lock sessions, a run on etcd one of its faults.
 */
function scheduledKinds(random: Random, o: ScheduleOptions, count: number): FaultKind[] {
  const kinds: FaultKind[] = [];
  while (kinds.length < count) kinds.push(...shuffled(random, o.faults));
  const lacks = (kind: FaultKind) => o.faults.includes(kind) && !kinds.slice(0, count).includes(kind);
  if (o.intake === true && lacks('failover-lossy')) kinds[0] = 'failover-lossy';
  for (const [slot, must] of [
    [1, 'pg-failover'],
    [2, 'pg-switchover'],
  ] as const) {
    if (lacks(must) && slot < count) kinds[slot] = must;
  }
  if (lacks('terminate-lock-sessions')) kinds[Math.min(LOCK_SERVICE_SLOT, count - 1)] = 'terminate-lock-sessions';
  const etcdKinds = o.faults.filter((k) => ETCD_KINDS.includes(k));
  if (etcdKinds.length > 0 && !kinds.slice(0, count).some((k) => ETCD_KINDS.includes(k)))
    kinds[Math.min(LOCK_SERVICE_SLOT, count - 1)] = etcdKinds[Math.floor(random() * etcdKinds.length)] as FaultKind;
  return kinds;
}

/**
 * The numbers a fault on a service draws (its length, its target), or null for the other kinds.
 * Only these kinds draw them, so adding one leaves every other schedule of a seed what it was.
 */
function serviceFaultDraws(random: Random, kind: FaultKind): { durationMs: number; target: number | null } | null {
  switch (kind) {
    case 'failover-lossy':
    case 'kill-master': {
      const durationMs =
        kind === 'failover-lossy'
          ? randomInt(random, LOSSY_STALL_MS_MIN, LOSSY_STALL_MS_MAX)
          : randomInt(random, MASTER_DOWN_MS_MIN, MASTER_DOWN_MS_MAX);
      return { durationMs, target: randomInt(random, 0, TARGET_SPREAD - 1) };
    }
    case 'pg-failover':
      return { durationMs: randomInt(random, PG_PRIMARY_DOWN_MS_MIN, PG_PRIMARY_DOWN_MS_MAX), target: null };
    case 'pg-standby-kill': {
      const durationMs = randomInt(random, PG_STANDBY_DOWN_MS_MIN, PG_STANDBY_DOWN_MS_MAX);
      return { durationMs, target: randomInt(random, 0, TARGET_SPREAD - 1) };
    }
    // Instantaneous; the target picks one lock session, or every one (see chaos-lock.ts).
    case 'terminate-lock-sessions':
      return { durationMs: 0, target: randomInt(random, 0, TARGET_SPREAD - 1) };
    // The target picks the member (a follower, any member, the one left up: see etcd-faults.ts).
    case 'etcd-kill-member':
    case 'etcd-kill-leader':
    case 'etcd-partition-member':
    case 'etcd-freeze-member': {
      const durationMs = randomInt(random, ETCD_MEMBER_DOWN_MS_MIN, ETCD_MEMBER_DOWN_MS_MAX);
      return { durationMs, target: randomInt(random, 0, TARGET_SPREAD - 1) };
    }
    case 'etcd-quorum-loss': {
      const durationMs = randomInt(random, ETCD_QUORUM_LOSS_MS_MIN, ETCD_QUORUM_LOSS_MS_MAX);
      return { durationMs, target: randomInt(random, 0, TARGET_SPREAD - 1) };
    }
    case 'etcd-delete-locks':
      return { durationMs: randomInt(random, ETCD_DELETE_LOCKS_MS_MIN, ETCD_DELETE_LOCKS_MS_MAX), target: null };
    default:
      return null;
  }
}

/** How many faults the schedule holds: one per interval over the window, capped by faultsMax. */
export function scheduledFaultCount(o: ScheduleOptions): number {
  if (o.faults.length === 0) return 0;
  const spanMs = o.durationS * 1000 * SCHEDULE_END_SHARE - SCHEDULE_START_MS;
  const fitting = Math.max(1, Math.floor(spanMs / o.faultIntervalMs));
  return o.faultsMax === null ? fitting : Math.min(fitting, o.faultsMax);
}

/**
 * Kinds come in shuffled rounds (each round holds every enabled kind once), so every kind is
 * injected when there are at least as many faults as kinds, and they spread over the run.
 * Start times are stratified: one per equal slice of the window, at a random point inside it.
 * A worker fault never targets a worker that is still down or frozen, and at most
 * workers - 1 workers are down or frozen at once.
 */
export function buildSchedule(seed: number, o: ScheduleOptions): FaultEvent[] {
  const count = scheduledFaultCount(o);
  if (count === 0) return [];
  const random = seededRandom((seed ^ SCHEDULE_SEED_SALT) >>> 0);
  const ttl = o.lockTtlMs;
  const windowStartMs = SCHEDULE_START_MS;
  const windowEndMs = Math.max(windowStartMs + 1, Math.floor(o.durationS * 1000 * SCHEDULE_END_SHARE));
  const sliceMs = (windowEndMs - windowStartMs) / count;

  const kinds = scheduledKinds(random, o, count);
  let queueFailoverPlaced = false;
  /** Until when each relay (index 0 = relay 1) is down. */
  const relayDownUntil = new Array<number>(o.relays ?? 0).fill(0);

  /** Until when each worker (index 0 = worker 1) is killed or frozen. */
  const downUntil = new Array<number>(o.workers).fill(0);
  const linkBusyUntil = new Map<string, number>();
  const events: Omit<FaultEvent, 'id'>[] = [];

  for (let i = 0; i < count; i++) {
    const atMs = Math.round(windowStartMs + sliceMs * i + random() * sliceMs * 0.8);
    let kind = kinds[i] as FaultKind;
    let worker: number | null = null;
    let link: LinkName | null = null;
    let durationMs = 0;
    let delayMs: number | null = null;
    let jitterMs: number | null = null;

    if (WORKER_FAULTS.includes(kind)) {
      const down = downUntil.filter((until) => until > atMs).length;
      const free = downUntil
        .map((until, w) => ({ until, w }))
        .filter((x) => x.until <= atMs)
        .map((x) => x.w);
      if (free.length === 0 || (o.workers > 1 && down >= o.workers - 1)) {
        // Nobody to take down without stopping the whole fleet: cut a link instead, if cuts
        // were asked for, or leave this slot empty.
        if (!o.faults.includes('link-cut')) continue;
        kind = 'link-cut';
      } else {
        const w = free[Math.floor(random() * free.length)] as number;
        worker = w + 1;
        durationMs = kind === 'kill-worker' ? randomInt(random, 500, 2_000) : randomInt(random, 2 * ttl, 5 * ttl);
        downUntil[w] = atMs + durationMs;
      }
    }
    let relay: number | null = null;
    if (kind === 'kill-relay') {
      // One relay at most down at a time when there are several: the others go on relaying.
      const free = relayDownUntil.flatMap((until, r) => (until <= atMs ? [r] : []));
      const down = relayDownUntil.length - free.length;
      if (free.length === 0 || (relayDownUntil.length > 1 && down >= relayDownUntil.length - 1)) continue;
      const r = free[Math.floor(random() * free.length)] as number;
      relay = r + 1;
      durationMs = randomInt(random, 500, 2_000);
      relayDownUntil[r] = atMs + durationMs;
    }
    if (kind === 'delete-locks') durationMs = randomInt(random, 1_000, 3_000);
    const drawn = serviceFaultDraws(random, kind);
    const target = drawn?.target ?? null;
    if (drawn !== null) durationMs = drawn.durationMs;
    if (LINK_FAULTS.includes(kind)) {
      link = kind === 'pg-blackhole' ? 'postgres' : random() < 0.5 ? 'redis' : 'postgres';
      const candidates = Array.from({ length: o.workers }, (_, w) => w + 1).filter(
        (w) => (linkBusyUntil.get(`${w}:${link}`) ?? 0) <= atMs,
      );
      const pool = candidates.length > 0 ? candidates : Array.from({ length: o.workers }, (_, w) => w + 1);
      worker = pool[Math.floor(random() * pool.length)] as number;
      if (kind === 'link-delay') {
        durationMs = randomInt(random, 2_000, 6_000);
        delayMs = randomInt(random, 20, 250);
        jitterMs = randomInt(random, 0, Math.floor(delayMs / 2));
      } else if (kind === 'link-stall') {
        durationMs = randomInt(random, Math.round(1.5 * ttl), 3 * ttl);
      } else if (kind === 'pg-blackhole') {
        // Longer than the bound on the wallets held meanwhile: the bound frees them, not the end.
        const boundMs = walletHoldBoundMs(ttl);
        durationMs = randomInt(random, boundMs + BLACKHOLE_PAST_BOUND_MS_MIN, boundMs + BLACKHOLE_PAST_BOUND_MS_MAX);
      } else {
        durationMs = randomInt(random, 500, 3_000);
      }
      linkBusyUntil.set(`${worker}:${link}`, atMs + durationMs);
    }
    const onQueue = o.intake === true && kind === 'failover-lossy' && !queueFailoverPlaced;
    if (onQueue) queueFailoverPlaced = true;
    events.push({
      kind,
      atMs,
      durationMs,
      worker,
      link,
      delayMs,
      jitterMs,
      ...(target === null ? {} : { target }),
      ...(onQueue ? { onQueue } : {}),
      ...(relay === null ? {} : { relay }),
    });
  }
  return events.sort((a, b) => a.atMs - b.atMs).map((e, i) => Object.freeze({ id: i + 1, ...e }));
}

/** etcd-quorum-loss: the target's member left up is target mod 3; the next digit's parity kills (even) or freezes (odd) the others. */
export function etcdQuorumLossKills(target: number | undefined): boolean {
  return Math.floor((target ?? 0) / 3) % 2 === 0;
}

/** terminate-lock-sessions: every third target ends every lock session, the others one. */
export function lockSessionsAll(target: number | undefined): boolean {
  return (target ?? 0) % 3 === 0;
}

export function countByKind(events: readonly { kind: FaultKind }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of events) out[e.kind] = (out[e.kind] ?? 0) + 1;
  return out;
}

export function describeFault(e: FaultEvent): string {
  const target = e.worker === null ? '' : ` worker ${e.worker}${e.link === null ? '' : ` ${e.link} link`}`;
  const extra = e.delayMs === null ? '' : ` +${e.delayMs}±${e.jitterMs ?? 0} ms`;
  if (e.kind === 'failover-lossy') {
    return e.onQueue === true
      ? `failover-lossy on a queue shard: replication and the workers' links to the master stalled for ${e.durationMs} ms, then TAKEOVER`
      : `failover-lossy: replication stalled for ${e.durationMs} ms, then TAKEOVER`;
  }
  if (e.kind === 'kill-relay') return `kill-relay ${e.relay ?? 1}: SIGKILL, restarted after ${e.durationMs} ms`;
  if (e.kind === 'kill-master') return `kill-master: down for ${e.durationMs} ms`;
  if (e.kind === 'pg-failover') return `pg-failover: the primary killed, started again after ${e.durationMs} ms`;
  if (e.kind === 'pg-switchover') return "pg-switchover: a planned switchover (the monitor's perform_failover)";
  if (e.kind === 'pg-standby-kill') return `pg-standby-kill: a standby killed, started again after ${e.durationMs} ms`;
  if (e.kind === 'terminate-lock-sessions')
    return `terminate-lock-sessions: ${lockSessionsAll(e.target) ? 'every worker' : 'one worker'}'s lock session`;
  const etcd = describeEtcdFault(e);
  if (etcd !== null) return etcd;
  const lasting = e.durationMs > 0 ? ` for ${e.durationMs} ms` : '';
  return `${e.kind}${target}${extra}${lasting}`;
}

function describeEtcdFault(e: FaultEvent): string | null {
  if (e.kind === 'etcd-kill-member')
    return `etcd-kill-member: a follower SIGKILLed, restarted after ${e.durationMs} ms`;
  if (e.kind === 'etcd-kill-leader')
    return `etcd-kill-leader: the leader SIGKILLed, restarted after ${e.durationMs} ms`;
  if (e.kind === 'etcd-partition-member')
    return `etcd-partition-member: a member cut from the workers for ${e.durationMs} ms`;
  if (e.kind === 'etcd-freeze-member') return `etcd-freeze-member: a member SIGSTOPped for ${e.durationMs} ms`;
  if (e.kind === 'etcd-quorum-loss')
    return `etcd-quorum-loss: two members ${etcdQuorumLossKills(e.target) ? 'SIGKILLed' : 'SIGSTOPped'} for ${e.durationMs} ms`;
  return null;
}
