// Runs `harness/chaos/chaos-cli.ts` as a child process in its own process group, with its output folder
// in a temporary directory, and reads back its report. cleanup() ends the run if it is still
// going (SIGTERM, which makes the harness stop everything it started; SIGKILL after a grace),
// then ends whatever the harness listed in processes.json and removes the folder, so that a
// failed or timed-out test leaves nothing behind.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { ProcessRecord } from '../../../harness/chaos/chaos-services.ts';
import type { RunFigures } from '../../../harness/chaos/report.ts';
import { bundledEntry } from '../../../harness/fleet/source-bundle.ts';
import { killFormationLeftovers } from '../../../harness/services/local-pg-formation.ts';
import { postgresBinDir } from '../../../harness/services/local-postgres.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';

const CLI = join(PROJECT_ROOT, 'harness', 'chaos', 'chaos-cli.ts');
const STOP_GRACE_MS = 30_000;

export interface ChaosCliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  report: RunFigures | null;
  outDir: string;
  /** From the verdict line on stdout (PASS/FAIL seed …) to the process's exit; null without one. */
  exitAfterVerdictMs: number | null;
}

/** The harness stops everything it started before it prints its verdict; exiting is immediate. */
const EXIT_AFTER_VERDICT_MS_MAX = 10_000;

/**
 * What every chaos run must show, whatever it tests: a report, the verdict "as expected" (for a
 * negative control: the violation was detected) with exit code 0, and an exit right after the
 * verdict (a forgotten two-minute timer once kept the process alive after every run with a
 * failover). Answers the report and the output to attach to the test's own assertions.
 */
export function expectVerdictAsExpected(result: ChaosCliResult): { report: RunFigures; context: string } {
  const context = `${result.stdout}\n${result.stderr.slice(-6000)}`;
  expect(result.report, context).not.toBeNull();
  const report = result.report!;
  expect(report.verdict.pass, context).toBe(true);
  expect(result.code, context).toBe(0);
  expect(result.exitAfterVerdictMs, context).not.toBeNull();
  expect(result.exitAfterVerdictMs!, context).toBeLessThan(EXIT_AFTER_VERDICT_MS_MAX);
  return { report, context };
}

export class ChaosCliRun {
  private child: ChildProcess | null = null;
  readonly root = mkdtempSync(join(tmpdir(), 'chaos-test-'));
  readonly outDir = join(this.root, 'run');

  run(args: readonly string[], timeoutMs: number): Promise<ChaosCliResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [bundledEntry(CLI), ...args, '--out', this.outDir], {
        cwd: PROJECT_ROOT,
        env: { ...process.env },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      this.child = child;
      let stdout = '';
      let stderr = '';
      let verdictAtMs: number | null = null;
      child.stdout?.setEncoding('utf8').on('data', (c: string) => {
        stdout += c;
        if (verdictAtMs === null && /^(PASS|FAIL) seed /m.test(stdout)) verdictAtMs = performance.now();
      });
      child.stderr?.setEncoding('utf8').on('data', (c: string) => {
        stderr += c;
      });
      const timer = setTimeout(() => {
        reject(
          new Error(
            `chaos run still going after ${timeoutMs} ms\nstdout:\n${stdout}\nstderr (tail):\n${stderr.slice(-4000)}`,
          ),
        );
      }, timeoutMs);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        this.child = null;
        const reportPath = join(this.outDir, 'report.json');
        const report = existsSync(reportPath) ? (JSON.parse(readFileSync(reportPath, 'utf8')) as RunFigures) : null;
        const exitAfterVerdictMs = verdictAtMs === null ? null : Math.round(performance.now() - verdictAtMs);
        resolve({ code, stdout, stderr, report, outDir: this.outDir, exitAfterVerdictMs });
      });
    });
  }

  async cleanup(): Promise<void> {
    const child = this.child;
    if (child !== null && child.pid !== undefined && child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
      signalGroup(child.pid, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(child.pid as number, 'SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    killLeftovers(join(this.outDir, 'processes.json'));
    rmSync(this.root, { recursive: true, force: true });
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Ends what a harness that died without cleaning up left running: workers, redis-server, PostgreSQL. */
function killLeftovers(recordPath: string): void {
  if (!existsSync(recordPath)) return;
  const record = JSON.parse(readFileSync(recordPath, 'utf8')) as ProcessRecord;
  for (const pid of [
    ...record.workerPids,
    ...(record.redisPid === null ? [] : [record.redisPid]),
    ...(record.redisClusterPids ?? []),
    ...(record.etcdPids ?? []),
  ]) {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  const binDir = postgresBinDir();
  if (record.postgresDir !== null && existsSync(join(record.postgresDir, 'postmaster.pid')) && binDir !== null) {
    try {
      const pgCtl = [join(binDir, 'pg_ctl'), 'stop', '-D', record.postgresDir, '-m', 'immediate', '-w'];
      if (process.getuid?.() === 0) execFileSync('runuser', ['-u', 'postgres', '--', ...pgCtl], { stdio: 'ignore' });
      else execFileSync(pgCtl[0] as string, pgCtl.slice(1), { stdio: 'ignore' });
    } catch {
      if (record.postgresPid !== null && alive(record.postgresPid)) process.kill(record.postgresPid, 'SIGKILL');
    }
  }
  if (record.formationDir !== null && record.formationDir !== undefined) killFormationLeftovers(record.formationDir);
  for (const dir of [record.redisDir, record.postgresDir, record.formationDir ?? null])
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
}
