// Resident memory of a process from /proc/<pid>/status (Linux): VmRSS now and VmHWM, the
// kernel's high-water mark of VmRSS. The bench samples VmRSS while a case runs and reads VmHWM
// just before stopping the process. VmHWM is not a strict peak: the kernel folds the current
// RSS into its mark only at some events (unmapping, exit), and RSS counters are approximate, so a
// sample taken earlier can exceed it. The reported peak is therefore the larger of the two, and
// the JSON says when the sample won.
import { readFileSync } from 'node:fs';

export interface MemoryReading {
  readonly rssKb: number;
  readonly hwmKb: number;
}

export function parseProcStatus(status: string): MemoryReading | null {
  const field = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+)\\s+kB$`, 'm').exec(status);
    return m === null ? null : Number(m[1]);
  };
  const rssKb = field('VmRSS');
  const hwmKb = field('VmHWM');
  return rssKb === null || hwmKb === null ? null : { rssKb, hwmKb };
}

/** null when the process is gone or /proc is not there (not Linux). */
export function readMemory(pid: number): MemoryReading | null {
  try {
    return parseProcStatus(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return null;
  }
}

export interface ProcessPeak {
  readonly index: number;
  readonly pid: number;
  /** max(VmHWM, largest sampled VmRSS), MiB; null when the process could not be read at all. */
  readonly peakRssMb: number | null;
  /** VmHWM just before the stop signal, MiB. */
  readonly vmHwmMb: number | null;
  /** The largest VmRSS sampled while the case ran, MiB. */
  readonly sampledRssMaxMb: number | null;
  readonly samples: number;
  /** VmHWM was at least every sampled VmRSS (false: the sample is the better peak). */
  readonly vmHwmCoversSamples: boolean;
}

const KB_PER_MB = 1024;

/** Tracks one process: sample() while it runs, peak() just before stopping it. */
export class MemoryTracker {
  private sampledMaxKb = 0;
  private samples = 0;

  constructor(
    readonly index: number,
    readonly pid: number,
  ) {}

  sample(): void {
    const reading = readMemory(this.pid);
    if (reading === null) return;
    this.samples += 1;
    if (reading.rssKb > this.sampledMaxKb) this.sampledMaxKb = reading.rssKb;
  }

  peak(): ProcessPeak {
    this.sample();
    const reading = readMemory(this.pid);
    const mb = (kb: number) => Math.round((kb / KB_PER_MB) * 10) / 10;
    const peakKb = Math.max(reading?.hwmKb ?? 0, this.sampledMaxKb);
    return {
      index: this.index,
      pid: this.pid,
      peakRssMb: peakKb === 0 ? null : mb(peakKb),
      vmHwmMb: reading === null ? null : mb(reading.hwmKb),
      sampledRssMaxMb: this.samples === 0 ? null : mb(this.sampledMaxKb),
      samples: this.samples,
      vmHwmCoversSamples: reading !== null && reading.hwmKb >= this.sampledMaxKb,
    };
  }
}
