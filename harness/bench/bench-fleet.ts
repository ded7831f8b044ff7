// The processes of one case (real workers, no-op BullMQ workers or Graphile Worker instances),
// started the way harness/fleet starts workers: each its own process with its own environment
// (its HTTP port reported by the process itself), its log in a file, and its memory sampled while it runs.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { StartupError } from '../../src/errors.ts';
import { WorkerProcess } from '../fleet/worker-processes.ts';
import { MemoryTracker, type ProcessPeak } from './process-memory.ts';

export interface BenchFleetSpec {
  readonly count: number;
  /** TypeScript entry under src/; default the real worker. */
  readonly entry?: string;
  /**
   * Config.workerEntry (WORKER_ENTRY): the real worker's entry. When it is compiled JavaScript
   * (dist/cli/worker.js), every process of the bench runs compiled: the other entries are
   * mapped to their dist/ counterparts, so all cases pay the same runtime.
   */
  readonly workerEntry: string;
  readonly env: Readonly<Record<string, string>>;
  readonly logDir: string;
  /** Start the processes under `--cpu-prof`, writing profiles into this folder. */
  readonly cpuProfDir: string | null;
  /** Node flags of the processes; default the worker's own (WORKER_NODE_FLAGS). */
  readonly runtimeFlags?: readonly string[];
}

/** Where `npm run build:harness` (tsconfig.harness.json) compiles src/ and harness/ side by side. */
const HARNESS_BUILD_DIR = 'dist-harness';

/** The file a bench process runs: see BenchFleetSpec.workerEntry. */
export function processEntry(sourceEntry: string | undefined, workerEntry: string): string {
  if (!workerEntry.endsWith('.js')) return sourceEntry ?? workerEntry;
  if (sourceEntry === undefined) return workerEntry;
  const inside = (dir: string): string | null =>
    sourceEntry.startsWith(`${join(PROJECT_ROOT, dir)}/`)
      ? sourceEntry.slice(join(PROJECT_ROOT, dir).length + 1)
      : null;
  const product = inside('src');
  const harness = inside('harness');
  // The product's build (dist/) holds no harness: harness entries come from `npm run build:harness`.
  const compiled =
    product !== null
      ? join(PROJECT_ROOT, 'dist', product)
      : harness !== null
        ? join(PROJECT_ROOT, HARNESS_BUILD_DIR, 'harness', harness)
        : null;
  if (compiled === null || !compiled.endsWith('.ts')) throw new Error(`no compiled counterpart for ${sourceEntry}`);
  const entry = compiled.replace(/\.ts$/, '.js');
  if (!existsSync(entry))
    throw new StartupError(['WORKER_ENTRY'], `${entry} is missing: run npm run build:harness first`);
  return entry;
}

/** Slot time of the real workers (see BenchFleet.slotTimes). */
export interface SlotTimes {
  readonly slotSeconds: number;
  readonly lockWaitSeconds: number;
}

const SCRAPE_TIMEOUT_MS = 5_000;

/** The sum of every series of one metric in a Prometheus text exposition. */
function sumOf(exposition: string, metric: string): number {
  let total = 0;
  for (const line of exposition.split('\n')) {
    if (line !== metric && !line.startsWith(`${metric} `) && !line.startsWith(`${metric}{`)) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

export class BenchFleet {
  private trackers: MemoryTracker[] = [];

  private constructor(private readonly processes: readonly WorkerProcess[]) {}

  static create(spec: BenchFleetSpec): BenchFleet {
    const processes: WorkerProcess[] = [];
    for (let index = 1; index <= spec.count; index++) {
      const nodeArgs =
        spec.cpuProfDir === null ? [] : ['--cpu-prof', `--cpu-prof-dir=${join(spec.cpuProfDir, `worker-${index}`)}`];
      processes.push(
        new WorkerProcess(index, {
          env: spec.env,
          logDir: spec.logDir,
          nodeArgs,
          entry: processEntry(spec.entry, spec.workerEntry),
          ...(spec.runtimeFlags === undefined ? {} : { runtimeFlags: spec.runtimeFlags }),
        }),
      );
    }
    return new BenchFleet(processes);
  }

  startAll(): void {
    for (const p of this.processes) p.start();
    this.trackers = this.processes.map((p) => {
      if (p.pid === undefined) throw new Error(`worker process ${p.index} did not start`);
      return new MemoryTracker(p.index, p.pid);
    });
  }

  /** Processes that have exited on their own (a crash): the case cannot be trusted. */
  exited(): number[] {
    return this.processes.filter((p) => !p.running).map((p) => p.index);
  }

  /** The pids of the processes running now. */
  pids(): number[] {
    return this.processes.flatMap((p) => (p.running && p.pid !== undefined ? [p.pid] : []));
  }

  sampleMemory(): void {
    for (const t of this.trackers) t.sample();
  }

  /**
   * The real workers' own account of their slots (their /metrics): seconds jobs held a slot, and
   * seconds of that spent waiting for a wallet lease. Summed over the processes.
   */
  async slotTimes(): Promise<SlotTimes> {
    let slotSeconds = 0;
    let lockWaitSeconds = 0;
    for (const p of this.processes) {
      const text = await (await fetch(p.url('/metrics'), { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) })).text();
      slotSeconds += sumOf(text, 'fenced_transfers_job_duration_seconds_sum');
      lockWaitSeconds += sumOf(text, 'fenced_transfers_lock_wait_seconds_sum');
    }
    return { slotSeconds, lockWaitSeconds };
  }

  /** Reads every process's peak (VmHWM) and then stops them all (SIGTERM, SIGKILL after a grace). */
  async stopAll(): Promise<ProcessPeak[]> {
    const peaks = this.trackers.map((t) => t.peak());
    await Promise.all(this.processes.map((p) => p.stop()));
    return peaks;
  }
}

export function logDirOf(runDir: string, caseName: string, run: number): string {
  return join(runDir, `${caseName}-r${run}`);
}
