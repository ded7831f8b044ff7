// Starts and controls a private redis-server from the local binary: used by `npm run services`
// when the configured Redis is down, by tests that must stop, pause or flush a server, and by
// the chaos harness. Never points at the shared instance.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { Redis } from 'ioredis';
import { freePort, waitForPort } from './free-port.ts';

export interface LocalRedisOptions {
  port?: number;
  /** Where a port comes from when `port` is not given (default freePort; a test hands out a taken one). */
  choosePort?: () => Promise<number>;
  /** Data folder; AOF is written there when appendOnly is set. */
  dir: string;
  appendOnly?: boolean;
  /** Detach so the server outlives this process (`npm run services`). */
  daemonize?: boolean;
  extraArgs?: readonly string[];
  /** TLS only: the server listens with this certificate on `port` and on no plain port. */
  tls?: { certFile: string; keyFile: string; caFile: string };
}

export const REDIS_START_TIMEOUT_MS = 10_000;

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
    '--daemonize',
    opts.daemonize ? 'yes' : 'no',
    ...(opts.daemonize ? ['--logfile', `${opts.dir}/redis.log`, '--pidfile', `${opts.dir}/redis.pid`] : []),
    ...(opts.extraArgs ?? []),
  ];
}

export class LocalRedis {
  private child: ChildProcess | null = null;
  private constructor(
    readonly port: number,
    private readonly opts: LocalRedisOptions,
  ) {}

  get url(): string {
    return `${this.opts.tls === undefined ? 'redis' : 'rediss'}://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts a foreground redis-server owned by this process on a free (or the given) port. */
  static async start(opts: LocalRedisOptions): Promise<LocalRedis> {
    const port = opts.port ?? (await (opts.choosePort ?? freePort)());
    const server = new LocalRedis(port, { ...opts, daemonize: false });
    await server.spawnServer();
    return server;
  }

  private async spawnServer(): Promise<void> {
    mkdirSync(this.opts.dir, { recursive: true });
    const child = spawn('redis-server', redisServerArgs({ ...this.opts, port: this.port }), {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    this.child = child;
    await Promise.race([
      waitForPort('127.0.0.1', this.port, REDIS_START_TIMEOUT_MS),
      new Promise<never>((_, reject) => {
        child.once('error', (err) => reject(new Error(`redis-server could not start: ${err.message}`)));
        child.once('exit', (code) => reject(new Error(`redis-server exited with code ${code} during start`)));
      }),
    ]);
    child.removeAllListeners('exit');
    child.removeAllListeners('error');
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
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
    this.child = null;
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
