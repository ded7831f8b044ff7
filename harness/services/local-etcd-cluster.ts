// A private etcd cluster from the local binary (/usr/bin/etcd): N members on free loopback ports
// (client and peer ports alike, nothing listens beyond 127.0.0.1), data and logs under a folder
// the caller gives, short election settings suited to tests. Used by the etcd lock tests and,
// later, the chaos harness: a member can be killed (SIGKILL), restarted on its data and ports,
// frozen (SIGSTOP) and thawed.
// Every member's ports are chosen before any starts (the initial cluster names every peer URL);
// one taken in between makes that member exit at once, which is seen, and the whole cluster
// starts again on other ports, a bounded number of times. Every wait is bounded and ends at once
// when a member awaited has exited. etcd does not mind running as root: the same start serves
// root and other users.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { wholeNumberIn } from '../../src/config/bounds.ts';
import { done, notYet, pollUntil, WaitStoppedError } from './bounded-wait.ts';
import { freePort, PortInUseError } from './free-port.ts';
import { lastLines, logOffset, readFrom } from './log-tail.ts';

export const ETCD_BINARY = '/usr/bin/etcd';
export const ETCD_MEMBERS_DEFAULT = 3;
export const ETCD_MEMBERS_MAX = 7;
/** Short election settings for tests: a leader lost is replaced within about two seconds. */
export const ETCD_HEARTBEAT_INTERVAL_MS_DEFAULT = 100;
export const ETCD_ELECTION_TIMEOUT_MS_DEFAULT = 1_000;
/** Whole-cluster starts, each on freshly chosen ports, when a port is taken before it is bound. */
export const ETCD_START_ATTEMPTS_MAX = 5;
/** From spawn to "serving client traffic" in every member's log. */
export const ETCD_START_TIMEOUT_MS = 20_000;
/** From spawn to the member's client port accepting connections (a restart; readiness needs quorum). */
export const ETCD_LISTEN_TIMEOUT_MS = 10_000;
export const ETCD_LEADER_TIMEOUT_MS = 15_000;
/** Bound on one status call to one member. */
const STATUS_TIMEOUT_MS = 1_000;
const POLL_INTERVAL_MS = 50;
const LOG_TAIL_LINES = 8;
/** What etcd 3.4 logs (zap) once it is ready and serves its client port, securely or not. */
const READY_LINE = 'serving client traffic';
const PORT_IN_USE = /address already in use/i;

export interface LocalEtcdClusterOptions {
  /** Parent folder: member i keeps its data in `<dir>/member-<i>` and its log in `<dir>/member-<i>.log`. */
  readonly dir: string;
  /** Default ETCD_MEMBERS_DEFAULT. */
  readonly members?: number;
  readonly heartbeatIntervalMs?: number;
  readonly electionTimeoutMs?: number;
  /** Revision-mode auto compaction keeping this many revisions; default off. */
  readonly autoCompactionRevisions?: number;
  /** Remove `dir` on stop (default true). */
  readonly removeDirOnStop?: boolean;
}

/** One member: its name, ports and, while it runs, its process. */
interface Member {
  readonly index: number;
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  readonly logFile: string;
  child: ChildProcess | null;
  /** Settles with how the current process ended (its exit was not asked for, or was). */
  exited: Promise<string>;
}

function memberUrl(port: number): string {
  return `http://127.0.0.1:${port}`;
}

/** The environment without ETCD_* variables: etcd reads them as flags, and would clash with ours. */
function etcdEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('ETCD')));
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolveAccepts) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveAccepts(true);
    });
    socket.once('error', () => resolveAccepts(false));
  });
}

export class LocalEtcdCluster {
  private constructor(
    private readonly members: Member[],
    private readonly options: LocalEtcdClusterOptions,
    private readonly token: string,
  ) {}

  /** The client URLs, in member order (what ETCD_ENDPOINTS lists). */
  get endpoints(): string[] {
    return this.members.map((m) => memberUrl(m.clientPort));
  }

  get size(): number {
    return this.members.length;
  }

  /** Starts every member on fresh ports and waits until each serves; again elsewhere when a port was taken. */
  static async start(options: LocalEtcdClusterOptions): Promise<LocalEtcdCluster> {
    const count = wholeNumberIn('members', options.members ?? ETCD_MEMBERS_DEFAULT, 1, ETCD_MEMBERS_MAX);
    const tried: string[] = [];
    for (let attempt = 0; attempt < ETCD_START_ATTEMPTS_MAX; attempt += 1) {
      const members = await LocalEtcdCluster.chooseMembers(options.dir, count);
      tried.push(members.map((m) => `${m.clientPort}/${m.peerPort}`).join(','));
      const cluster = new LocalEtcdCluster(members, options, randomUUID());
      try {
        for (const member of members) cluster.spawnMember(member);
        // Each log was removed before the start: its lines begin at 0.
        await Promise.all(members.map((m) => cluster.waitForLog(m, 0, READY_LINE)));
        return cluster;
      } catch (error) {
        await cluster.stopMembers();
        if (!(error instanceof PortInUseError)) throw error;
      }
    }
    throw new Error(`etcd cluster found no ports free long enough to bind them: tried ${tried.join('; ')}`);
  }

  private static async chooseMembers(dir: string, count: number): Promise<Member[]> {
    const taken = new Set<number>();
    const members: Member[] = [];
    for (let index = 0; index < count; index += 1) {
      const [clientPort, peerPort] = [await distinctPort(taken), await distinctPort(taken)] as [number, number];
      const dataDir = resolve(dir, `member-${index}`);
      // A new cluster starts from nothing: a folder left by an earlier attempt would bring back its members.
      rmSync(dataDir, { recursive: true, force: true });
      const logFile = resolve(dir, `member-${index}.log`);
      rmSync(logFile, { force: true });
      members.push({
        index,
        name: `member-${index}`,
        clientPort,
        peerPort,
        dataDir,
        logFile,
        child: null,
        exited: Promise.resolve('not started'),
      });
    }
    return members;
  }

  private serverArgs(member: Member): string[] {
    const initialCluster = this.members.map((m) => `${m.name}=${memberUrl(m.peerPort)}`).join(',');
    const revisions = this.options.autoCompactionRevisions;
    return [
      ['--name', member.name],
      ['--data-dir', member.dataDir],
      ['--listen-client-urls', memberUrl(member.clientPort)],
      ['--advertise-client-urls', memberUrl(member.clientPort)],
      ['--listen-peer-urls', memberUrl(member.peerPort)],
      ['--initial-advertise-peer-urls', memberUrl(member.peerPort)],
      ['--initial-cluster', initialCluster],
      // Ignored once the member has data: a restart rejoins the cluster it belongs to.
      ['--initial-cluster-state', 'new'],
      ['--initial-cluster-token', this.token],
      ['--heartbeat-interval', String(this.options.heartbeatIntervalMs ?? ETCD_HEARTBEAT_INTERVAL_MS_DEFAULT)],
      ['--election-timeout', String(this.options.electionTimeoutMs ?? ETCD_ELECTION_TIMEOUT_MS_DEFAULT)],
      revisions === undefined
        ? ['--auto-compaction-retention', '0']
        : ['--auto-compaction-mode', 'revision', '--auto-compaction-retention', String(revisions)],
      ['--logger', 'zap', '--log-outputs', member.logFile],
    ].flat();
  }

  private spawnMember(member: Member): void {
    mkdirSync(resolve(member.dataDir, '..'), { recursive: true });
    const child = spawn(ETCD_BINARY, this.serverArgs(member), {
      stdio: ['ignore', 'ignore', 'ignore'],
      env: etcdEnv(),
    });
    member.child = child;
    member.exited = new Promise<string>((resolveExit) => {
      child.once('error', (err) => resolveExit(`etcd could not start: ${err.message}`));
      child.once('exit', (code, signal) => {
        resolveExit(`etcd ${member.name} ${signal === null ? `exited with code ${code}` : `ended by ${signal}`}`);
      });
    });
  }

  /** Until `line` is in the member's log after `offset`; a member that exited first ends the wait at once. */
  private async waitForLog(member: Member, offset: number, line: string): Promise<void> {
    const what = `etcd ${member.name} on 127.0.0.1:${member.clientPort}: "${line}" in ${member.logFile}`;
    await this.waitOn(member, offset, what, ETCD_START_TIMEOUT_MS, async () => {
      const text = readFrom(member.logFile, offset);
      return text.includes(line) ? done(undefined) : notYet(text === '' ? 'nothing in its log yet' : 'not yet');
    });
  }

  private async waitOn(
    member: Member,
    offset: number,
    what: string,
    timeoutMs: number,
    probe: () => Promise<{ done: true; value: undefined } | { done: false; seen: string }>,
  ): Promise<void> {
    try {
      await pollUntil(probe, { what, timeoutMs, intervalMs: POLL_INTERVAL_MS, stop: member.exited });
    } catch (error) {
      const text = readFrom(member.logFile, offset);
      const tail = `; the end of its log:\n${lastLines(text, LOG_TAIL_LINES)}`;
      if (error instanceof WaitStoppedError && PORT_IN_USE.test(text)) {
        throw new PortInUseError(`${what}: a port was taken before etcd bound it${tail}`, member.clientPort);
      }
      throw new Error(`${error instanceof Error ? error.message : String(error)}${tail}`);
    }
  }

  private member(index: number): Member {
    const member = this.members[index];
    if (member === undefined) throw new RangeError(`no etcd member ${index} (there are ${this.members.length})`);
    return member;
  }

  /** The process of member `index` while it runs (not killed, not exited). */
  pid(index: number): number | undefined {
    const child = this.member(index).child;
    return child === null || child.exitCode !== null || child.signalCode !== null ? undefined : child.pid;
  }

  /** SIGKILL, and wait for the process to be gone. */
  async kill(index: number): Promise<void> {
    const member = this.member(index);
    const child = member.child;
    member.child = null;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await member.exited;
  }

  /**
   * Starts a killed member again with its data and ports, and waits until its client port
   * accepts connections; it serves once a quorum is up again (waitForLeader).
   */
  async restart(index: number): Promise<void> {
    const member = this.member(index);
    await this.kill(index);
    const offset = logOffset(member.logFile);
    this.spawnMember(member);
    const what = `etcd ${member.name} restarted, listening on 127.0.0.1:${member.clientPort}`;
    await this.waitOn(member, offset, what, ETCD_LISTEN_TIMEOUT_MS, async () =>
      (await accepts(member.clientPort)) ? done(undefined) : notYet('its client port refuses connections'),
    );
  }

  /** SIGSTOP: the member keeps its sockets and answers nothing (a frozen host, a partition). */
  freeze(index: number): void {
    this.member(index).child?.kill('SIGSTOP');
  }

  thaw(index: number): void {
    this.member(index).child?.kill('SIGCONT');
  }

  /** A client of one member only, calls bounded by STATUS_TIMEOUT_MS. */
  private memberClient(index: number): Etcd3 {
    return new Etcd3({
      hosts: memberUrl(this.member(index).clientPort),
      defaultCallOptions: () => ({ deadline: Date.now() + STATUS_TIMEOUT_MS }),
    });
  }

  /** The member's own id and the leader it knows (Maintenance.Status); null when it does not answer. */
  async status(index: number): Promise<{ memberId: string; leaderId: string } | null> {
    if (this.pid(index) === undefined) return null;
    const client = this.memberClient(index);
    try {
      // The call's deadline bounds it; the race also covers a connection that never completes.
      const status = await Promise.race([
        client.maintenance.status(),
        sleep(STATUS_TIMEOUT_MS, null, { ref: false }).then(() => {
          throw new Error(`etcd member ${index}: no status within ${STATUS_TIMEOUT_MS} ms`);
        }),
      ]);
      return { memberId: status.header.member_id, leaderId: status.leader };
    } catch {
      return null;
    } finally {
      client.close();
    }
  }

  /** The index of the member a running member names as leader (and that is itself running), or null. */
  async leaderIndex(): Promise<number | null> {
    const statuses = await Promise.all(this.members.map((m) => this.status(m.index)));
    for (const status of statuses) {
      if (status === null || status.leaderId === '0') continue;
      const leader = statuses.findIndex((s) => s !== null && s.memberId === status.leaderId);
      if (leader !== -1) return leader;
    }
    return null;
  }

  /** Until a running member is leader, bounded; its index. */
  async waitForLeader(timeoutMs: number = ETCD_LEADER_TIMEOUT_MS): Promise<number> {
    return pollUntil(
      async () => {
        const leader = await this.leaderIndex();
        return leader === null ? notYet('no running member names a running leader') : done(leader);
      },
      { what: 'an etcd leader', timeoutMs, intervalMs: POLL_INTERVAL_MS },
    );
  }

  private async stopMembers(): Promise<void> {
    await Promise.all(this.members.map((m) => this.kill(m.index)));
  }

  async stop(): Promise<void> {
    await this.stopMembers();
    if (this.options.removeDirOnStop ?? true) rmSync(this.options.dir, { recursive: true, force: true });
  }
}

/** A free port not already handed to another member of the same cluster. */
async function distinctPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < ETCD_START_ATTEMPTS_MAX * 10; attempt += 1) {
    const port = await freePort();
    if (taken.has(port)) continue;
    taken.add(port);
    return port;
  }
  throw new Error('no distinct free port found');
}

/**
 * For a test: a cluster in a fresh temporary folder (`etcd-<label>-…`), which `stop()` removes.
 * Call it in beforeAll and stop it in afterAll.
 */
export function startTempEtcdCluster(
  label: string,
  options: Omit<LocalEtcdClusterOptions, 'dir' | 'removeDirOnStop'> = {},
): Promise<LocalEtcdCluster> {
  const dir = mkdtempSync(join(tmpdir(), `etcd-${label}-`));
  return LocalEtcdCluster.start({ ...options, dir, removeDirOnStop: true }).catch((error: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  });
}
