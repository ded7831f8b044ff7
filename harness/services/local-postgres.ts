// Creates and controls a private PostgreSQL cluster from the local binaries (initdb, pg_ctl):
// used by `npm run services` when the configured server is down, by tests that stop it, and
// by the chaos harness. PostgreSQL refuses to run as root, so as root the cluster belongs to
// the `postgres` system user and the binaries run through runuser.
// A start is `pg_ctl start -w`, which waits at most POSTGRES_START_TIMEOUT_S and returns at once
// when the postmaster exits; when it exited because its port was taken between choosing and
// binding it ("Address already in use" in server.log), the server starts again on another port,
// a bounded number of times.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, PortInUseError, startOnFreePort } from './free-port.ts';
import { lastLines, logOffset, readFrom } from './log-tail.ts';

const run = promisify(execFile);

export const POSTGRES_START_TIMEOUT_S = 30;
/** Ports start() tries when the one it chose is taken before the server binds it. */
export const POSTGRES_START_ATTEMPTS_MAX = 5;
/** How much of the end of server.log a failed start quotes. */
const LOG_TAIL_LINES = 8;

/** initdb and the server insist on a data folder only its owner can enter. */
const CLUSTER_DIR_MODE = 0o700;

/** The folder holding initdb and pg_ctl, newest major version first. */
export function postgresBinDir(): string | null {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return null;
  const majors = readdirSync(base)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(base, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? null : join(base, majors[0], 'bin');
}

export interface LocalPostgresOptions {
  /** Cluster folder (created by initdb when empty). */
  dir: string;
  port?: number;
  /** Where a port comes from when `port` is not given (default freePort; a test hands out a taken one). */
  choosePort?: () => Promise<number>;
  /** fsync off for throwaway clusters (tests, chaos): fast, and safe unless the OS crashes. */
  fsync?: boolean;
  /** TLS on (ssl=on): the files are copied into the cluster folder, owned by the server's user. */
  ssl?: { certFile: string; keyFile: string };
  /** The superuser's password, set by initdb (tests of password authentication). */
  superuserPassword?: string;
  /** Lines replacing pg_hba.conf (default: initdb's trust for everyone). */
  hba?: readonly string[];
  /** Further server settings (`-c name=value`), after and over the defaults above. */
  settings?: Readonly<Record<string, string>>;
}

export class LocalPostgres {
  private constructor(
    readonly port: number,
    private readonly opts: LocalPostgresOptions,
    private readonly binDir: string,
  ) {}

  get url(): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /**
   * Creates the cluster (when its folder is empty) and starts it on the given port, or on a free
   * one: when that one is taken before the server binds it, on another, POSTGRES_START_ATTEMPTS_MAX
   * ports in all.
   */
  static async start(opts: LocalPostgresOptions): Promise<LocalPostgres> {
    const binDir = postgresBinDir();
    if (binDir === null) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql/*/bin');
    return startOnFreePort(
      'PostgreSQL',
      opts.port,
      opts.choosePort ?? freePort,
      POSTGRES_START_ATTEMPTS_MAX,
      async (port, attempt) => {
        const pg = new LocalPostgres(port, opts, binDir);
        if (attempt === 0) await pg.init();
        await pg.startServer();
        return pg;
      },
    );
  }

  private asOwner(cmd: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
    return runAsServerUser(join(this.binDir, cmd), args);
  }

  private async init(): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true });
    if (userInfo().uid === 0) {
      ownByServerUser(this.opts.dir);
      chmodSync(this.opts.dir, CLUSTER_DIR_MODE);
      await this.assertOwnerReaches(this.opts.dir);
    }
    if (existsSync(join(this.opts.dir, 'PG_VERSION'))) return;
    // initdb wants an empty folder: the password file goes beside it, for the moment of initdb.
    const pwfile =
      this.opts.superuserPassword === undefined
        ? []
        : ['--pwfile', writeOwned(`${this.opts.dir}.initdb-password`, this.opts.superuserPassword)];
    try {
      await this.asOwner('initdb', [
        '-D',
        this.opts.dir,
        '-U',
        'postgres',
        '--auth=trust',
        '-E',
        'UTF8',
        '--no-sync',
        '--locale=C',
        ...pwfile,
      ]);
    } finally {
      if (pwfile[1] !== undefined) rmSync(pwfile[1], { force: true });
    }
    if (this.opts.hba !== undefined) this.ownedFile('pg_hba.conf', `${this.opts.hba.join('\n')}\n`);
    if (this.opts.ssl !== undefined) {
      this.ownedFile('server.crt', readFileSync(this.opts.ssl.certFile));
      this.ownedFile('server.key', readFileSync(this.opts.ssl.keyFile));
    }
  }

  /** Writes a file into the cluster folder, readable by the server's user only. */
  private ownedFile(name: string, content: string | Buffer): string {
    return writeOwned(join(this.opts.dir, name), content);
  }

  /** As root: one clear error when the postgres user cannot enter the folder (a root-only parent). */
  private async assertOwnerReaches(dir: string): Promise<void> {
    try {
      await run('runuser', ['-u', 'postgres', '--', 'test', '-r', dir, '-a', '-w', dir, '-a', '-x', dir]);
    } catch {
      throw new Error(
        `PostgreSQL's data folder ${dir} cannot be entered by the postgres user, which runs the server when ` +
          'started as root: every folder above it must be traversable by other users (chmod o+x), or use a folder that is',
      );
    }
  }

  async startServer(): Promise<void> {
    const options = [
      `-p ${this.port}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${this.opts.dir}`,
      '-c max_connections=200',
      `-c fsync=${this.opts.fsync === false ? 'off' : 'on'}`,
      `-c synchronous_commit=${this.opts.fsync === false ? 'off' : 'on'}`,
      ...(this.opts.ssl === undefined
        ? []
        : ['-c ssl=on', '-c ssl_cert_file=server.crt', '-c ssl_key_file=server.key']),
      ...Object.entries(this.opts.settings ?? {}).map(([name, value]) => `-c ${name}=${value}`),
    ].join(' ');
    const logFile = join(this.opts.dir, 'server.log');
    // pg_ctl appends: this start's lines come after this offset.
    const offset = logOffset(logFile);
    try {
      await this.asOwner('pg_ctl', [
        'start',
        '-D',
        this.opts.dir,
        '-w',
        '-t',
        String(POSTGRES_START_TIMEOUT_S),
        '-l',
        logFile,
        '-o',
        options,
      ]);
    } catch (err) {
      const lines = readFrom(logFile, offset);
      const said = (err as { stderr?: string }).stderr?.trim() || (err instanceof Error ? err.message : String(err));
      const tail = `; the end of ${logFile}:\n${lastLines(lines, LOG_TAIL_LINES)}`;
      if (/Address already in use/.test(lines)) {
        throw new PortInUseError(
          `PostgreSQL exited at start: its port ${this.port} is in use (Address already in use)${tail}`,
          this.port,
        );
      }
      throw new Error(`PostgreSQL on port ${this.port} did not start: ${said}${tail}`);
    }
  }

  /** The postmaster's pid, from postmaster.pid. */
  postmasterPid(): number | null {
    return postmasterPidIn(this.opts.dir);
  }

  /** Immediate shutdown: like a crash, every backend dies at once; recovery replays WAL. */
  async stop(mode: 'immediate' | 'fast' = 'fast'): Promise<void> {
    if (this.postmasterPid() === null) return;
    await this.asOwner('pg_ctl', ['stop', '-D', this.opts.dir, '-m', mode, '-w']).catch(() => undefined);
  }

  async restart(): Promise<void> {
    await this.stop('immediate');
    await this.startServer();
  }
}

/** Runs a PostgreSQL binary as the server's user: through runuser as the postgres user when we are root. */
export function runAsServerUser(file: string, args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  if (userInfo().uid === 0) return run('runuser', ['-u', 'postgres', '--', file, ...args]);
  return run(file, [...args]);
}

/** The postmaster's pid, from `<dir>/postmaster.pid` (null when there is none). */
export function postmasterPidIn(dir: string): number | null {
  const file = join(dir, 'postmaster.pid');
  if (!existsSync(file)) return null;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** Hands a file or folder to the postgres user (as root, where the server runs as that user). */
export function ownByServerUser(path: string): void {
  chownSync(path, uidOf('postgres'), gidOf('postgres'));
}

/** A file readable by the server's user only (as root, the postgres user owns it). */
function writeOwned(path: string, content: string | Buffer): string {
  writeFileSync(path, content, { mode: 0o600 });
  if (userInfo().uid === 0) ownByServerUser(path);
  return path;
}

function idOf(flag: '-u' | '-g', user: string): number {
  // `id` asks NSS, which reading /etc/passwd would not.
  try {
    return Number(execFileSync('id', [flag, user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
  } catch {
    throw new Error(
      `PostgreSQL refuses to run as root and there is no \`${user}\` user to run it as: install PostgreSQL's ` +
        'package (it creates the user) or run as another user',
    );
  }
}

function uidOf(user: string): number {
  return idOf('-u', user);
}

function gidOf(user: string): number {
  return idOf('-g', user);
}
