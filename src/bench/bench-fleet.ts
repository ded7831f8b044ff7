// The processes of one case (real workers, no-op BullMQ workers or Graphile Worker instances),
// started the way src/fleet starts workers: each its own process with its own environment
// (a free METRICS_PORT each), its log in a file, and its memory sampled while it runs.
import { join } from 'node:path';
import { WorkerProcess } from '../fleet/worker-processes.ts';
import { freePort } from '../services/free-port.ts';
import { MemoryTracker, type ProcessPeak } from './process-memory.ts';

export interface BenchFleetSpec {
  readonly count: number;
  /** TypeScript entry; default the real worker (src/cli/worker.ts). */
  readonly entry?: string;
  readonly env: Readonly<Record<string, string>>;
  readonly logDir: string;
  /** Start the processes under `--cpu-prof`, writing profiles into this folder. */
  readonly cpuProfDir: string | null;
}

export class BenchFleet {
  private trackers: MemoryTracker[] = [];

  private constructor(private readonly processes: readonly WorkerProcess[]) {}

  static async create(spec: BenchFleetSpec): Promise<BenchFleet> {
    const processes: WorkerProcess[] = [];
    for (let index = 1; index <= spec.count; index++) {
      const env = { ...spec.env, METRICS_PORT: String(await freePort()) };
      const nodeArgs = spec.cpuProfDir === null
        ? []
        : ['--cpu-prof', `--cpu-prof-dir=${join(spec.cpuProfDir, `worker-${index}`)}`];
      processes.push(new WorkerProcess(index, {
        env, logDir: spec.logDir, nodeArgs, ...(spec.entry === undefined ? {} : { entry: spec.entry }),
      }, Number(env.METRICS_PORT)));
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

  sampleMemory(): void {
    for (const t of this.trackers) t.sample();
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
