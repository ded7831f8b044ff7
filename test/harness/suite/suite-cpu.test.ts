// The charge of a run's processes to its test files, on a made-up process tree; and the sampling
// hook's record of a real process that runs a worker thread.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { attributeCpu, type ProcessSample, renderSuiteCpu } from '../../../harness/suite/suite-cpu.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';

const ROOT = '/repo';

function sample(pid: number, ppid: number, script: string | null, cpuMs: number, files: string[] = []): ProcessSample {
  return { pid, ppid, argv: script === null ? [] : [script], files, cpuMs };
}

// vitest (10) → worker of a.test.ts (11) → npm (12) → worker.ts (13) → its own child (14);
// worker of b.test.ts (15) → worker.ts (16); an unrelated build (17) under vitest; a unit worker
// that ran two files (18).
const TREE = [
  sample(10, 1, '/repo/node_modules/vitest/vitest.mjs', 4_000),
  sample(11, 10, '/repo/node_modules/vitest/dist/workers/forks.js', 1_500, ['/repo/test/a.test.ts']),
  sample(12, 11, '/usr/lib/node_modules/npm/bin/npm-cli.js', 300),
  sample(13, 12, '/repo/src/cli/worker.ts', 3_000),
  sample(14, 13, null, 200),
  sample(15, 10, '/repo/node_modules/vitest/dist/workers/forks.js', 800, ['/repo/test/b.test.ts']),
  sample(16, 15, '/repo/src/cli/worker.ts', 2_000),
  sample(17, 10, '/repo/node_modules/.bin/tsc', 9_000),
  sample(18, 10, '/repo/node_modules/vitest/dist/workers/forks.js', 700, [
    '/repo/test/c.test.ts',
    '/repo/test/d.test.ts',
  ]),
];

describe('attributeCpu', () => {
  const cpu = attributeCpu(TREE, ROOT);

  it('charges every descendant to the test file whose worker started it, costliest first', () => {
    expect(cpu.files).toEqual([
      { file: 'test/a.test.ts', ownCpuMs: 1_500, childCpuMs: 3_500, children: 3 },
      { file: 'test/b.test.ts', ownCpuMs: 800, childCpuMs: 2_000, children: 1 },
      { file: '2 files in one worker', ownCpuMs: 700, childCpuMs: 0, children: 0 },
    ]);
  });

  it('leaves what no test file started unattributed, and counts everything once', () => {
    expect(cpu.unattributedCpuMs).toBe(13_000);
    expect(cpu.totalCpuMs).toBe(21_500);
    const charged = cpu.files.reduce((sum, f) => sum + f.ownCpuMs + f.childCpuMs, 0);
    expect(charged + cpu.unattributedCpuMs).toBe(cpu.totalCpuMs);
  });

  it('sums the processes of one command, saying how many a test file started', () => {
    const worker = cpu.commands.find((c) => c.command === 'src/cli/worker.ts');
    expect(worker).toEqual({ command: 'src/cli/worker.ts', cpuMs: 5_000, processes: 2, attributed: 2 });
    expect(cpu.commands.find((c) => c.command === 'node_modules/.bin/tsc')?.attributed).toBe(0);
    expect(cpu.commands.find((c) => c.command === '(node -e)')?.cpuMs).toBe(200);
    expect(cpu.commands.some((c) => c.command.includes('workers/forks.js'))).toBe(false);
  });

  it('stops at a parent chain that loops instead of walking forever', () => {
    const loop = attributeCpu([sample(1, 2, null, 5), sample(2, 1, null, 7)], ROOT);
    expect(loop.unattributedCpuMs).toBe(12);
    expect(loop.files).toEqual([]);
  });
});

describe('renderSuiteCpu', () => {
  it('puts each file beside its wall time, in seconds', () => {
    const text = renderSuiteCpu(attributeCpu(TREE, ROOT), new Map([['test/a.test.ts', 12_340]]), 2);
    expect(text).toContain('| test/a.test.ts | 12.3 | 5.0 | 1.5 | 3.5 | 3 |');
    expect(text).toContain('| test/b.test.ts |  | 2.8 | 0.8 | 2.0 | 1 |');
    expect(text).not.toContain('2 files in one worker');
    expect(text).toContain('| node_modules/.bin/tsc | 9.0 | 1 | 9.0 | 0 |');
  });
});

describe('the sampling hook (harness/suite/process-cpu-hook.cjs)', () => {
  // The main thread samples once (about 1 s in), then is kept busy while the worker thread's
  // clock runs past its own second sample, and the process is SIGKILLed: no exit sample. A hook
  // that also ran in the worker thread would leave that thread's record, with its command line.
  const PROGRAM = `
    const { Worker } = require('node:worker_threads');
    new Worker('setTimeout(() => {}, 10000)', { eval: true, argv: ['worker-thread-argv'] });
    setTimeout(() => {
      const until = Date.now() + 1500;
      while (Date.now() < until);
      process.kill(process.pid, 'SIGKILL');
    }, 1200);
  `;

  it('records the main thread of a process, never a worker thread of it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ft-suite-cpu-hook-'));
    try {
      const child = spawnSync(
        process.execPath,
        ['--require', join(PROJECT_ROOT, 'harness/suite/process-cpu-hook.cjs'), '-e', PROGRAM, 'main-argv'],
        { env: { ...process.env, SUITE_CPU_DIR: dir }, timeout: 20_000 },
      );
      expect(child.signal).toBe('SIGKILL');
      const records = readdirSync(dir).map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')));
      expect(records).toHaveLength(1);
      expect(records[0].pid).toBe(child.pid);
      expect(records[0].argv).toEqual(['main-argv']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
