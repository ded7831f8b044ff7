// Starts and controls a private redis-server from the local binary: used by `npm run services`
// when the configured Redis is down, by tests that must stop, pause or flush a server, and by
// the chaos harness. Never points at the shared instance.
// A start waits for the server's own log to say "Ready to accept connections" (something else
// answering on the port is not the server), fails at once when the server exits first, and on a
// port taken between choosing it and binding it ("Address already in use", its own port or a
// cluster node's bus port) throws PortInUseError: start() then tries other ports, a bounded
// number of times.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { pollUntil, WaitStoppedError } from './bounded-wait.ts';
import { freePort, PortInUseError, startOnFreePort } from './free-port.ts';
import { lastLines, logOffset, readFrom } from './log-tail.ts';

export interface LocalRedisOptions {
  port?: number;
  /** Where a port comes from when `port` is not given (default freePort; a test hands out a taken one). */
  choosePort?: () => Promise<number>;
  /** Data folder; AOF is written there when appendOnly is set. */
  dir: string;
  appendOnly?: boolean;
  /** Detach so the server outlives this process (`npm run services`), with a pid file. */
  daemonize?: boolean;
  extraArgs?: readonly string[];
  /** TLS only: the server listens with this certificate on `port` and on no plain port. */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

/** From spawn to "Ready to accept connections" in its log. */
export const REDIS_START_TIMEOUT_MS = 10_000;
/** Ports start() tries when the one it chose is taken before redis-server binds it. */
export const REDIS_START_ATTEMPTS_MAX = 5;
/** How often a start looks at the server's log. */
const START_POLL_MS = 20;
/**
 * What redis-server logs once it listens and serves (7.0: the line ends there; 7.2: "… tcp"), at
 * its default loglevel (notice): extraArgs must not raise it to warning.
 */
const READY_LINE = 'Ready to accept connections';
/** How much of the end of its log a failed start quotes. */
const LOG_TAIL_LINES = 8;
/** Bound on reading the rest of a detached server's stderr after it exited. */
const STDERR_DRAIN_MS = 1_000;

/** The log file of a server with these options: `--logfile` in extraArgs, or `<dir>/redis.log`. */
export function redisLogFile(opts: Pick<LocalRedisOptions, 'dir' | 'extraArgs'>): string {
  const extra = opts.extraArgs ?? [];
  const at = extra.lastIndexOf('--logfile');
  const given = at === -1 ? undefined : extra[at + 1];
  return given ?? join(opts.dir, 'redis.log');
}

export function redisServerArgs(opts: LocalRedisOptions & { port: number }): string[] {
  const listen =
    opts.tls === undefined
      ? ['--port', String(opts.port)]
      : [
          '--port',
          '0',
          '--tls-port',
          String(opts.port),
          '--tls-cert-file',
          opts.tls.certFile,
          '--tls-key-file',
          opts.tls.keyFile,
          '--tls-ca-cert-file',
          opts.tls.caFile,
          // Clients are not asked for certificates; they authenticate the server, not the reverse.
          '--tls-auth-clients',
          'no',
        ];
  return [
    ...listen,
    '--bind',
    '127.0.0.1',
    '--dir',
    opts.dir,
    '--save',
    '',
    '--appendonly',
    opts.appendOnly ? 'yes' : 'no',
    '--maxmemory-policy',
    'noeviction',
    // In the foreground even when it must outlive this process: its exit at start is then seen
    // (a daemonized server's parent exits at once, whatever the server does next).
    '--daemonize',
    'no',
    ...((opts.extraArgs ?? []).includes('--logfile') ? [] : ['--logfile', redisLogFile(opts)]),
    ...(opts.daemonize ? ['--pidfile', `${opts.dir}/redis.pid`] : []),
    ...(opts.extraArgs ?? []),
  ];
}

export class LocalRedis {
  private child: ChildProcess | null = null;
  /** How the current child ended when nobody asked it to (null while it runs, or after kill()). */
  private unexpectedExit: string | null = null;
  private constructor(
    readonly port: number,
    private readonly opts: LocalRedisOptions,
  ) {}

  get url(): string {
    return `${this.opts.tls === undefined ? 'redis' : 'rediss'}://127.0.0.1:${this.port}`;
  }

  /** The server's pid while it runs; undefined once it was killed or has exited. */
  get pid(): number | undefined {
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return undefined;
    return child.pid;
  }

  get logFile(): string {
    return redisLogFile(this.opts);
  }

  /** "exited with code 1", when the server ended without kill() (null while it runs). */
  get exitedUnexpectedly(): string | null {
    return this.unexpectedExit;
  }

  /**
   * Starts a foreground redis-server owned by this process on the given port, or on a free one:
   * when that one is taken before the server binds it, on another, REDIS_START_ATTEMPTS_MAX
   * ports in all.
   */
  static async start(opts: LocalRedisOptions): Promise<LocalRedis> {
    return startOnFreePort(
      'redis-server',
      opts.port,
      opts.choosePort ?? freePort,
      REDIS_START_ATTEMPTS_MAX,
      async (port) => {
        const server = new LocalRedis(port, { ...opts, daemonize: false });
        await server.spawnServer();
        return server;
      },
    );
  }

  /**
   * Starts a redis-server that outlives this process (`npm run services`) on the given port and
   * resolves with its pid once it serves; throws at once, with the end of its log, if it exits first.
   */
  static async startDetached(opts: LocalRedisOptions & { port: number }): Promise<number> {
    const server = new LocalRedis(opts.port, { ...opts, daemonize: true });
    await server.spawnServer({ detached: true });
    const child = server.child as ChildProcess;
    // Its own process group (detached), and its stderr (read until now) let go: nothing ties it
    // to this process any more. It logs to its log file.
    child.stderr?.destroy();
    child.unref();
    return child.pid as number;
  }

  private async spawnServer(how: { detached?: boolean } = {}): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true });
    const logFile = this.logFile;
    // The log is appended to by every start (a restart): this start's lines come after this offset.
    const offset = logOffset(logFile);
    const detached = how.detached === true;
    // What it says before its log is open (a configuration it refuses) goes to stderr: this
    // process's own, or for a detached server, read here for the error.
    const child = spawn('redis-server', redisServerArgs({ ...this.opts, port: this.port }), {
      detached,
      stdio: ['ignore', 'ignore', detached ? 'pipe' : 'inherit'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    this.child = child;
    this.unexpectedExit = null;
    const exited = new Promise<string>((resolve) => {
      child.once('error', (err) => resolve(`redis-server could not start: ${err.message}`));
      child.once('exit', (code, signal) => {
        const how = signal === null ? `exited with code ${code}` : `ended by ${signal}`;
        if (this.child === child) this.unexpectedExit = how;
        resolve(`redis-server ${how}`);
      });
    });
    const what = `redis-server on 127.0.0.1:${this.port} ready ("${READY_LINE}" in ${logFile})`;
    try {
      await pollUntil(
        async () => {
          const lines = readFrom(logFile, offset);
          if (lines.includes(READY_LINE)) return { done: true, value: undefined };
          return { done: false, seen: lines === '' ? 'nothing in its log yet' : lastLines(lines, 1) };
        },
        { what, timeoutMs: REDIS_START_TIMEOUT_MS, intervalMs: START_POLL_MS, stop: exited },
      );
    } catch (err) {
      // A server that did not get ready in time is not left behind.
      if (this.pid !== undefined) await this.kill();
      // After an exit its stderr may still hold its last words: they come before the pipe closes.
      const pipe = child.stderr;
      if (pipe !== null && !pipe.closed) await Promise.race([once(pipe, 'close'), sleep(STDERR_DRAIN_MS)]);
      this.child = null;
      const lines = readFrom(logFile, offset);
      const said = stderr.trim() === '' ? '' : `; its stderr:\n${lastLines(stderr, LOG_TAIL_LINES)}`;
      const tail = `${said}; the end of ${logFile}:\n${lastLines(lines, LOG_TAIL_LINES)}`;
      const failed = /Failed listening on port (\d+) \((\w+)\)/.exec(lines);
      if (err instanceof WaitStoppedError && failed !== null && /Address already in use/.test(lines)) {
        const kind = failed[2]?.toLowerCase() === 'cluster' ? 'cluster bus port' : 'port';
        throw new PortInUseError(
          `redis-server exited at start: its ${kind} ${failed[1]} is in use (Address already in use)${tail}`,
          this.port,
        );
      }
      throw new Error(`${err instanceof Error ? err.message : String(err)}${tail}`);
    }
  }

  /** SIGSTOP: the server keeps its sockets but answers nothing (a frozen or partitioned host). */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** SIGKILL, and wait for the process to be gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null) return;
    // Asked for: not an unexpected exit.
    this.child = null;
    this.unexpectedExit = null;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  }

  /** Kill and start again on the same port; without AOF every key is gone. */
  async restart(): Promise<void> {
    await this.kill();
    await this.spawnServer();
  }

  async stop(): Promise<void> {
    await this.kill();
  }

  /** A new ioredis client to this server. */
  client(): Redis {
    const client = new Redis(this.port, '127.0.0.1', { maxRetriesPerRequest: null, lazyConnect: false });
    // Errors while the server is stopped on purpose are expected; callers see failed commands.
    client.on('error', () => undefined);
    return client;
  }
}
