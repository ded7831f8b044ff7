// The faults of a `--lock etcd` run, on its private cluster (chaos-etcd.ts): a follower killed
// (SIGKILL, restarted on its data after the fault's window), the leader killed the same way, a
// member cut from every worker (its proxy resets and refuses connections, then heals), a member
// frozen (SIGSTOP, then SIGCONT), and the quorum lost (two of the three killed or frozen, then
// back), and the lock keys deleted under their holders for a while (deleteLocks). Through a quorum loss the workers' /readyz is read every READY_POLL_MS, as an operator's
// probe would: etcdQuorumCheck fails a run whose workers did not say not ready while the cluster
// had no quorum, or still named etcd as what does not answer READY_AGAIN_MAX_MS after its return
// (a worker not ready for another fault meanwhile, a PostgreSQL link held, is not etcd's doing).
import { setTimeout as sleep } from 'node:timers/promises';
import { READY_REQUEST_TIMEOUT_MS } from '../fleet/worker-processes.ts';
import type { LocalEtcdCluster } from '../services/local-etcd-cluster.ts';
import type { ChaosEtcd } from './chaos-etcd.ts';
import type { ChaosFleet, ChaosWorker } from './chaos-fleet.ts';
import type { ETCD_LOCK_FAULT_KINDS } from './chaos-options.ts';
import { Check, type CheckResult } from './check-result.ts';
import type { FaultStarter, FaultTargets, Heal } from './fault-starters.ts';
import type { FaultRecord } from './faults.ts';
import { NOT_READY_REQUIRED_AFTER_MS, READY_AGAIN_MAX_MS, READY_POLL_MS } from './pg-fleet-watch.ts';
import { etcdQuorumLossKills } from './schedule.ts';

/** What the fleet's readiness did through a quorum loss. */
export interface EtcdFleetFigures {
  /**
   * Workers whose /readyz answers while the quorum was lost spanned NOT_READY_REQUIRED_AFTER_MS at
   * least (time for three of their probe rounds); a worker frozen or restarting for most of it is
   * not judged.
   */
  readonly workersAnswering: number;
  /** Of those, the workers that said not ready (503) at least once. */
  readonly workersNotReady: number;
  /**
   * From the quorum's return until no answering worker named etcd in its /readyz (ready, or not
   * ready for another fault's sake); null if not within READY_AGAIN_MAX_MS.
   */
  readonly readyAgainAfterMs: number | null;
}

/** What an etcd fault did (FaultRecord.etcd). */
export interface EtcdFaultFigures {
  /** The members it acted on (indices). */
  readonly members: readonly number[];
  /** From the first member down until a leader was known again (kills of the leader, quorum losses). */
  readonly noLeaderMs?: number;
  /** Quorum losses only: how long two members were down, and the fleet's readiness meanwhile. */
  readonly noQuorumMs?: number;
  readonly fleet?: EtcdFleetFigures;
}

function requireEtcd(t: FaultTargets): ChaosEtcd {
  const etcd = t.services.etcd;
  if (etcd === null) throw new Error('the etcd faults need --lock etcd');
  return etcd;
}

/** Waits for a leader again and notes how long the cluster had none, from `sinceMs`. */
async function leaderBack(cluster: LocalEtcdCluster, sinceMs: number): Promise<{ leader: number; ms: number }> {
  const leader = await cluster.waitForLeader();
  return { leader, ms: Math.round(performance.now() - sinceMs) };
}

/** Kills a follower (the target picks among them); restarted at the heal. */
async function killMember(t: FaultTargets, event: { target?: number }, record: FaultRecord): Promise<Heal> {
  const { cluster } = requireEtcd(t);
  const leader = await cluster.leaderIndex();
  const followers = Array.from({ length: cluster.size }, (_, i) => i).filter((i) => i !== leader);
  const member = followers[(event.target ?? 0) % followers.length] as number;
  await cluster.kill(member);
  record.detail += ` (member ${member}, a follower of member ${leader ?? 'none'})`;
  record.etcd = { members: [member] };
  return async () => {
    await cluster.restart(member);
    t.services.recordPids();
    const back = await leaderBack(cluster, performance.now());
    record.detail += `: restarted, leader member ${back.leader}`;
  };
}

/** Kills the leader; the others elect one meanwhile; restarted at the heal. */
async function killLeader(t: FaultTargets, _event: unknown, record: FaultRecord): Promise<Heal> {
  const { cluster } = requireEtcd(t);
  const leader = await cluster.leaderIndex();
  if (leader === null) throw new Error('no etcd leader to kill');
  const killedAtMs = performance.now();
  await cluster.kill(leader);
  record.detail += ` (member ${leader})`;
  const elected = leaderBack(cluster, killedAtMs);
  elected.catch(() => undefined);
  return async () => {
    // Restarted whatever the election did: a member left dead would take the next fault's quorum.
    const next = await elected.finally(async () => {
      await cluster.restart(leader);
      t.services.recordPids();
    });
    record.etcd = { members: [leader], noLeaderMs: next.ms };
    record.detail += `: member ${next.leader} leader after ${next.ms} ms; member ${leader} restarted`;
  };
}

/** Cuts one member's proxy: every worker's connection to it reset, new ones refused, until the heal. */
async function partitionMember(t: FaultTargets, event: { target?: number }, record: FaultRecord): Promise<Heal> {
  const etcd = requireEtcd(t);
  const member = (event.target ?? 0) % etcd.fronts.length;
  const front = etcd.fronts[member];
  if (front === undefined) throw new RangeError(`no proxy in front of etcd member ${member}`);
  const leader = await etcd.cluster.leaderIndex();
  front.cut();
  record.detail += ` (member ${member}${member === leader ? ', the leader' : ''}, cut from every worker)`;
  record.etcd = { members: [member] };
  return async () => front.uncut();
}

/** SIGSTOP of one member (the leader, when the target picks it), SIGCONT at the heal. */
async function freezeMember(t: FaultTargets, event: { target?: number }, record: FaultRecord): Promise<Heal> {
  const { cluster } = requireEtcd(t);
  const member = (event.target ?? 0) % cluster.size;
  const leader = await cluster.leaderIndex();
  cluster.freeze(member);
  record.detail += ` (member ${member}${member === leader ? ', the leader' : ''})`;
  record.etcd = { members: [member] };
  return async () => {
    cluster.thaw(member);
    const back = await leaderBack(cluster, performance.now());
    record.detail += `: thawed, leader member ${back.leader}`;
  };
}

/** Two of the three members killed or frozen (the target picks which stays up, and how); back at the heal. */
async function quorumLoss(t: FaultTargets, event: { target?: number }, record: FaultRecord): Promise<Heal> {
  const etcd = requireEtcd(t);
  const { cluster } = etcd;
  const up = (event.target ?? 0) % cluster.size;
  const down = Array.from({ length: cluster.size }, (_, i) => i).filter((i) => i !== up);
  const kills = etcdQuorumLossKills(event.target);
  const watch = new ReadinessWatch(t.fleet);
  const lostAtMs = performance.now();
  try {
    for (const m of down) {
      if (kills) await cluster.kill(m);
      else cluster.freeze(m);
    }
  } catch (err) {
    await watch.abandon();
    throw err;
  }
  watch.lost();
  record.detail += ` (members ${down.join(' and ')} ${kills ? 'killed' : 'frozen'}, member ${up} alone)`;
  return async () => {
    let back: { leader: number; ms: number };
    try {
      for (const m of down) {
        if (kills) await cluster.restart(m);
        else cluster.thaw(m);
      }
      t.services.recordPids();
      back = await leaderBack(cluster, lostAtMs);
    } catch (err) {
      await watch.abandon();
      throw err;
    }
    const figures = { members: down, noLeaderMs: back.ms, noQuorumMs: back.ms };
    record.etcd = figures;
    record.detail += `: quorum back after ${back.ms} ms (leader member ${back.leader})`;
    // The fleet's way back is measured on (bounded), without holding the cluster's next fault.
    etcd.track(
      watch.stop().then((fleet) => {
        record.etcd = { ...figures, fleet };
        record.detail +=
          `; ${fleet.workersNotReady} of ${fleet.workersAnswering} answering workers said not ready, ` +
          (fleet.readyAgainAfterMs === null
            ? 'not all ready again'
            : `all ready again ${fleet.readyAgainAfterMs} ms after`);
      }),
    );
  };
}

/** A worker's /readyz now: its status (0: no answer) and whether it names etcd as what does not answer. */
async function readinessOf(w: ChaosWorker): Promise<{ status: number; etcd: boolean }> {
  try {
    const reply = await fetch(w.process.url('/readyz'), { signal: AbortSignal.timeout(READY_REQUEST_TIMEOUT_MS) });
    const body = await reply.text();
    return { status: reply.status, etcd: reply.status !== 200 && /etcd/i.test(body) };
  } catch {
    return { status: 0, etcd: false };
  }
}

/**
 * The workers' /readyz every READY_POLL_MS from the fault's start, and after stop() until no
 * answering worker names etcd as what does not answer.
 */
class ReadinessWatch {
  /** Per worker, the span of its answers while the quorum was lost, and whether one was not ready. */
  private readonly withoutQuorum = new Map<number, { firstMs: number; lastMs: number; notReady: boolean }>();
  /** Per worker, its latest reading (one frozen worker must not slow the others' readings). */
  private readonly latest = new Map<number, { status: number; etcd: boolean }>();
  private quorumLost = false;
  private allReadyAtMs: number | null = null;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(fleet: ChaosFleet) {
    this.loop = Promise.all(fleet.workers.map((w) => this.watch(w))).then(() => undefined);
  }

  /** Call once the members are down: readings count as without a quorum from now until stop(). */
  lost(): void {
    this.quorumLost = true;
  }

  /** Call once the quorum is back: waits (bounded) until no answering worker blames etcd, then stops. */
  async stop(): Promise<EtcdFleetFigures> {
    this.quorumLost = false;
    const backAtMs = performance.now();
    this.allReadyAtMs = null;
    while (this.allReadyAtMs === null && performance.now() - backAtMs < READY_AGAIN_MAX_MS) await sleep(READY_POLL_MS);
    this.running = false;
    await this.loop;
    const judged = [...this.withoutQuorum.values()].filter((w) => w.lastMs - w.firstMs >= NOT_READY_REQUIRED_AFTER_MS);
    return {
      workersAnswering: judged.length,
      workersNotReady: judged.filter((w) => w.notReady).length,
      readyAgainAfterMs: this.allReadyAtMs === null ? null : Math.round(Math.max(0, this.allReadyAtMs - backAtMs)),
    };
  }

  /** Stops at once, without figures (the fault failed: etcdQuorumCheck reports its error). */
  async abandon(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  private async watch(w: ChaosWorker): Promise<void> {
    while (this.running) {
      const reading = await readinessOf(w);
      const nowMs = performance.now();
      this.latest.set(w.index, reading);
      if (this.quorumLost && reading.status !== 0) {
        const seen = this.withoutQuorum.get(w.index) ?? { firstMs: nowMs, lastMs: nowMs, notReady: false };
        this.withoutQuorum.set(w.index, { ...seen, lastMs: nowMs, notReady: seen.notReady || reading.status !== 200 });
      }
      const answering = [...this.latest.values()].filter((r) => r.status !== 0);
      if (answering.some((r) => r.etcd)) this.allReadyAtMs = null;
      else if (answering.length > 0) this.allReadyAtMs ??= nowMs;
      await sleep(READY_POLL_MS);
    }
  }
}

/** The lock keys deleted this often during etcd-delete-locks's window. */
const ETCD_DELETE_SWEEP_MS = 10;

/**
 * Deletes every lock key of the run again and again for the fault's window: holders keep their
 * lease (they renew by keep-alives) and go on, while other workers take the same wallets. Two
 * holders at once, as when Redis loses its lock keys: only the fence keeps the later one's writes.
 */
async function deleteLocks(t: FaultTargets, _event: unknown, record: FaultRecord): Promise<Heal> {
  const etcd = requireEtcd(t);
  const client = etcd.client();
  const prefix = Buffer.from(`${t.lockKeyPrefix}wallet/`);
  let deleted = 0;
  let sweeps = 0;
  let sweeping = true;
  const storm = (async () => {
    while (sweeping) {
      try {
        const reply = await client.kv.deleteRange({ key: prefix, range_end: prefixEnd(prefix) });
        deleted += Number(reply.deleted);
      } catch {
        // A member down for another fault: swept again on the next tick.
      }
      sweeps += 1;
      await sleep(ETCD_DELETE_SWEEP_MS);
    }
  })();
  record.etcd = { members: [] };
  return async () => {
    sweeping = false;
    await storm;
    client.close();
    record.detail += `: ${deleted} held lock keys deleted in ${sweeps} sweeps`;
  };
}

/** The end of etcd's range of keys starting with `prefix`: the prefix with its last byte plus one. */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  end[end.length - 1] = (end[end.length - 1] as number) + 1;
  return end;
}

/** Every etcd fault kind's starter (fault-starters.ts spreads them into its table). */
export const ETCD_FAULT_STARTERS: { readonly [K in (typeof ETCD_LOCK_FAULT_KINDS)[number]]: FaultStarter } = {
  'etcd-kill-member': killMember,
  'etcd-kill-leader': killLeader,
  'etcd-partition-member': partitionMember,
  'etcd-freeze-member': freezeMember,
  'etcd-quorum-loss': quorumLoss,
  'etcd-delete-locks': deleteLocks,
};

/**
 * The run's check on every quorum loss: the workers that answered said not ready while the
 * cluster had no quorum (when that lasted NOT_READY_REQUIRED_AFTER_MS, three probe rounds), and
 * every one said ready again within READY_AGAIN_MAX_MS of its return.
 */
export function etcdQuorumCheck(records: readonly FaultRecord[]): CheckResult {
  const judged = records.filter((r) => r.kind === 'etcd-quorum-loss');
  const check = new Check(
    `the workers said not ready without an etcd quorum, and stopped blaming etcd after its return (${judged.length} quorum losses)`,
    'queue',
  );
  for (const r of judged) {
    const e = r.etcd;
    if (e?.fleet === undefined) {
      check.fail({ fault: r.id, kind: r.kind, problem: r.error ?? 'the quorum did not come back' });
      continue;
    }
    const problems: string[] = [];
    if ((e.noQuorumMs ?? 0) >= NOT_READY_REQUIRED_AFTER_MS && e.fleet.workersNotReady < e.fleet.workersAnswering)
      problems.push(
        `${e.fleet.workersAnswering - e.fleet.workersNotReady} of ${e.fleet.workersAnswering} never said not ready`,
      );
    if (e.fleet.readyAgainAfterMs === null)
      problems.push(`not every worker ready again within ${READY_AGAIN_MAX_MS} ms`);
    if (problems.length > 0) check.fail({ fault: r.id, kind: r.kind, problem: problems.join('; ') });
  }
  return check.result();
}
