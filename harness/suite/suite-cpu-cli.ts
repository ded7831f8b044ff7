// `npm run test:cpu -- [vitest arguments]`: runs `vitest run` with every node process sampled
// (process-cpu-hook.cjs) and prints where the CPU went, per test file and per command, beside each
// file's wall time. Its files stay in .runs/suite-cpu/<time>/ (the samples, Vitest's JSON report,
// report.md). Measure with nothing else running: on 2 cores anything beside it moves the figures.
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { runCli } from '../../src/cli/run-cli.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { attributeCpu, type ProcessSample, renderSuiteCpu } from './suite-cpu.ts';

const HOOK = join(PROJECT_ROOT, 'harness', 'suite', 'process-cpu-hook.cjs');
const TABLE_ROWS_MAX = 40;

interface VitestFileResult {
  name: string;
  startTime: number;
  endTime: number;
}

function runVitest(dir: string, args: readonly string[]): Promise<number | null> {
  const json = join(dir, 'vitest.json');
  const env = {
    ...process.env,
    SUITE_CPU_DIR: join(dir, 'samples'),
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${JSON.stringify(HOOK)}`.trim(),
  };
  const child = spawn(
    process.execPath,
    [
      join(PROJECT_ROOT, 'node_modules', 'vitest', 'vitest.mjs'),
      'run',
      '--reporter=default',
      '--reporter=json',
      `--outputFile.json=${json}`,
      ...args,
    ],
    { cwd: PROJECT_ROOT, env, stdio: 'inherit' },
  );
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
}

function readSamples(dir: string): ProcessSample[] {
  return readdirSync(dir).flatMap((name) => {
    try {
      return [JSON.parse(readFileSync(join(dir, name), 'utf8')) as ProcessSample];
    } catch {
      return []; // caught mid-write by a SIGKILL
    }
  });
}

function wallTimes(jsonPath: string): Map<string, number> {
  const report = JSON.parse(readFileSync(jsonPath, 'utf8')) as { testResults: VitestFileResult[] };
  const wall = new Map<string, number>();
  // A file run by two projects (sources, compiled) appears twice: its wall time is their sum.
  for (const r of report.testResults) {
    const file = relative(PROJECT_ROOT, r.name);
    wall.set(file, (wall.get(file) ?? 0) + (r.endTime - r.startTime));
  }
  return wall;
}

await runCli(async () => {
  const dir = join(PROJECT_ROOT, '.runs', 'suite-cpu', new Date().toISOString().replace(/[:.]/g, '-'));
  mkdirSync(join(dir, 'samples'), { recursive: true });
  const startedMs = performance.now();
  const code = await runVitest(dir, process.argv.slice(2));
  const wallMs = performance.now() - startedMs;
  const cpu = attributeCpu(readSamples(join(dir, 'samples')), PROJECT_ROOT);
  const report = `vitest exit code ${code}, ${(wallMs / 1000).toFixed(0)} s of wall time\n\n${renderSuiteCpu(cpu, wallTimes(join(dir, 'vitest.json')), TABLE_ROWS_MAX)}`;
  writeFileSync(join(dir, 'report.md'), report);
  process.stdout.write(`\n${report}\nwritten to ${relative(PROJECT_ROOT, dir)}\n`);
  if (code !== 0) process.exitCode = 1;
});
