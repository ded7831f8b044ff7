// Starts a private PgBouncer (Debian's `pgbouncer`, installed by .ci/prerequisites) in
// transaction mode in front of a PostgreSQL server: used by the PgBouncer tests and by
// `npm run chaos -- --pgbouncer`. Its configuration, log and pid file live in a temporary folder
// of its own; it listens on a free loopback port and never touches another PgBouncer.
// Authentication is `trust` with the user looked up in the server (auth_query as `authUser`), so
// any role of the server may log in under its own name without an auth_file to keep in step;
// the server side must trust loopback for those roles (the shared test server and the harness's
// own clusters do). PgBouncer refuses to run as root: as root it switches to the `postgres` user.
// A start waits for its own log to say it listens on its port (something else answering there is
// not this PgBouncer), fails at once when it exits first, and when its port was taken between
// choosing and binding it ("Address already in use") starts again on another, a bounded number
// of times.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pollUntil, WaitStoppedError } from './bounded-wait.ts';
import { freePort, PortInUseError, startOnFreePort } from './free-port.ts';
import { lastLines, readFrom } from './log-tail.ts';

/** Where Debian's package puts the binary (.ci/prerequisites installs it). */
export const PGBOUNCER_BINARY = '/usr/sbin/pgbouncer';
/** From spawn to "listening on 127.0.0.1:<port>" in its log. */
export const PGBOUNCER_START_TIMEOUT_MS = 10_000;
/** Ports start() tries when the one it chose is taken before PgBouncer binds it. */
export const PGBOUNCER_START_ATTEMPTS_MAX = 5;
/** How often a start looks at its log. */
const START_POLL_MS = 20;
const LOG_TAIL_LINES = 8;
/** Server connections per user and database: a transaction-mode pool serves many clients with few. */
export const PGBOUNCER_POOL_SIZE = 20;
/** Client connections at most: workers' pools, probes, the harness, with room to spare. */
export const PGBOUNCER_MAX_CLIENT_CONN = 1_000;
/** The user a root process hands PgBouncer to (it refuses root); the PostgreSQL package creates it. */
const UNPRIVILEGED_USER = 'postgres';
/** rwxr-xr-x: the unprivileged user must be able to read its configuration and write its log. */
const FOLDER_MODE = 0o755;

export interface LocalPgBouncerOptions {
  /** The PostgreSQL server it pools for. */
  serverHost: string;
  serverPort: number;
  /** The role PgBouncer logs in as to look users up (auth_query): a superuser, trusted on loopback. */
  authUser?: string;
  port?: number;
  /** Where a port comes from when `port` is not given (default freePort; a test hands out a taken one). */
  choosePort?: () => Promise<number>;
  /** `transaction` (the default, what production runs) or `session`. */
  poolMode?: 'transaction' | 'session';
  /** Further `[pgbouncer]` settings, after and over the defaults. */
  settings?: Readonly<Record<string, string>>;
  /**
   * A production file under test instead of the private defaults: its `[databases]` lines and
   * `[pgbouncer]` settings, of which only the listening address and port, the log and pid files
   * and the Unix socket are the instance's own (serverHost, serverPort and authUser then unused).
   */
  config?: { databases: readonly string[]; settings: Readonly<Record<string, string>> };
}

function authUserOf(opts: LocalPgBouncerOptions): string {
  return opts.authUser ?? 'postgres';
}

/** The pgbouncer.ini of a private instance (exported for a test of its content). */
export function pgbouncerIni(opts: LocalPgBouncerOptions & { port: number; dir: string }): string {
  const own = {
    listen_addr: '127.0.0.1',
    listen_port: String(opts.port),
    // No Unix socket: two instances would fight over /tmp/.s.PGSQL.<port>.
    unix_socket_dir: '',
    logfile: join(opts.dir, 'pgbouncer.log'),
    pidfile: join(opts.dir, 'pgbouncer.pid'),
  };
  if (opts.config !== undefined) {
    return iniText(opts.config.databases, { ...opts.config.settings, ...own });
  }
  const settings: Record<string, string> = {
    ...own,
    auth_type: 'trust',
    auth_user: authUserOf(opts),
    // The admin console (database `pgbouncer`), for RECONNECT.
    admin_users: authUserOf(opts),
    auth_query: 'SELECT usename, passwd FROM pg_shadow WHERE usename = $1',
    pool_mode: opts.poolMode ?? 'transaction',
    default_pool_size: String(PGBOUNCER_POOL_SIZE),
    max_client_conn: String(PGBOUNCER_MAX_CLIENT_CONN),
    // Nothing is ignored: a start-up parameter PgBouncer does not know is refused, as by default.
    ignore_startup_parameters: '',
    log_connections: '0',
    log_disconnections: '0',
    ...opts.settings,
  };
  return iniText([`* = host=${opts.serverHost} port=${opts.serverPort}`], settings);
}

function iniText(databases: readonly string[], settings: Readonly<Record<string, string>>): string {
  return [
    '[databases]',
    ...databases,
    '',
    '[pgbouncer]',
    ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
    '',
  ].join('\n');
}

function uidGid(user: string): { uid: number; gid: number } {
  return {
    uid: Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim()),
  };
}

export class LocalPgBouncer {
  private child: ChildProcess | null = null;
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly adminUser: string,
  ) {}

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get logFile(): string {
    return join(this.dir, 'pgbouncer.log');
  }

  /** `databaseUrl` with its host and port replaced by this PgBouncer's (user, password, database kept). */
  urlFor(databaseUrl: string): string {
    const u = new URL(databaseUrl);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  /** The last lines of its log, for an error message. */
  logTail(lines = 20): string {
    if (!existsSync(this.logFile)) return '(no log)';
    return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  }

  /**
   * Starts a private PgBouncer on the given port, or on a free one: when that one is taken before
   * PgBouncer binds it, on another, PGBOUNCER_START_ATTEMPTS_MAX ports in all.
   */
  static async start(opts: LocalPgBouncerOptions): Promise<LocalPgBouncer> {
    if (!existsSync(PGBOUNCER_BINARY)) {
      throw new Error(`${PGBOUNCER_BINARY} is missing; run: sudo apt-get install -y pgbouncer (or .ci/prerequisites)`);
    }
    return startOnFreePort('pgbouncer', opts.port, opts.choosePort ?? freePort, PGBOUNCER_START_ATTEMPTS_MAX, (port) =>
      LocalPgBouncer.startOn(port, opts),
    );
  }

  /** One start on `port`: the PgBouncer; PortInUseError when its port was in use. */
  private static async startOn(port: number, opts: LocalPgBouncerOptions): Promise<LocalPgBouncer> {
    const dir = mkdtempSync(join(tmpdir(), 'ft-pgbouncer-'));
    chmodSync(dir, FOLDER_MODE);
    const ini = join(dir, 'pgbouncer.ini');
    writeFileSync(ini, pgbouncerIni({ ...opts, port, dir }), { mode: 0o644 });
    const asRoot = userInfo().uid === 0;
    if (asRoot) {
      const { uid, gid } = uidGid(UNPRIVILEGED_USER);
      chownSync(dir, uid, gid);
    }
    const bouncer = new LocalPgBouncer(port, dir, authUserOf(opts));
    // In the foreground (no -d), so the child is PgBouncer itself and dies with a kill of its pid.
    const child = spawn(PGBOUNCER_BINARY, [...(asRoot ? ['-u', UNPRIVILEGED_USER] : []), ini], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    bouncer.child = child;
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<string>((resolve) => {
      child.once('error', (err) => resolve(`pgbouncer could not start: ${err.message}`));
      child.once('exit', (code, signal) =>
        resolve(`pgbouncer ${signal === null ? `exited with code ${code}` : `ended by ${signal}`}`),
      );
    });
    const listening = `listening on 127.0.0.1:${port}`;
    try {
      await pollUntil(
        async () => {
          const log = readFrom(bouncer.logFile, 0);
          if (log.includes(listening)) return { done: true, value: undefined };
          return { done: false, seen: log === '' ? 'nothing in its log yet' : lastLines(log, 1) };
        },
        {
          what: `pgbouncer on 127.0.0.1:${port} ready ("${listening}" in ${bouncer.logFile})`,
          timeoutMs: PGBOUNCER_START_TIMEOUT_MS,
          intervalMs: START_POLL_MS,
          stop: exited,
        },
      );
    } catch (err) {
      // Its log has every line (stderr may lag behind the exit); it goes with the folder in stop().
      const log = readFrom(bouncer.logFile, 0);
      const tail = `; its log:\n${lastLines(log || stderr, LOG_TAIL_LINES)}`;
      const said = `${stderr}\n${log}`;
      await bouncer.stop();
      if (err instanceof WaitStoppedError && /Address already in use/.test(said)) {
        throw new PortInUseError(
          `pgbouncer exited at start: its port ${port} is in use (Address already in use)${tail}`,
          port,
        );
      }
      throw new Error(`${err instanceof Error ? err.message : String(err)}${tail}`);
    }
    child.removeAllListeners('exit');
    child.removeAllListeners('error');
    return bouncer;
  }

  /**
   * RECONNECT on the admin console: every server connection is closed once its client lets go,
   * and the next ones start afresh, with the roles' current defaults (what an operator does after
   * changing them: connections opened before keep the old session settings).
   */
  async reconnect(): Promise<void> {
    const admin = new pg.Client({ host: '127.0.0.1', port: this.port, user: this.adminUser, database: 'pgbouncer' });
    admin.on('error', () => undefined);
    await admin.connect();
    try {
      await admin.query('RECONNECT');
    } finally {
      await admin.end().catch(() => undefined);
    }
  }

  /** SIGINT (PgBouncer's immediate shutdown), SIGKILL if it lingers; then its folder goes, its log first copied to `keepLogAs`. */
  async stop(keepLogAs?: string): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), PGBOUNCER_START_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    if (keepLogAs !== undefined && existsSync(this.logFile)) copyFileSync(this.logFile, keepLogAs);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
