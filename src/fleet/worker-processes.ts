// Starts and controls real worker processes from outside, as an operator or an orchestrator
// would: used by the demo, the chaos harness and the tests. Each process gets its own
// environment (URLs, queue, lock TTL) and its log goes to a file. The entry is the TypeScript
// source (run through tsx) or the compiled JavaScript of the production image (plain node),
// chosen by WORKER_ENTRY (Config.workerEntry).
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, type WriteStream } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../config/paths.ts';

/** The worker's TypeScript source: the default entry (the default of WORKER_ENTRY). */
export const WORKER_SOURCE_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'worker.ts');
/** How long a SIGTERMed worker gets before SIGKILL in stopAll(). */
export const WORKER_STOP_GRACE_MS = 10_000;

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
}

export class WorkerProcess {
  private child: ChildProcess | null = null;
  private log: WriteStream | null = null;
  private starts = 0;
  private frozen = false;

  constructor(readonly index: number, private readonly options: WorkerProcessOptions) {}

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
    this.log = createWriteStream(join(this.options.logDir, `worker-${this.index}.log`), { flags: 'a' });
    const child = spawn(process.execPath, [...(this.options.nodeArgs ?? []), ...nodeArgsFor(this.options.entry ?? WORKER_SOURCE_ENTRY)], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ...this.options.env },
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

  /** SIGTERM (after thawing), SIGKILL if it has not exited within the grace period. */
  async stop(graceMs = WORKER_STOP_GRACE_MS): Promise<void> {
    const child = this.child;
    if (child === null) return;
    if (this.running) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }
    this.log?.end();
    this.child = null;
  }
}

export class WorkerFleet {
  readonly workers: WorkerProcess[];

  constructor(count: number, options: WorkerProcessOptions) {
    this.workers = Array.from({ length: count }, (_, i) => new WorkerProcess(i + 1, options));
  }

  startAll(): void {
    for (const w of this.workers) w.start();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop()));
  }
}
