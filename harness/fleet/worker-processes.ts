// Starts and controls real worker processes from outside, as an operator or an orchestrator
// would: used by the demo, the chaos harness and the tests. Each process gets its own
// environment (URLs, queue, lock TTL) and its log goes to a file. Its HTTP server listens on
// METRICS_PORT=0, a port the kernel picks when the worker binds it, and the worker reports that
// port over an IPC channel: a port picked here in advance could be taken by another process in
// the seconds before the worker binds it, and the worker would stop at start. The entry is the
// TypeScript source (run as a bundle of the sources: source-bundle.ts) or the compiled
// JavaScript of the production image (plain node), chosen by WORKER_ENTRY (Config.workerEntry).
import { type ChildProcess, spawn } from 'node:child_process';
import {
  closeSync,
  createWriteStream,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readSync,
  type WriteStream,
} from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';
import { listeningPortOf } from '../../src/ops/ops-server.ts';
import { notYet, done as pollDone, pollUntil, WaitStoppedError } from '../services/bounded-wait.ts';
import { bundledEntry } from './source-bundle.ts';

/** The worker's TypeScript source: the default entry (the default of WORKER_ENTRY). */
export const WORKER_SOURCE_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'worker.ts');
/** How long a SIGTERMed worker gets before SIGKILL in stopAll(). */
export const WORKER_STOP_GRACE_MS = 10_000;
/** Poll interval and per-request bound of waitUntilReady(). */
export const READY_POLL_INTERVAL_MS = 200;
export const READY_REQUEST_TIMEOUT_MS = 2_000;
/** How much of the end of a worker's log a start-up failure quotes. */
export const LOG_TAIL_BYTES = 2_000;
/** What a check that answered "not yet" saw (nothing worth quoting). */
const NOT_YET = 'not yet';

/** node's arguments for an entry: a .ts source as the bundle of its sources, a .js file as is. */
export function nodeArgsFor(entry: string): string[] {
  if (!existsSync(entry)) {
    throw new Error(`worker entry ${entry} does not exist${entry.endsWith('.js') ? ' (run npm run build first)' : ''}`);
  }
  if (entry.endsWith('.js')) return [entry];
  return [bundledEntry(entry)];
}

export interface WorkerProcessOptions {
  /** Environment of the worker (merged over this process's). */
  env: Record<string, string>;
  /** The entry file (.ts or .js); default the worker's source. The chaos harness runs a naive variant. */
  entry?: string;
  /** Folder for the per-worker log files. */
  logDir: string;
  /** Node options before the entry, e.g. `--cpu-prof` (which NODE_OPTIONS does not accept). */
  nodeArgs?: readonly string[];
  /**
   * The runtime flags the process starts with, before nodeArgs; default WORKER_NODE_FLAGS, as
   * every launcher of the worker sets them. The bench's peer (Graphile Worker) runs with none.
   */
  runtimeFlags?: readonly string[];
}

export interface WorkerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class WorkerProcess {
  private child: ChildProcess | null = null;
  private log: WriteStream | null = null;
  private starts = 0;
  private frozen = false;
  private port: number | null = null;

  /** A worker process (not started). */
  constructor(
    readonly index: number,
    private readonly options: WorkerProcessOptions,
  ) {}

  /** The port of its /healthz, /readyz and /metrics as the running process reported it; null before. */
  get metricsPort(): number | null {
    return this.port;
  }

  /** Where this worker's stdout and stderr go. */
  get logFile(): string {
    return join(this.options.logDir, `worker-${this.index}.log`);
  }

  /** http://127.0.0.1:<metricsPort><path>; throws before the process has reported its port. */
  url(path: '/healthz' | '/readyz' | '/metrics'): string {
    if (this.port === null)
      throw new Error(`worker ${this.index} has not reported its HTTP port yet (wait for waitUntilReady())`);
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Its /readyz status now: 0 when it does not answer or has not reported its port yet. */
  async readyStatus(): Promise<number> {
    if (this.port === null) return 0;
    return fetch(this.url('/readyz'), { signal: AbortSignal.timeout(READY_REQUEST_TIMEOUT_MS) }).then(
      (r) => r.status,
      () => 0,
    );
  }

  /** Resolves once /readyz answers 200; rejects, quoting the end of its log, if the process exits or timeoutMs passes first. */
  async waitUntilReady(timeoutMs: number): Promise<void> {
    let status = 0;
    await pollWhileRunning(
      [this],
      timeoutMs,
      async () => {
        status = await this.readyStatus();
        return status === 200 ? true : undefined;
      },
      async () =>
        this.withLogTail(
          `worker ${this.index} not ready after ${timeoutMs} ms (${this.describe()}, last /readyz status ${status})`,
        ),
    );
  }

  /** Resolves with its HTTP port once the process has reported it; rejects if it exits or timeoutMs passes first. */
  waitForPort(timeoutMs: number): Promise<number> {
    return pollWhileRunning(
      [this],
      timeoutMs,
      async () => this.port ?? undefined,
      async () => this.withLogTail(`worker ${this.index} reported no HTTP port within ${timeoutMs} ms`),
    );
  }

  /** Throws, with how it ended and the end of its log, when the process has exited. */
  assertRunning(): void {
    if (this.running) return;
    throw new Error(this.withLogTail(`worker ${this.index} ${this.describe()}`));
  }

  /** `message`, followed by the end of its log. */
  withLogTail(message: string): string {
    return `${message}; the end of ${this.logFile}:\n${this.logTail()}`;
  }

  /** "running, HTTP port 41234", "running, no HTTP port reported yet", "exited with code 1", … */
  describe(): string {
    const child = this.child;
    if (child === null) return 'not started';
    if (child.exitCode !== null) return `exited with code ${child.exitCode}`;
    if (child.signalCode !== null) return `ended by ${child.signalCode}`;
    return `running${this.frozen ? ' (frozen)' : ''}, ${this.port === null ? 'no HTTP port reported yet' : `HTTP port ${this.port}`}`;
  }

  /** The last LOG_TAIL_BYTES of its log file (what is written so far); empty when there is none. */
  logTail(bytes = LOG_TAIL_BYTES): string {
    if (!existsSync(this.logFile)) return '';
    const fd = openSync(this.logFile, 'r');
    try {
      const size = fstatSync(fd).size;
      const length = Math.min(size, bytes);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      const text = buffer.toString('utf8');
      // From the first whole line on, unless the whole file fitted.
      return length < size ? text.slice(text.indexOf('\n') + 1) : text;
    } finally {
      closeSync(fd);
    }
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  get isFrozen(): boolean {
    return this.frozen;
  }

  /**
   * A promise that resolves when the process now running exits (at once when none runs), with
   * how it ended and the end of its log; dispose() lets go of the process.
   */
  watchExit(): { exited: Promise<string>; dispose: () => void } {
    const child = this.child;
    const ended = () => this.withLogTail(`worker ${this.index} ${this.describe()}`);
    if (child === null || !this.running) return { exited: Promise.resolve(ended()), dispose: () => undefined };
    let onExit: (() => void) | null = null;
    const exited = new Promise<string>((resolve) => {
      onExit = () => resolve(ended());
      child.once('exit', onExit);
    });
    return {
      exited,
      dispose: () => {
        if (onExit !== null) child.removeListener('exit', onExit);
      },
    };
  }

  start(): void {
    if (this.running) return;
    mkdirSync(this.options.logDir, { recursive: true });
    this.starts += 1;
    this.log = createWriteStream(this.logFile, { flags: 'a' });
    const args = [
      ...(this.options.runtimeFlags ?? WORKER_NODE_FLAGS),
      ...(this.options.nodeArgs ?? []),
      ...nodeArgsFor(this.options.entry ?? WORKER_SOURCE_ENTRY),
    ];
    // METRICS_PORT=0 and an IPC channel: the worker binds a free port and reports it.
    const child = spawn(process.execPath, args, {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...this.options.env, METRICS_PORT: '0', METRICS_HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.stdout?.pipe(this.log, { end: false });
    child.stderr?.pipe(this.log, { end: false });
    child.on('message', (message) => {
      const port = listeningPortOf(message);
      if (port !== null && this.child === child) this.port = port;
    });
    this.child = child;
    this.port = null;
    this.frozen = false;
  }

  /** SIGSTOP: the process keeps its sockets and locks but runs nothing (a GC pause, a frozen VM). */
  freeze(): void {
    if (!this.running) return;
    this.child?.kill('SIGSTOP');
    this.frozen = true;
  }

  thaw(): void {
    if (!this.running) return;
    this.child?.kill('SIGCONT');
    this.frozen = false;
  }

  /** SIGKILL: the process dies mid-job; its jobs stall and BullMQ re-queues them. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null || !this.running) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
    this.frozen = false;
    this.log?.end();
    this.log = null;
  }

  /**
   * SIGTERM (after thawing), SIGKILL if it has not exited within the grace period. Resolves with
   * how the process ended (null when it was not started).
   */
  async stop(graceMs = WORKER_STOP_GRACE_MS): Promise<WorkerExit | null> {
    const child = this.child;
    if (child === null) return null;
    let exit: WorkerExit = { code: child.exitCode, signal: child.signalCode };
    if (this.running) {
      const exited = new Promise<WorkerExit>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      exit = await exited;
      clearTimeout(timer);
    }
    this.log?.end();
    this.child = null;
    return exit;
  }
}

export class WorkerFleet {
  private constructor(readonly workers: WorkerProcess[]) {}

  /** `count` workers, numbered from 1 (not started). */
  static create(count: number, options: WorkerProcessOptions): WorkerFleet {
    return new WorkerFleet(Array.from({ length: count }, (_, i) => new WorkerProcess(i + 1, options)));
  }

  startAll(): void {
    for (const w of this.workers) w.start();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}

/**
 * Calls `check` every READY_POLL_INTERVAL_MS until it answers a value, and answers that. Throws at
 * once, with the end of its log, when one of the workers exits (even while `check` is waiting for
 * an answer); throws `timedOut()`'s message, followed by what the last check saw when it did not
 * answer, once timeoutMs has passed (a check that never answers included); 'interrupted' once
 * `signal` aborts.
 */
async function pollWhileRunning<T>(
  workers: readonly WorkerProcess[],
  timeoutMs: number,
  check: () => Promise<T | undefined>,
  timedOut: () => Promise<string>,
  signal?: AbortSignal,
): Promise<T> {
  if (signal?.aborted === true) throw new Error('interrupted');
  for (const w of workers) w.assertRunning();
  const watches = workers.map((w) => w.watchExit());
  try {
    return await pollUntil(
      async () => {
        const value = await check();
        return value === undefined ? notYet(NOT_YET) : pollDone(value);
      },
      {
        what: `${workers.length} worker(s)`,
        timeoutMs,
        intervalMs: READY_POLL_INTERVAL_MS,
        stop: Promise.race(watches.map((w) => w.exited)),
        ...(signal === undefined ? {} : { signal }),
        timedOut: async (seen) => {
          const message = await timedOut();
          return seen === NOT_YET ? message : `${message}\nthe last check: ${seen}`;
        },
      },
    );
  } catch (err) {
    // A worker exited: the message assertRunning() gives, how it ended and the end of its log.
    if (err instanceof WaitStoppedError) throw new Error(err.reason);
    throw err;
  } finally {
    for (const w of watches) w.dispose();
  }
}

/**
 * Waits until `connected()` counts every worker (for BullMQ: the queue's worker count), failing
 * at once, with the end of its log, when one of them exits first. A timeout names each worker's
 * state and quotes the log of every one whose /readyz does not answer 200.
 */
export async function waitForWorkersConnected(
  workers: readonly WorkerProcess[],
  connected: () => Promise<number>,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<void> {
  let count = 0;
  await pollWhileRunning(
    workers,
    timeoutMs,
    async () => {
      count = await connected();
      return count >= workers.length ? true : undefined;
    },
    async () => {
      const lines = await Promise.all(
        workers.map(async (w) => {
          const status = await w.readyStatus();
          const state = `worker ${w.index}: ${w.describe()}, /readyz ${status === 0 ? 'no answer' : status}`;
          return status === 200 ? state : w.withLogTail(state);
        }),
      );
      return `only ${count} of ${workers.length} workers connected within ${timeoutMs} ms\n${lines.join('\n')}`;
    },
    signal,
  );
}
