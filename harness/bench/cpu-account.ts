// Where a case's machine time goes: CPU seconds per transfer of each part of the system, read
// while the case runs, so a throughput figure comes with the cost that produced it. Linux only
// (/proc); every part that cannot be read is null, never guessed.
//
// Parts, each a cumulative CPU counter sampled every SAMPLE_INTERVAL_MS (QUICK_SAMPLE_INTERVAL_MS
// under --quick):
//   - processes: the case's own worker processes (real workers, no-op BullMQ workers or Graphile
//     Worker), the run time of every thread (GC, compilers) from /proc/<pid>/task/*/schedstat;
//   - relays:    the relay processes of the intake cases (e2e-intake-*), read like the processes;
//   - postgres:  the whole PostgreSQL server the case uses, when it runs on this machine: the
//     postmaster (with the CPU of the children it has reaped: backends that ended) plus every live
//     child (backends, WAL writer, checkpointer, ...);
//   - redis:     the Redis server, from its own INFO cpu (used_cpu_user + used_cpu_sys);
//   - etcd:      the members of the bench's etcd cluster (`--lock etcd`), read like the processes,
//     in the cases whose workers lock through it (null elsewhere);
//   - bench:     this process (it drives db-ceiling and seed-design, enqueues and polls);
//   - machine:   every busy CPU on the machine, from /proc/stat (what is left after the parts
//     above is "other": other processes, the kernel's own threads, other tenants' noise).
// The account covers the samples inside the case's throughput span (first → last commit) and
// divides by the transfers committed between those two samples, so start-up and drain are
// left out just as they are from the throughput.
import { readdirSync, readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type pg from 'pg';
import { spanOf } from './measure.ts';

/** Clock ticks per second of /proc's utime/stime: USER_HZ, 100 on every Linux architecture node runs on. */
export const PROC_TICKS_PER_S = 100;
export const SAMPLE_INTERVAL_MS = 250;
/**
 * `--quick` cases can last well under the normal interval when PostgreSQL commits fast: sampled
 * this often, they still get an account. A sample still in progress makes the next tick skip, so
 * this cannot pile up.
 */
export const QUICK_SAMPLE_INTERVAL_MS = 10;
/** Samples kept per case (at 250 ms, an hour); older ones are thinned out, never grown without bound. */
export const SAMPLES_MAX = 14_400;

export const CPU_PARTS = ['processes', 'relays', 'postgres', 'redis', 'etcd', 'bench', 'machine'] as const;
export type CpuPart = (typeof CPU_PARTS)[number];

/** Cumulative CPU milliseconds of each part at one moment (null: that part cannot be read). */
export interface CpuSample {
  /** Date.now(), the clock transfers.created_at and BullMQ timestamps are compared with. */
  readonly atMs: number;
  readonly cpuMs: Readonly<Record<CpuPart, number | null>>;
}

export interface CpuAccount {
  /** From the first sample inside the throughput span to the last one. */
  readonly windowMs: number;
  /** Transfers (or jobs) completed inside that window. */
  readonly transfers: number;
  /** CPU milliseconds per transfer, by part; null where the part could not be read throughout. */
  readonly msPerTransfer: Readonly<Record<CpuPart | 'other', number | null>>;
  /** Busy CPU of the whole machine over the window, in cores (2.0 = both cores of this machine busy). */
  readonly machineCores: number | null;
}

/** utime + stime (and the reaped children's cutime + cstime) of /proc/<pid>/stat, in ticks. */
export function parseProcStat(stat: string): { selfTicks: number; childrenTicks: number; ppid: number } | null {
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
  const close = stat.lastIndexOf(')');
  if (close < 0) return null;
  const fields = stat
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  // fields[0] is field 3 (state): utime is field 14, so fields[11]; ppid is field 4, fields[1].
  const [ppid, utime, stime, cutime, cstime] = [fields[1], fields[11], fields[12], fields[13], fields[14]].map(Number);
  if ([ppid, utime, stime, cutime, cstime].some((v) => v === undefined || !Number.isSafeInteger(v))) return null;
  return {
    selfTicks: (utime as number) + (stime as number),
    childrenTicks: (cutime as number) + (cstime as number),
    ppid: ppid as number,
  };
}

/** Busy and total ticks of the aggregate `cpu` line of /proc/stat (idle and iowait are not busy). */
export function parseMachineStat(stat: string): { busyTicks: number; totalTicks: number } | null {
  const line = stat.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return null;
  // user nice system idle iowait irq softirq steal [guest guest_nice: already inside user/nice]
  const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (v.length < 8 || v.some((x) => !Number.isSafeInteger(x))) return null;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = v as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const busy = user + nice + system + irq + softirq + steal;
  return { busyTicks: busy, totalTicks: busy + idle + iowait };
}

/** used_cpu_user + used_cpu_sys of a Redis INFO reply, in milliseconds. */
export function parseRedisCpuMs(info: string): number | null {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:([0-9.]+)\\r?$`, 'm').exec(info);
    return m === null ? null : Number(m[1]);
  };
  const user = field('used_cpu_user');
  const sys = field('used_cpu_sys');
  return user === null || sys === null ? null : (user + sys) * 1000;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

const ticksToMs = (ticks: number) => (ticks * 1000) / PROC_TICKS_PER_S;

/** The live children of a process: /proc/<pid>/task/<pid>/children, or a scan of /proc. */
function childrenOf(pid: number): number[] {
  const listed = readText(`/proc/${pid}/task/${pid}/children`);
  if (listed !== null) return listed.trim().split(/\s+/).filter(Boolean).map(Number);
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readText(`/proc/${name}/stat`);
    if (stat !== null && parseProcStat(stat)?.ppid === pid) out.push(Number(name));
  }
  return out;
}

/** The time on CPU of one task (a thread) in /proc/…/schedstat (its first field), in nanoseconds. */
export function parseSchedstatRunNs(schedstat: string): number | null {
  const field = schedstat.trim().split(/\s+/)[0] ?? '';
  const runNs = Number(field);
  return /^\d+$/.test(field) && Number.isSafeInteger(runNs) ? runNs : null;
}

/**
 * CPU of one live process, all its threads, ms; null when it cannot be read. From the scheduler's
 * own run time (/proc/<pid>/task/<tid>/schedstat, nanoseconds) where the kernel keeps it: utime and
 * stime of /proc/<pid>/stat are sampled at clock ticks, and a process that runs in bursts shorter
 * than a tick (a PostgreSQL backend answering short statements) is charged late or not at all: a
 * short case could read no PostgreSQL CPU at all. Without schedstat, the ticks.
 */
function liveProcessCpuMs(pid: number): number | null {
  let runNs = 0;
  let threads = 0;
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    // Gone, or /proc without task folders: the ticks below say which.
  }
  for (const tid of tasks) {
    const text = readText(`/proc/${pid}/task/${tid}/schedstat`);
    const ns = text === null ? null : parseSchedstatRunNs(text);
    if (ns === null) continue;
    runNs += ns;
    threads += 1;
  }
  if (threads > 0) return runNs / 1e6;
  const stat = readText(`/proc/${pid}/stat`);
  const parsed = stat === null ? null : parseProcStat(stat);
  return parsed === null ? null : ticksToMs(parsed.selfTicks);
}

/** CPU of a set of processes (their own, not their children's), ms; null when none could be read. */
function processesCpuMs(pids: readonly number[]): number | null {
  let ms = 0;
  let read = 0;
  for (const pid of pids) {
    const own = liveProcessCpuMs(pid);
    if (own === null) continue;
    ms += own;
    read += 1;
  }
  return read === 0 ? null : ms;
}

/**
 * The postmaster's own CPU, its live children's, and its reaped children's (cutime + cstime of its
 * stat: the only record of a backend that has ended, in ticks), ms.
 */
function serverCpuMs(postmasterPid: number): number | null {
  const stat = readText(`/proc/${postmasterPid}/stat`);
  const parsed = stat === null ? null : parseProcStat(stat);
  const own = liveProcessCpuMs(postmasterPid);
  if (parsed === null || own === null) return null;
  return own + ticksToMs(parsed.childrenTicks) + (processesCpuMs(childrenOf(postmasterPid)) ?? 0);
}

/**
 * The postmaster of the server behind `pool`, when that server runs on this machine and its
 * processes can be read: the parent of our own backend. Null otherwise.
 */
export async function findPostmaster(pool: pg.Pool): Promise<number | null> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const backend = rows[0]?.pid;
  if (backend === undefined) return null;
  const stat = readText(`/proc/${backend}/stat`);
  const parsed = stat === null ? null : parseProcStat(stat);
  if (parsed === null) return null;
  const cmdline = readText(`/proc/${parsed.ppid}/cmdline`) ?? '';
  const comm = readText(`/proc/${parsed.ppid}/comm`) ?? '';
  return /postgres|postmaster/.test(cmdline + comm) ? parsed.ppid : null;
}

export interface CpuSources {
  /** The case's own processes, asked at every sample (a fleet may restart one). */
  readonly processPids: () => readonly number[];
  /** The relay processes of an intake case; absent or none: the part is null. */
  readonly relayPids?: () => readonly number[];
  /** The etcd members of a case locking through etcd; absent or none: the part is null. */
  readonly etcdPids?: () => readonly number[];
  readonly postmasterPid: number | null;
  /** A client of the Redis server the case uses; null: not measured. A cluster is not measured. */
  readonly redis: Redis | Cluster | null;
  readonly intervalMs: number;
}

/** Samples every intervalMs from start() until stop(). */
export class CpuSampler {
  private readonly samples: CpuSample[] = [];
  private timer: NodeJS.Timeout | null = null;
  private pending: Promise<void> | null = null;
  private redisFailed = false;

  constructor(private readonly sources: CpuSources) {}

  start(): void {
    if (this.timer !== null) return;
    const tick = () => {
      // One sample at a time: a slow INFO reply skips a tick instead of piling up.
      this.pending ??= this.sample().finally(() => {
        this.pending = null;
      });
    };
    tick();
    this.timer = setInterval(tick, this.sources.intervalMs);
    this.timer.unref();
  }

  /** Takes a last sample and returns them all, oldest first. */
  async stop(): Promise<readonly CpuSample[]> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.pending;
    await this.sample();
    return this.samples;
  }

  private async sample(): Promise<void> {
    // The local counters first, together, at the sample's time; then Redis's, one round trip later.
    const atMs = Date.now();
    const machineStat = readText('/proc/stat');
    const machine = machineStat === null ? null : parseMachineStat(machineStat);
    const own = process.cpuUsage();
    const pids = this.sources.processPids();
    const processes = pids.length === 0 ? null : processesCpuMs(pids);
    const relayPids = this.sources.relayPids?.() ?? [];
    const relays = relayPids.length === 0 ? null : processesCpuMs(relayPids);
    const etcdPids = this.sources.etcdPids?.() ?? [];
    const etcd = etcdPids.length === 0 ? null : processesCpuMs(etcdPids);
    const postgres = this.sources.postmasterPid === null ? null : serverCpuMs(this.sources.postmasterPid);
    const redis = await this.redisCpuMs();
    this.samples.push({
      atMs,
      cpuMs: {
        processes,
        relays,
        postgres,
        redis,
        etcd,
        bench: (own.user + own.system) / 1000,
        machine: machine === null ? null : ticksToMs(machine.busyTicks),
      },
    });
    if (this.samples.length > SAMPLES_MAX) this.samples.splice(1, this.samples.length - SAMPLES_MAX);
  }

  private async redisCpuMs(): Promise<number | null> {
    const { redis } = this.sources;
    if (redis === null || this.redisFailed || !('info' in redis) || 'nodes' in redis) return null;
    try {
      return parseRedisCpuMs(await redis.info('cpu'));
    } catch {
      // An unreadable INFO (a restricted ACL user) is not measured for the rest of the case.
      this.redisFailed = true;
      return null;
    }
  }
}

const round3 = (v: number) => Math.round(v * 1000) / 1000;

/**
 * The account of the samples inside [firstMs, lastMs] (the throughput span): each part's CPU
 * between the first and last of them, over the completions (`times`, epoch ms) between them.
 * Null when fewer than two samples fall inside the span or nothing completed between them.
 */
export function cpuAccount(samples: readonly CpuSample[], times: readonly number[]): CpuAccount | null {
  const span = spanOf(times);
  if (span === null) return null;
  const inside = samples.filter((s) => s.atMs >= span.firstMs && s.atMs <= span.lastMs);
  const a = inside[0];
  const b = inside.at(-1);
  if (a === undefined || b === undefined || b.atMs <= a.atMs) return null;
  const transfers = times.filter((t) => t > a.atMs && t <= b.atMs).length;
  return accountBetween(a, b, transfers);
}

/**
 * The account of a whole phase (the intake cases' producer): from the first sample to the last
 * (the sampler started just before the phase and stopped just after), over `count` transfers.
 */
export function phaseAccount(samples: readonly CpuSample[], count: number): CpuAccount | null {
  const a = samples[0];
  const b = samples.at(-1);
  if (a === undefined || b === undefined || b.atMs <= a.atMs) return null;
  return accountBetween(a, b, count);
}

function accountBetween(a: CpuSample, b: CpuSample, transfers: number): CpuAccount | null {
  if (transfers === 0) return null;
  const windowMs = b.atMs - a.atMs;
  const per = (part: CpuPart): number | null => {
    const x = a.cpuMs[part];
    const y = b.cpuMs[part];
    // A part that went unreadable in between (or a counter that went back: a restarted
    // server) gives no figure rather than a wrong one.
    return x === null || y === null || y < x ? null : round3((y - x) / transfers);
  };
  const msPerTransfer = Object.fromEntries(CPU_PARTS.map((p) => [p, per(p)])) as Record<CpuPart, number | null>;
  const { machine } = msPerTransfer;
  const parts = CPU_PARTS.filter((p) => p !== 'machine').reduce((sum, p) => sum + (msPerTransfer[p] ?? 0), 0);
  const other = machine === null ? null : round3(Math.max(0, machine - parts));
  const machineCores = machine === null ? null : round3((machine * transfers) / windowMs);
  return { windowMs: Math.round(windowMs), transfers, msPerTransfer: { ...msPerTransfer, other }, machineCores };
}

/** The servers whose CPU a case's account includes (null leaves that part out), and how often to sample. */
export interface CpuServers {
  /** Any pool on the case's PostgreSQL server (the postmaster is found through it). */
  readonly pool: pg.Pool | null;
  readonly redis: Redis | Cluster | null;
  readonly intervalMs: number;
  /** The etcd members whose CPU the account includes (a case locking through etcd); absent: none. */
  readonly etcdPids?: () => readonly number[];
}

export function sampleIntervalMs(quick: boolean): number {
  return quick ? QUICK_SAMPLE_INTERVAL_MS : SAMPLE_INTERVAL_MS;
}

/** Starts a sampler for a case; `stop()` gives its samples. The sources are found once, here. */
export async function startCpuSampler(
  options: CpuServers & {
    readonly processPids?: () => readonly number[];
    readonly relayPids?: () => readonly number[];
  },
): Promise<CpuSampler> {
  const sampler = new CpuSampler({
    processPids: options.processPids ?? (() => []),
    ...(options.relayPids === undefined ? {} : { relayPids: options.relayPids }),
    ...(options.etcdPids === undefined ? {} : { etcdPids: options.etcdPids }),
    postmasterPid: options.pool === null ? null : await findPostmaster(options.pool),
    redis: options.redis,
    intervalMs: options.intervalMs,
  });
  sampler.start();
  return sampler;
}
