// Starts and controls real worker processes from outside, as an operator or an orchestrator
// would: used by the demo, the chaos harness and the tests. Each process gets its own
// environment (URLs, queue, lock TTL), its own METRICS_PORT (several workers on one machine
// cannot share one), and its log goes to a file. The entry is the TypeScript source (run
// through tsx) or the compiled JavaScript of the production image (plain node), chosen by
// WORKER_ENTRY (Config.workerEntry).
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, type WriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../config/paths.ts';
import { WORKER_NODE_FLAGS } from '../config/worker-runtime.ts';
import { freePort } from '../services/free-port.ts';

/** The worker's TypeScript source: the default entry (the default of WORKER_ENTRY). */
export const WORKER_SOURCE_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'worker.ts');
/** How long a SIGTERMed worker gets before SIGKILL in stopAll(). */
export const WORKER_STOP_GRACE_MS = 10_000;
/** Poll interval and per-request bound of waitUntilReady(). */
export const READY_POLL_INTERVAL_MS = 200;
export const READY_REQUEST_TIMEOUT_MS = 2_000;

/** node's arguments for an entry: a .ts source through tsx (a development dependency), a .js file as is. */
export function nodeArgsFor(entry: string): string[] {
  if (!existsSync(entry)) {
    throw new Error(`worker entry ${entry} does not exist${entry.endsWith('.js') ? ' (run npm run build first)' : ''}`);
  }
  if (entry.endsWith('.js')) return [entry];
  return ['--import', createRequire(import.meta.url).resolve('tsx'), entry];
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

  /** `metricsPort`: the worker's METRICS_PORT (its /healthz, /readyz and /metrics). */
  constructor(readonly index: number, private readonly options: WorkerProcessOptions, readonly metricsPort: number) {}

  /** A worker process with a free METRICS_PORT of its own (not started). */
  static async create(index: number, options: WorkerProcessOptions): Promise<WorkerProcess> {
    return new WorkerProcess(index, options, await freePort());
  }

  /** Where this worker's stdout and stderr go. */
  get logFile(): string {
    return join(this.options.logDir, `worker-${this.index}.log`);
  }

  /** http://127.0.0.1:<metricsPort><path> */
  url(path: '/healthz' | '/readyz' | '/metrics'): string {
    return `http://127.0.0.1:${this.metricsPort}${path}`;
  }

  /** Resolves once /readyz answers 200; rejects if the process exits or timeoutMs passes first. */
  async waitUntilReady(timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`worker ${this.index} exited before it was ready; see worker-${this.index}.log`);
      const status = await fetch(this.url('/readyz'), { signal: AbortSignal.timeout(READY_REQUEST_TIMEOUT_MS) })
        .then((r) => r.status, () => 0);
      if (status === 200) return;
      if (performance.now() > deadline) throw new Error(`worker ${this.index} not ready after ${timeoutMs} ms (last /readyz status ${status})`);
      await new Promise((r) => setTimeout(r, READY_POLL_INTERVAL_MS));
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
    const child = spawn(process.execPath, args, {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...this.options.env, METRICS_PORT: String(this.metricsPort), METRICS_HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(this.log, { end: false });
    child.stderr?.pipe(this.log, { end: false });
    this.child = child;
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
      const exited = new Promise<WorkerExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
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

  /** `count` workers, numbered from 1, each with a free METRICS_PORT of its own. */
  static async create(count: number, options: WorkerProcessOptions): Promise<WorkerFleet> {
    const workers: WorkerProcess[] = [];
    for (let i = 1; i <= count; i++) workers.push(await WorkerProcess.create(i, options));
    return new WorkerFleet(workers);
  }

  startAll(): void {
    for (const w of this.workers) w.start();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
