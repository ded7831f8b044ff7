// Where a test run's CPU goes: each node process of the run (sampled by process-cpu-hook.cjs) is
// charged to the test file whose Vitest worker started it, directly or through its own children,
// so a file that starts worker fleets is charged for them. On 2 cores the suite is bound by CPU,
// not by waits: this is the table that says which files and which commands to make cheaper.
// A Vitest worker that runs several files one after the other (isolate: false, the unit project)
// is charged to the file it held at its last sample.
import { relative } from 'node:path';

export interface ProcessSample {
  pid: number;
  ppid: number;
  /** process.argv from the script on: what the process runs. */
  argv: string[];
  /** The test files a Vitest worker holds; empty in any other process. */
  files: string[];
  cpuMs: number;
}

export interface FileCpu {
  /** One test file, or "N files in one worker" for a worker that ran several (isolate: false). */
  file: string;
  /** CPU of the Vitest worker itself: imports, transforms, the test code. */
  ownCpuMs: number;
  /** CPU of every process it started, and theirs in turn. */
  childCpuMs: number;
  children: number;
}

export interface CommandCpu {
  /** The script a process ran, relative to the project (`src/cli/worker.ts`). */
  command: string;
  cpuMs: number;
  processes: number;
  /** How many of them a test file's worker started. */
  attributed: number;
}

export interface SuiteCpu {
  totalCpuMs: number;
  files: FileCpu[];
  commands: CommandCpu[];
  /** CPU of processes no test file started: Vitest itself, npm, the compiled project's build. */
  unattributedCpuMs: number;
}

/** Deeper than any chain of ours (vitest worker → npm → node → child). */
const PARENT_CHAIN_MAX = 16;

function fileKey(files: readonly string[], root: string): string {
  return files.length === 1 ? relative(root, files[0] as string) : `${files.length} files in one worker`;
}

/** The sample of the Vitest worker a process descends from, if it does. */
function owner(sample: ProcessSample, byPid: ReadonlyMap<number, ProcessSample>): ProcessSample | null {
  let current: ProcessSample | undefined = sample;
  for (let i = 0; i < PARENT_CHAIN_MAX && current !== undefined; i += 1) {
    if (current.files.length > 0) return current;
    current = byPid.get(current.ppid);
  }
  return null;
}

function commandOf(sample: ProcessSample, root: string): string {
  const script = sample.argv[0];
  if (script === undefined) return '(node -e)';
  return script.startsWith(root) ? relative(root, script) : script;
}

export function attributeCpu(samples: readonly ProcessSample[], root: string): SuiteCpu {
  const byPid = new Map(samples.map((s) => [s.pid, s]));
  const files = new Map<string, FileCpu>();
  const commands = new Map<string, CommandCpu>();
  let unattributedCpuMs = 0;
  for (const sample of samples) {
    const worker = owner(sample, byPid);
    if (sample.files.length === 0) {
      const command = commandOf(sample, root);
      const row = commands.get(command) ?? { command, cpuMs: 0, processes: 0, attributed: 0 };
      row.cpuMs += sample.cpuMs;
      row.processes += 1;
      if (worker !== null) row.attributed += 1;
      commands.set(command, row);
    }
    if (worker === null) {
      unattributedCpuMs += sample.cpuMs;
      continue;
    }
    const key = fileKey(worker.files, root);
    const row = files.get(key) ?? { file: key, ownCpuMs: 0, childCpuMs: 0, children: 0 };
    if (worker === sample) row.ownCpuMs += sample.cpuMs;
    else {
      row.childCpuMs += sample.cpuMs;
      row.children += 1;
    }
    files.set(key, row);
  }
  const total = (f: FileCpu) => f.ownCpuMs + f.childCpuMs;
  return {
    totalCpuMs: samples.reduce((sum, s) => sum + s.cpuMs, 0),
    files: [...files.values()].sort((a, b) => total(b) - total(a)),
    commands: [...commands.values()].sort((a, b) => b.cpuMs - a.cpuMs),
    unattributedCpuMs,
  };
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

/** The report as Markdown: the costliest files (with their wall time when known) and commands. */
export function renderSuiteCpu(cpu: SuiteCpu, wallMsByFile: ReadonlyMap<string, number>, rowsMax: number): string {
  const lines = [
    `node CPU of the run: ${seconds(cpu.totalCpuMs)} s, of which ${seconds(cpu.unattributedCpuMs)} s in no test file's processes`,
    '',
    '| file | wall s | CPU s | own s | children s | children |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    ...cpu.files.slice(0, rowsMax).map((f) => {
      const wall = wallMsByFile.get(f.file);
      return `| ${f.file} | ${wall === undefined || wall === 0 ? '' : seconds(wall)} | ${seconds(f.ownCpuMs + f.childCpuMs)} | ${seconds(f.ownCpuMs)} | ${seconds(f.childCpuMs)} | ${f.children} |`;
    }),
    '',
    '| command | CPU s | processes | per process s | started by a test file |',
    '| --- | ---: | ---: | ---: | ---: |',
    ...cpu.commands
      .slice(0, rowsMax)
      .map(
        (c) =>
          `| ${c.command} | ${seconds(c.cpuMs)} | ${c.processes} | ${seconds(c.cpuMs / c.processes)} | ${c.attributed} |`,
      ),
  ];
  return `${lines.join('\n')}\n`;
}
