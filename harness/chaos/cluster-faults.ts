// The two failovers of a chaos run on Redis Cluster, done for real on the harness's private
// cluster (3 masters, 1 replica each, a fault proxy in front of every node):
//
// - lossy failover: the replication link of one replica is stalled in its master's proxy while
//   the workers go on taking locks and tokens there; the replica falls behind (INFO replication
//   offsets say by how many bytes). Then, with the master's writes paused for an instant, the
//   lock keys and fence counters of the master are read, the replica is promoted with CLUSTER
//   FAILOVER TAKEOVER, the same keys are read on the new master, and the held replication
//   bytes are thrown away. What differs is what a real asynchronous failover loses: lock keys
//   (two holders at once) and fence increments (tokens issued again, or below the database's).
//   When the group holds a queue shard (intake runs), the queue's job hashes are read the same
//   way, so the run knows which acknowledged adds the takeover lost (queueJobsLost).
// - master killed: SIGKILL of a master; its replica is promoted after cluster-node-timeout; the
//   old master is started again and comes back as a replica of the new one.
import type { Redis } from 'ioredis';
import { notYet, done as pollDone, pollUntil } from '../services/bounded-wait.ts';
import { infoField, type LocalRedisCluster, type SlotGroup } from '../services/local-redis-cluster.ts';
import type { FaultProxy } from './fault-proxy.ts';

/** Bound on the write pause around a lossy takeover; Redis lifts it by itself after this long. */
export const TAKEOVER_PAUSE_MS = 10_000;
export const PROMOTION_TIMEOUT_MS = 30_000;
/** An old master resynchronising as a replica (full sync of a small data set) within this long. */
export const REJOIN_TIMEOUT_MS = 60_000;
const POLL_MS = 50;
const SCAN_COUNT = 1_000;

export interface LockKeySnapshot {
  /** fence key → counter. */
  readonly fences: Map<string, bigint>;
  /** lock key → owner and remaining TTL when read. */
  readonly locks: Map<string, { readonly owner: string; readonly pttlMs: number }>;
}

export interface FailoverLoss {
  readonly master: number;
  readonly replica: number;
  /** master_repl_offset of the master minus the replica's processed offset, right before the takeover. */
  readonly replicationLagBytes: number;
  /** Bytes the proxy held on the replication link when it was reset. */
  readonly heldBytes: number;
  readonly fenceKeysBefore: number;
  readonly lockKeysBefore: number;
  /** Fence counters lower on the new master than on the old one (missing counts as 0). */
  readonly fenceKeysBehind: number;
  /** Sum over those counters of old − new: tokens the new master will issue again. */
  readonly fenceIncrementsLost: number;
  /** Lock keys with TTL left on the old master that the new one lacks (or holds for another owner). */
  readonly lockKeysLost: number;
  /** walletId → the counter the old master had, for the wallets whose counter went back. */
  readonly walletsBehind: Record<string, string>;
  /** Job hashes of the queue shards on these slots that the old master held (0 when it holds none). */
  readonly queueJobsBefore: number;
  /** Of those, the ones the new master lacks: acknowledged adds (and their later writes) lost. */
  readonly queueJobsLost: number;
  /** The operations of the lost jobs (from their data on the old master; null when unreadable). */
  readonly lostOperations: readonly (string | null)[];
  /** From TAKEOVER sent to the replica answering ROLE master. */
  readonly promotionMs: number;
  /** From the write pause to the old master back as a replica with its link up. */
  readonly rejoinMs: number;
}

export interface KillMasterResult {
  readonly master: number;
  readonly replica: number;
  /** From SIGKILL to the replica serving the slots as master. */
  readonly promotionMs: number;
  /** From the restart to the old master linked as a replica of the new one. */
  readonly rejoinMs: number;
}

export interface KilledMaster {
  readonly master: number;
  readonly replica: number;
  readonly promoted: Promise<number>;
}

function walletOf(key: string): string | null {
  return /\{wallet:([^}]+)\}/.exec(key)?.[1] ?? null;
}

/**
 * Resolves with the milliseconds until `probe` said true; each call bounded by the time left, an
 * error counting as "not yet". Throws `<what>: not within <timeoutMs> ms; last seen: …`.
 */
async function waitFor(probe: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const t0 = performance.now();
  await pollUntil(
    async () => {
      try {
        return (await probe()) ? pollDone(undefined) : notYet('not yet');
      } catch (err) {
        return notYet(`error: ${err instanceof Error ? err.message : String(err)}`);
      }
    },
    { what, timeoutMs, intervalMs: POLL_MS },
  );
  return Math.round(performance.now() - t0);
}

/** Every lock key and fence counter under `keyPrefix` on one node (its own slots), with their values. */
export async function snapshotLockKeys(node: Redis, keyPrefix: string): Promise<LockKeySnapshot> {
  const fences = new Map<string, bigint>();
  const locks = new Map<string, { owner: string; pttlMs: number }>();
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', `${keyPrefix}{wallet:*}:*`, 'COUNT', SCAN_COUNT);
    cursor = next;
    const pipeline = node.pipeline();
    for (const key of keys) {
      pipeline.get(key);
      pipeline.pttl(key);
    }
    const replies = (await pipeline.exec()) ?? [];
    keys.forEach((key, i) => {
      const value = replies[2 * i]?.[1];
      const pttl = Number(replies[2 * i + 1]?.[1] ?? -2);
      if (typeof value !== 'string') return;
      if (key.endsWith(':fence') && /^\d+$/.test(value)) fences.set(key, BigInt(value));
      else if (key.endsWith(':lock')) locks.set(key, { owner: value, pttlMs: pttl });
    });
  } while (cursor !== '0');
  return { fences, locks };
}

/**
 * Every job hash of the queues under `keyBases` (BullMQ's `<prefix>:<name>`) on one node, with
 * the operation its data names: `<base>:<jobId>` hashes, `<base>:meta` excepted.
 */
export async function snapshotQueueJobs(node: Redis, keyBases: readonly string[]): Promise<Map<string, string | null>> {
  const jobs = new Map<string, string | null>();
  for (const base of keyBases) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', `${base}:*`, 'COUNT', SCAN_COUNT, 'TYPE', 'hash');
      cursor = next;
      const keys = found.filter((k) => {
        const rest = k.slice(base.length + 1);
        return rest !== 'meta' && !rest.includes(':');
      });
      const pipeline = node.pipeline();
      for (const key of keys) pipeline.hget(key, 'data');
      const replies = (await pipeline.exec()) ?? [];
      keys.forEach((key, i) => {
        const raw = replies[i]?.[1];
        let op: string | null = null;
        try {
          const data = typeof raw === 'string' ? (JSON.parse(raw) as { operationId?: unknown }) : null;
          op = typeof data?.operationId === 'string' ? data.operationId : null;
        } catch {
          op = null;
        }
        jobs.set(key, op);
      });
    } while (cursor !== '0');
  }
  return jobs;
}

async function existing(node: Redis, keys: readonly string[]): Promise<Set<string>> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.exists(key);
  const replies = (await pipeline.exec()) ?? [];
  return new Set(keys.filter((_, i) => Number(replies[i]?.[1] ?? 0) === 1));
}

/** The values of `keys` on one node now (null where absent). */
async function readKeys(node: Redis, keys: readonly string[]): Promise<Map<string, string | null>> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.get(key);
  const replies = (await pipeline.exec()) ?? [];
  return new Map(
    keys.map((key, i) => {
      const v = replies[i]?.[1];
      return [key, typeof v === 'string' ? v : null];
    }),
  );
}

/** What the new master lacks of what the old one had. */
export function compareSnapshots(
  before: LockKeySnapshot,
  after: ReadonlyMap<string, string | null>,
  elapsedMs: number,
) {
  let fenceKeysBehind = 0;
  let fenceIncrementsLost = 0n;
  const walletsBehind: Record<string, string> = {};
  for (const [key, old] of before.fences) {
    const raw = after.get(key) ?? null;
    const now = raw !== null && /^\d+$/.test(raw) ? BigInt(raw) : 0n;
    if (now < old) {
      fenceKeysBehind += 1;
      fenceIncrementsLost += old - now;
      const wallet = walletOf(key);
      if (wallet !== null) walletsBehind[wallet] = old.toString();
    }
  }
  let lockKeysLost = 0;
  for (const [key, { owner, pttlMs }] of before.locks) {
    // A lease that would have ended by now anyway is not a loss.
    if (pttlMs >= 0 && pttlMs <= elapsedMs) continue;
    if (after.get(key) !== owner) lockKeysLost += 1;
  }
  return { fenceKeysBehind, fenceIncrementsLost: Number(fenceIncrementsLost), lockKeysLost, walletsBehind };
}

export class ClusterFaults {
  constructor(
    private readonly cluster: LocalRedisCluster,
    /** The proxy in front of node i (the node announces its port). */
    private readonly frontOf: (index: number) => FaultProxy,
    private readonly lockKeyPrefix: string,
  ) {}

  /** The group's master and one replica now; throws when the group has no replica linked. */
  async roles(group: SlotGroup): Promise<{ master: number; replica: number }> {
    const master = await this.cluster.masterOf(group);
    if (master === null) throw new Error(`slots ${group.fromSlot}-${group.toSlot} have no master answering`);
    for (const member of group.members) {
      if (member === master || !this.cluster.isRunning(member)) continue;
      const info = String(await this.cluster.onNode(member, (c) => c.call('INFO', 'replication')));
      if (infoField(info, 'role') === 'slave' && infoField(info, 'master_link_status') === 'up')
        return { master, replica: member };
    }
    throw new Error(`slots ${group.fromSlot}-${group.toSlot}: no replica linked to node ${master}`);
  }

  /** Starts holding the replication link between the group's master and its replica. */
  async stallReplication(group: SlotGroup): Promise<{ master: number; replica: number }> {
    const roles = await this.roles(group);
    this.frontOf(roles.master).stallReplication();
    return roles;
  }

  /** Measures what the replica lacks, promotes it (TAKEOVER), and brings the old master back as its replica. */
  async lossyTakeover(
    roles: { master: number; replica: number },
    onTakeover?: () => void,
    /** BullMQ key bases (`<prefix>:<name>`) of the queue shards on these slots: their jobs are compared too. */
    queueKeyBases: readonly string[] = [],
  ): Promise<FailoverLoss> {
    const { master, replica } = roles;
    const front = this.frontOf(master);
    const oldMaster = this.cluster.nodeClient(master);
    const newMaster = this.cluster.nodeClient(replica);
    const tPause = performance.now();
    try {
      // Writes stop on the old master for the instant of the measurement and the takeover, so
      // the snapshot is exactly what it acknowledged; reads (and the cluster bus) go on.
      await oldMaster.call('CLIENT', 'PAUSE', String(TAKEOVER_PAUSE_MS), 'WRITE');
      const before = await snapshotLockKeys(oldMaster, this.lockKeyPrefix);
      const jobsBefore = await snapshotQueueJobs(oldMaster, queueKeyBases);
      const masterOffset = Number(infoField(String(await oldMaster.call('INFO', 'replication')), 'master_repl_offset'));
      const replicaOffset = Number(infoField(String(await newMaster.call('INFO', 'replication')), 'slave_repl_offset'));
      const heldBytes = front.heldReplicationBytes();
      const tTakeover = performance.now();
      onTakeover?.();
      await newMaster.call('CLUSTER', 'FAILOVER', 'TAKEOVER');
      const promotionMs = await waitFor(
        async () => {
          const role = await newMaster.call('ROLE');
          return Array.isArray(role) && role[0] === 'master';
        },
        PROMOTION_TIMEOUT_MS,
        `node ${replica} promoted`,
      );
      const after = await readKeys(newMaster, [...before.fences.keys(), ...before.locks.keys()]);
      const loss = compareSnapshots(before, after, performance.now() - tTakeover);
      const jobsAfter = await existing(newMaster, [...jobsBefore.keys()]);
      const lostJobs = [...jobsBefore].filter(([key]) => !jobsAfter.has(key));
      // The held bytes never reach anyone: the link is reset, as a partition that outlives a failover does.
      front.resetReplication();
      front.unstallReplication();
      // The old master learns of the newer epoch over the cluster bus and turns replica; only
      // then may its clients write again (they get MOVED to the new master).
      await waitFor(
        async () => {
          const role = await oldMaster.call('ROLE');
          return Array.isArray(role) && role[0] === 'slave';
        },
        PROMOTION_TIMEOUT_MS,
        `node ${master} demoted`,
      );
      await oldMaster.call('CLIENT', 'UNPAUSE');
      await this.cluster.waitUntilHealthy(REJOIN_TIMEOUT_MS);
      return {
        master,
        replica,
        replicationLagBytes: masterOffset - replicaOffset,
        heldBytes,
        fenceKeysBefore: before.fences.size,
        lockKeysBefore: before.locks.size,
        ...loss,
        queueJobsBefore: jobsBefore.size,
        queueJobsLost: lostJobs.length,
        lostOperations: lostJobs.map(([, op]) => op),
        promotionMs,
        rejoinMs: Math.round(performance.now() - tPause),
      };
    } finally {
      await oldMaster.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      front.unstallReplication();
      oldMaster.disconnect();
      newMaster.disconnect();
    }
  }

  /**
   * SIGKILL of the group's master. `promoted` resolves with the time from the kill until its
   * replica serves the slots as master (watched from the kill on, so it does not depend on when
   * the caller looks).
   */
  async killMaster(group: SlotGroup): Promise<KilledMaster> {
    const roles = await this.roles(group);
    await this.cluster.kill(roles.master);
    const promoted = waitFor(
      async () => (await this.cluster.masterOf(group)) === roles.replica,
      PROMOTION_TIMEOUT_MS,
      `node ${roles.replica} promoted`,
    );
    promoted.catch(() => undefined);
    return { ...roles, promoted };
  }

  /** Waits for the promotion, starts the old master again and waits until it is a linked replica. */
  async rejoin(killed: KilledMaster): Promise<KillMasterResult> {
    const promotionMs = await killed.promoted;
    const tRestart = performance.now();
    await this.cluster.restart(killed.master);
    await this.cluster.waitUntilHealthy(REJOIN_TIMEOUT_MS);
    return {
      master: killed.master,
      replica: killed.replica,
      promotionMs,
      rejoinMs: Math.round(performance.now() - tRestart),
    };
  }
}
