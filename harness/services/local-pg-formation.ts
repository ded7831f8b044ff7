// A private highly available PostgreSQL: a pg_auto_failover formation (Debian's
// postgresql-15-auto-failover, `pg_autoctl`) of one monitor and three nodes on free loopback
// ports, for `npm run chaos -- --postgres ha` and the tests that fail a primary over. The first
// node starts as the primary, the other two follow it with `number-sync-standbys 1`: every commit
// waits for one standby's flush (`synchronous_standby_names = ANY 1 (...)`), and a failover may
// only promote a standby that has every acknowledged commit.
//
// Every keeper runs in the foreground (`pg_autoctl create ... --run`, then `pg_autoctl run` after a
// kill) in a process group of its own, so a kill takes the keeper and its PostgreSQL at once, as
// a crashed machine would. As root, every pg_autoctl process runs as the postgres user. The
// keepers' configuration and state files live under the formation's folder (XDG_CONFIG_HOME,
// XDG_DATA_HOME), not in the user's home.
//
// Detection is shortened for the harness (FORMATION_TIMEOUTS; pg_auto_failover's production
// defaults beside each): a killed primary is replaced in about 10 s instead of about 50 s.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { done, errorsAsNotYet, notYet, pollUntil } from './bounded-wait.ts';
import { freePort } from './free-port.ts';
import { ownByServerUser, postgresBinDir, postmasterPidIn, runAsServerUser } from './local-postgres.ts';
import { lastLines, logOffset, readFrom } from './log-tail.ts';

const run = promisify(execFile);

export const PG_AUTOCTL = '/usr/bin/pg_autoctl';
/** Nodes of the formation: a primary and two standbys. */
export const FORMATION_NODES = 3;
/** The database every node serves (created by the first node). */
export const FORMATION_DATABASE = 'chaos';
/** Bound on the monitor, a node, or the whole formation coming up (a standby's base backup included). */
export const FORMATION_START_TIMEOUT_MS = 120_000;
/** Bound on the formation getting back to one primary and all standbys secondary after a fault. */
export const FORMATION_RECOVERY_TIMEOUT_MS = 120_000;
/** Bound on a killed keeper's process being gone before its node is started again. */
const KEEPER_GONE_TIMEOUT_MS = 10_000;
/** Lines of a keeper's log quoted when it exits unasked. */
const KEEPER_LOG_LINES = 15;
/** How often a standby's base backup is hurried along (a CHECKPOINT on the primary). */
const CHECKPOINT_NUDGE_MS = 1_000;

/**
 * The monitor's settings the harness shortens (pg_auto_failover's production default in the
 * comment): how fast a dead primary is noticed and a standby promoted.
 */
export const FORMATION_TIMEOUTS = {
  /** 5000 ms: between two health checks of a node. */
  'pgautofailover.health_check_period': '1000',
  /** 5000 ms: a health check's connection timeout. */
  'pgautofailover.health_check_timeout': '1000',
  /** 2000 ms. */
  'pgautofailover.health_check_retry_delay': '500',
  /** 2. */
  'pgautofailover.health_check_max_retries': '1',
  /** 20000 ms: a node silent this long (no keeper report) is unhealthy. */
  'pgautofailover.node_considered_unhealthy_timeout': '2000',
  /** 30000 ms: how long the monitor waits for an unreachable primary to demote itself before promoting. */
  'pgautofailover.primary_demote_timeout': '5000',
} as const;

/**
 * The keepers' own timeout: a primary that cannot reach the monitor nor a standby this long
 * demotes itself (production default 20 s). It stays below primary_demote_timeout, so an isolated
 * primary has stopped taking writes before a standby is promoted: no two primaries.
 */
export const KEEPER_NETWORK_PARTITION_TIMEOUT_S = 3;

/** States in which a node is the formation's writable primary. */
const PRIMARY_STATES = new Set(['single', 'wait_primary', 'primary', 'join_primary', 'apply_settings']);

export interface FormationNode {
  readonly name: string;
  readonly port: number;
  readonly dir: string;
}

/** One row of the monitor's view of a node. */
export interface NodeState {
  readonly name: string;
  readonly port: number;
  readonly goal: string;
  readonly reported: string;
  readonly lsn: string;
  readonly health: number;
}

export interface LocalPgFormationOptions {
  /** Folder of the formation: the monitor's and each node's data, logs and keeper files. */
  readonly dir: string;
  /** Server settings of every node (ALTER SYSTEM on the first, copied by each base backup). */
  readonly settings?: Readonly<Record<string, string>>;
}

interface Keeper {
  proc: ChildProcess;
  exited: Promise<string>;
}

export class LocalPgFormation {
  private readonly keepers = new Map<string, Keeper>();
  private monitorKeeper: Keeper | null = null;

  private constructor(
    readonly dir: string,
    readonly monitorPort: number,
    readonly nodes: readonly FormationNode[],
    private readonly binDir: string,
  ) {}

  get monitorUrl(): string {
    return `postgresql://autoctl_node@127.0.0.1:${this.monitorPort}/pg_auto_failover?sslmode=disable`;
  }

  /** A node's own URL (the superuser), bypassing any endpoint in front of the formation. */
  nodeUrl(node: FormationNode, database = FORMATION_DATABASE): string {
    return `postgresql://postgres@127.0.0.1:${node.port}/${database}`;
  }

  node(name: string): FormationNode {
    const node = this.nodes.find((n) => n.name === name);
    if (node === undefined) throw new Error(`no node ${name} in the formation`);
    return node;
  }

  /** Starts the monitor, then the first node, which becomes the primary, then the standbys together. */
  static async start(opts: LocalPgFormationOptions): Promise<LocalPgFormation> {
    const binDir = postgresBinDir();
    if (binDir === null) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql/*/bin');
    if (!existsSync(PG_AUTOCTL))
      throw new Error(
        `${PG_AUTOCTL} is missing: --postgres ha needs pg_auto_failover (apt-get install postgresql-15-auto-failover; .ci/prerequisites installs it)`,
      );
    mkdirOwned(opts.dir);
    const monitorPort = await freePort();
    const nodes: FormationNode[] = [];
    for (let i = 1; i <= FORMATION_NODES; i++) {
      nodes.push({ name: `node${i}`, port: await freePort(), dir: join(opts.dir, `node${i}`) });
    }
    const f = new LocalPgFormation(opts.dir, monitorPort, nodes, binDir);
    try {
      await f.startMonitor();
      const [first, ...rest] = nodes;
      if (first === undefined) throw new Error('a formation needs nodes');
      f.keepers.set(first.name, f.spawnKeeper(first.name, f.createArgs(first)));
      await f.waitForState(first.name, ['single'], FORMATION_START_TIMEOUT_MS);
      await f.configureFirst(first, opts.settings ?? {});
      // The standbys join at once (pg_auto_failover registers several concurrently since 1.4):
      // their base backups run side by side, not one after the other.
      for (const node of rest) f.keepers.set(node.name, f.spawnKeeper(node.name, f.createArgs(node)));
      await f.hurryBaseBackup(first, () =>
        Promise.all(rest.map((node) => f.waitForState(node.name, ['secondary'], FORMATION_START_TIMEOUT_MS))),
      );
      await f.setKeeperTimeouts();
      await f.waitHealthy(FORMATION_START_TIMEOUT_MS);
      return f;
    } catch (err) {
      await f.stop();
      throw err;
    }
  }

  private env(): NodeJS.ProcessEnv {
    return {
      PATH: `${this.binDir}:/usr/sbin:/usr/bin:/sbin:/bin`,
      XDG_CONFIG_HOME: join(this.dir, 'config'),
      XDG_DATA_HOME: join(this.dir, 'data'),
      LANG: 'C',
    };
  }

  /** pg_autoctl with `args` as the server's user (through runuser, its environment kept, when we are root). */
  private autoctlCommand(args: readonly string[]): { file: string; argv: string[]; env: NodeJS.ProcessEnv } {
    const env = this.env();
    if (userInfo().uid !== 0) return { file: PG_AUTOCTL, argv: [...args], env };
    const assignments = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    return { file: 'runuser', argv: ['-u', 'postgres', '--', 'env', ...assignments, PG_AUTOCTL, ...args], env };
  }

  /** pg_autoctl as the server's user, in the foreground, its own process group, its output in <dir>/<name>.log. */
  private spawnKeeper(name: string, args: readonly string[]): Keeper {
    const logFile = join(this.dir, `${name}.log`);
    const offset = logOffset(logFile);
    const log = openSync(logFile, 'a');
    const { file, argv, env } = this.autoctlCommand(args);
    const proc = spawn(file, argv, { detached: true, stdio: ['ignore', log, log], env });
    closeSync(log);
    const exited = new Promise<string>((resolve) => {
      // Why it stopped is in its log (the run's folder may be gone when the error is read).
      proc.once('exit', (code, signal) =>
        resolve(
          `pg_autoctl for ${name} exited (${signal ?? `code ${code}`}); the end of its log:\n${lastLines(readFrom(logFile, offset), KEEPER_LOG_LINES)}`,
        ),
      );
      proc.once('error', (err) => resolve(`pg_autoctl for ${name} did not start: ${err.message}`));
    });
    return { proc, exited };
  }

  /** A pg_autoctl command to its end (as the server's user). */
  private async autoctl(args: readonly string[], timeoutMs: number): Promise<string> {
    const { file, argv, env } = this.autoctlCommand(args);
    const { stdout } = await run(file, argv, { env, timeout: timeoutMs });
    return stdout;
  }

  private createArgs(node: FormationNode): string[] {
    return [
      'create',
      'postgres',
      '--pgdata',
      node.dir,
      '--pgport',
      String(node.port),
      '--hostname',
      '127.0.0.1',
      '--name',
      node.name,
      '--auth',
      'trust',
      '--no-ssl',
      '--dbname',
      FORMATION_DATABASE,
      '--monitor',
      this.monitorUrl,
      '--run',
    ];
  }

  private async startMonitor(): Promise<void> {
    const dir = join(this.dir, 'monitor');
    this.monitorKeeper = this.spawnKeeper('monitor', [
      'create',
      'monitor',
      '--pgdata',
      dir,
      '--pgport',
      String(this.monitorPort),
      '--hostname',
      '127.0.0.1',
      '--auth',
      'trust',
      '--no-ssl',
      '--run',
    ]);
    await pollUntil(
      errorsAsNotYet(async () => {
        await this.onMonitor((c) => c.query('SELECT 1 FROM pgautofailover.formation LIMIT 1'));
        return done(true);
      }),
      {
        what: `the pg_auto_failover monitor on 127.0.0.1:${this.monitorPort}`,
        timeoutMs: FORMATION_START_TIMEOUT_MS,
        intervalMs: 200,
        stop: this.monitorKeeper.exited,
      },
    );
    const sets = Object.entries(FORMATION_TIMEOUTS).map(([k, v]) => `ALTER SYSTEM SET ${k} = '${v}'`);
    await this.onMonitor(async (c) => {
      for (const s of sets) await c.query(s);
      await c.query('SELECT pg_reload_conf()');
    }, 'postgres');
  }

  /** The first node's settings, and a restart so those that need one take effect before any standby copies them. */
  private async configureFirst(first: FormationNode, settings: Readonly<Record<string, string>>): Promise<void> {
    const all = { max_connections: '200', ...settings };
    await this.onNode(first, async (c) => {
      for (const [k, v] of Object.entries(all)) await c.query(`ALTER SYSTEM SET ${k} = '${v.replace(/'/g, "''")}'`);
    });
    // The keeper starts PostgreSQL again when it stops: a fast stop is a restart.
    await this.asOwner('pg_ctl', ['stop', '-D', first.dir, '-m', 'fast', '-w']);
    await pollUntil(
      errorsAsNotYet(async () => {
        const v = await this.onNode(first, (c) => c.query<{ max_connections: string }>('SHOW max_connections'));
        return v.rows[0]?.max_connections === all.max_connections ? done(true) : notYet('old settings');
      }),
      { what: `${first.name} restarted with its settings`, timeoutMs: FORMATION_START_TIMEOUT_MS, intervalMs: 200 },
    );
  }

  /** A base backup waits for a checkpoint, spread over minutes by default: ask for one now, again and again. */
  private async hurryBaseBackup<T>(primary: FormationNode, wait: () => Promise<T>): Promise<T> {
    let waiting = true;
    const nudging = (async () => {
      while (waiting) {
        await this.onNode(primary, (c) => c.query('CHECKPOINT')).catch(() => undefined);
        await sleep(CHECKPOINT_NUDGE_MS);
      }
    })();
    try {
      return await wait();
    } finally {
      waiting = false;
      await nudging;
    }
  }

  private async setKeeperTimeouts(): Promise<void> {
    for (const node of this.nodes) {
      await this.autoctl(
        [
          'config',
          'set',
          '--pgdata',
          node.dir,
          'timeout.network_partition_timeout',
          String(KEEPER_NETWORK_PARTITION_TIMEOUT_S),
        ],
        10_000,
      );
      await this.autoctl(['reload', '--pgdata', node.dir], 10_000).catch(() => undefined);
    }
  }

  private asOwner(cmd: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
    return runAsServerUser(join(this.binDir, cmd), args);
  }

  async onMonitor<T>(fn: (c: pg.Client) => Promise<T>, user = 'autoctl_node'): Promise<T> {
    return withClient({ host: '127.0.0.1', port: this.monitorPort, user, database: 'pg_auto_failover' }, fn);
  }

  async onNode<T>(node: FormationNode, fn: (c: pg.Client) => Promise<T>): Promise<T> {
    return withClient({ connectionString: this.nodeUrl(node) }, fn);
  }

  /** The monitor's view of every node. */
  async states(): Promise<NodeState[]> {
    const r = await this.onMonitor((c) =>
      c.query<{
        nodename: string;
        nodeport: number;
        goalstate: string;
        reportedstate: string;
        lsn: string;
        health: number;
      }>(
        `SELECT nodename, nodeport, goalstate::text, reportedstate::text, reportedlsn::text AS lsn, health
           FROM pgautofailover.node ORDER BY nodeid`,
      ),
    );
    return r.rows.map((row) => ({
      name: row.nodename,
      port: row.nodeport,
      goal: row.goalstate,
      reported: row.reportedstate,
      lsn: row.lsn,
      health: row.health,
    }));
  }

  /**
   * The node that takes writes now: the one the monitor holds a primary, by its goal and by what
   * it reported, or null (none, or a change of primary under way).
   */
  static writable(states: readonly NodeState[]): NodeState | null {
    const primaries = states.filter((s) => PRIMARY_STATES.has(s.goal) && PRIMARY_STATES.has(s.reported));
    return primaries.length === 1 ? (primaries[0] ?? null) : null;
  }

  /**
   * The monitor's last `limit` events, oldest first, one line each: what it decided and why. For
   * the message of a failover that did not happen in time.
   */
  async recentEvents(limit = 30): Promise<string[]> {
    const r = await this.onMonitor((c) =>
      c.query<{ at: string; nodename: string; reported: string; goal: string; description: string }>(
        `SELECT to_char(eventtime, 'HH24:MI:SS.MS') AS at, nodename, reportedstate::text AS reported,
                goalstate::text AS goal, description
           FROM (SELECT * FROM pgautofailover.event ORDER BY eventid DESC LIMIT $1) e ORDER BY eventid`,
        [limit],
      ),
    );
    return r.rows.map((e) => `${e.at} ${e.nodename} ${e.goal}/${e.reported}: ${e.description}`);
  }

  async primary(): Promise<FormationNode | null> {
    const w = LocalPgFormation.writable(await this.states());
    return w === null ? null : this.node(w.name);
  }

  private async waitForState(name: string, states: readonly string[], timeoutMs: number): Promise<void> {
    const keeper = this.keepers.get(name);
    await pollUntil(
      errorsAsNotYet(async () => {
        const s = (await this.states()).find((n) => n.name === name);
        if (s === undefined) return notYet('not registered');
        return states.includes(s.reported) && s.goal === s.reported ? done(true) : notYet(`${s.goal}/${s.reported}`);
      }),
      {
        what: `${name} ${states.join(' or ')} in the formation`,
        timeoutMs,
        intervalMs: 200,
        ...(keeper === undefined ? {} : { stop: keeper.exited }),
      },
    );
  }

  /** One primary and every other node a secondary, each where the monitor wants it. */
  async waitHealthy(timeoutMs: number = FORMATION_RECOVERY_TIMEOUT_MS): Promise<void> {
    await pollUntil(
      errorsAsNotYet(async () => {
        const s = await this.states();
        const settled = s.every((n) => n.goal === n.reported && n.health === 1);
        const primaries = s.filter((n) => n.reported === 'primary').length;
        const secondaries = s.filter((n) => n.reported === 'secondary').length;
        if (!(settled && primaries === 1 && secondaries === s.length - 1))
          return notYet(s.map((n) => `${n.name} ${n.goal}/${n.reported} health ${n.health}`).join(', '));
        // The monitor's view lags a kill by its health checks: every server must answer too,
        // and the primary must be streaming to every standby (a restarted one reconnects after).
        for (const node of this.nodes) await this.onNode(node, (c) => c.query('SELECT 1'));
        const primary = s.find((n) => n.reported === 'primary');
        const streaming =
          primary === undefined
            ? 0
            : Number(
                (
                  await this.onNode(this.node(primary.name), (c) =>
                    c.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_replication WHERE state = 'streaming'"),
                  )
                ).rows[0]?.n ?? 0,
              );
        return streaming === s.length - 1 ? done(true) : notYet(`${streaming} standbys streaming`);
      }),
      { what: 'the formation healthy (one primary streaming to the rest, secondary)', timeoutMs, intervalMs: 200 },
    );
  }

  /** SIGKILL of a node's keeper and its PostgreSQL at once (the process group, then the postmaster). */
  async kill(name: string): Promise<void> {
    const node = this.node(name);
    const keeper = this.keepers.get(name);
    this.keepers.delete(name);
    if (keeper?.proc.pid !== undefined) {
      signalIfAlive(-keeper.proc.pid, 'SIGKILL');
    }
    const pid = postmasterPidIn(node.dir);
    if (pid !== null) {
      signalIfAlive(pid, 'SIGKILL');
    }
    // Every server process of the node too (their working folder is the node's): a backend that
    // outlived its postmaster, or a frozen WAL sender, would keep the shared memory and stop the
    // node's next start.
    for (const p of processesIn(node.dir)) {
      signalIfAlive(p, 'SIGKILL');
    }
    if (keeper !== undefined) await keeper.exited;
  }

  /**
   * Starts a killed node's keeper again: it rejoins as a standby of whoever is primary now. The
   * dead postmaster's pid file goes first: the keeper's crash recovery before a pg_rewind reads
   * it and waits for ever on the dead pid (seen with pg_auto_failover 2.0). So does the killed
   * keeper's own pid file, once its pid is gone: a new keeper refuses to start while that pid
   * answers a signal, which a killed process not yet reaped (a zombie) still does (seen in a
   * chaos run: "An instance of pg_autoctl is already running", and the standby never came back).
   */
  async restart(name: string): Promise<void> {
    const node = this.node(name);
    if (this.keepers.has(name)) throw new Error(`${name} is running`);
    const pid = postmasterPidIn(node.dir);
    if (pid !== null && !alive(pid)) rmSync(join(node.dir, 'postmaster.pid'), { force: true });
    await this.clearKilledKeeperPid(node);
    this.keepers.set(name, this.spawnKeeper(name, ['run', '--pgdata', node.dir]));
  }

  /** Waits (bounded) until the pid in a stopped node's keeper pid file is dead or a zombie, then removes the file. */
  private async clearKilledKeeperPid(node: FormationNode): Promise<void> {
    const file = await this.keeperPidFile(node);
    if (file === null || !existsSync(file)) return;
    const pid = Number.parseInt(readFileSync(file, 'utf8').split('\n')[0] ?? '', 10);
    if (!Number.isInteger(pid) || pid <= 0) return;
    await pollUntil(
      async () => {
        if (!running(pid)) return done(true);
        // Still there: a keeper of this node that the kill missed is killed now (the file is this node's).
        if (commandLineOf(pid).includes('pg_autoctl')) signalIfAlive(pid, 'SIGKILL');
        return notYet(`pid ${pid} still running`);
      },
      { what: `the killed keeper of ${node.name} gone`, timeoutMs: KEEPER_GONE_TIMEOUT_MS, intervalMs: 50 },
    );
    rmSync(file, { force: true });
  }

  /** Where a node's keeper keeps its pid file, as pg_autoctl itself names it; null if it cannot say. */
  private async keeperPidFile(node: FormationNode): Promise<string | null> {
    let stdout: string;
    try {
      stdout = await this.autoctl(['show', 'file', '--pid', '--pgdata', node.dir], 10_000);
    } catch (err) {
      stdout = String((err as { stdout?: unknown }).stdout ?? '');
    }
    const line = stdout
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.endsWith('.pid'));
    return line ?? null;
  }

  /**
   * A planned switchover, to its end: the monitor's `perform_failover()` (what `pg_autoctl perform
   * switchover` calls), then until another node is the writable primary. The CLI's own wait is not
   * used: it failed in a chaos run while the switchover itself went through ("invalid input syntax
   * for type integer" listing the nodes, then no notification for its whole wait).
   */
  async switchover(timeoutMs: number = FORMATION_RECOVERY_TIMEOUT_MS): Promise<void> {
    const before = await this.primary();
    if (before === null) throw new Error('no primary to switch over from');
    await this.onMonitor((c) => c.query("SELECT pgautofailover.perform_failover('default', 0)"), 'postgres');
    await pollUntil(
      errorsAsNotYet(async () => {
        const now = await this.primary();
        return now !== null && now.name !== before.name ? done(true) : notYet(`primary ${now?.name ?? 'none'}`);
      }),
      { what: `another primary than ${before.name} after the switchover`, timeoutMs, intervalMs: 200 },
    );
  }

  /** The formation's number-sync-standbys (0: commits never wait for a standby). */
  async setNumberSyncStandbys(n: number): Promise<void> {
    await this.onMonitor((c) =>
      c.query('SELECT pgautofailover.set_formation_number_sync_standbys($1, $2)', ['default', n]),
    );
  }

  /** ALTER SYSTEM of one setting on every running node, and a reload. */
  async setOnEveryNode(name: string, value: string): Promise<void> {
    for (const node of this.nodes) {
      await pollUntil(
        errorsAsNotYet(async () => {
          await this.onNode(node, async (c) => {
            await c.query(`ALTER SYSTEM SET ${name} = '${value.replace(/'/g, "''")}'`);
            await c.query('SELECT pg_reload_conf()');
          });
          return done(true);
        }),
        { what: `${name} set on ${node.name}`, timeoutMs: FORMATION_RECOVERY_TIMEOUT_MS, intervalMs: 200 },
      );
    }
  }

  /**
   * SIGSTOP of the primary's WAL senders: the standbys receive nothing more, and fall behind by
   * whatever the primary commits meanwhile (an asynchronous standby's lag, made long on purpose).
   * A kill of the primary then takes what they did not send with it. Returns the thaw (SIGCONT),
   * for a primary that is not killed.
   */
  async freezeWalSenders(): Promise<{ pids: number[]; thaw: () => void }> {
    const primary = await this.primary();
    if (primary === null) throw new Error('no primary to hold the replication of');
    const r = await this.onNode(primary, (c) => c.query<{ pid: number }>('SELECT pid FROM pg_stat_replication'));
    const pids = r.rows.map((row) => row.pid);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    return {
      pids,
      thaw: () => {
        for (const pid of pids) {
          signalIfAlive(pid, 'SIGCONT');
        }
      },
    };
  }

  /** Every keeper and server killed (their processes, then any postmaster left). */
  async stop(): Promise<void> {
    for (const name of [...this.keepers.keys()]) await this.kill(name).catch(() => undefined);
    if (this.monitorKeeper?.proc.pid !== undefined) {
      signalIfAlive(-this.monitorKeeper.proc.pid, 'SIGKILL');
      await this.monitorKeeper.exited;
    }
    this.monitorKeeper = null;
    for (const dir of [...this.nodes.map((n) => n.dir), join(this.dir, 'monitor')]) {
      const pid = postmasterPidIn(dir);
      if (pid === null) continue;
      signalIfAlive(pid, 'SIGKILL');
    }
  }
}

/**
 * Kills whatever a formation under `dir` left running when its harness died without stopping it:
 * every pg_autoctl, runuser or postgres process naming the folder on its command line or working
 * in it, and the whole process group of each (a keeper's services rename themselves, and a
 * supervisor left alive starts its server again).
 */
export function killFormationLeftovers(dir: string): void {
  const groups = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      let cwd = '';
      try {
        cwd = readlinkSync(`/proc/${entry}/cwd`);
      } catch {
        // Not ours to read: the command line may still tell.
      }
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const program = argv[0] ?? '';
      const ours = /(^|\/)(pg_autoctl|runuser|postgres)$/.test(program) || program.startsWith('pg_autoctl');
      const inDir = cwd === dir || cwd.startsWith(`${dir}/`) || argv.some((a) => a.includes(dir));
      if (!ours || !inDir) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (Number.isInteger(pgid) && pgid > 1 && pgid !== process.pid) groups.add(pgid);
      process.kill(Number(entry), 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  for (const pgid of groups) {
    signalIfAlive(-pgid, 'SIGKILL');
  }
}

/** Pids of the processes whose working folder is `dir` (PostgreSQL's server processes run in their data folder). */
function processesIn(dir: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) === dir) out.push(Number(entry));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return out;
}

/** Sends `signal` to a pid (negative: a process group) that may be gone already. */
function signalIfAlive(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already.
  }
}

function commandLineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

/** Alive and not a zombie: a killed process its parent has not reaped yet still answers kill(pid, 0). */
function running(pid: number): boolean {
  if (!alive(pid)) return false;
  try {
    // /proc/<pid>/stat: "pid (comm) state ...", the command name may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The formation's folder, owned by the server's user when the harness runs as root. */
function mkdirOwned(dir: string): void {
  mkdirSync(dir, { recursive: true });
  if (userInfo().uid === 0) ownByServerUser(dir);
}

/** One short-lived harness session: connected, used, ended (an error event after a failure is not a crash). */
async function withClient<T>(config: pg.ClientConfig, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ ...config, connectionTimeoutMillis: 2_000, application_name: 'chaos-harness' });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => undefined);
  }
}
