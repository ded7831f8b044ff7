// Runs one of the project's commands as a child process, the way a user or CI does, and
// collects its exit code and output. Bounded: a command still running after timeoutMs is
// killed and reported as such.
import { type ChildProcess, spawn } from 'node:child_process';
import { bundledEntry } from '../../harness/fleet/source-bundle.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

export const CLI_TIMEOUT_MS = 60_000;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  durationMs: number;
}

/**
 * `command` is run from the project root (or `cwd`) with the test's environment plus `env`.
 * Use `npm` for `npm run ...`, and runSource for a single CLI file.
 */
export function runCommand(
  command: string,
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = CLI_TIMEOUT_MS,
  cwd = PROJECT_ROOT,
): Promise<CliResult> {
  const startedMs = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so that a timeout ends npm and the node process under it alike.
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      killProcessGroup(child);
      reject(
        new Error(
          `${command} ${args.join(' ')} still running after ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`,
        ),
      );
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, durationMs: performance.now() - startedMs });
    });
  });
}

/**
 * SIGKILLs a child started with `detached: true` and everything in its process group: npm cannot
 * pass a SIGKILL on, so killing npm alone would leave the node process under it running.
 */
export function killProcessGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/**
 * One TypeScript CLI file of the project (src/cli, examples/) run as the bundle of its sources
 * (harness/fleet/source-bundle.ts), without npm's start-up cost or tsx's loader.
 */
export function runSource(
  file: string,
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs?: number,
): Promise<CliResult> {
  return runCommand(process.execPath, [bundledEntry(file), ...args], env, timeoutMs);
}

/** The last non-empty line a command wrote to stdout, parsed as JSON (our CLIs end with one). */
export function lastJsonLine(result: CliResult): unknown {
  const lines = result.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const last = lines.at(-1);
  if (last === undefined) throw new Error(`no output on stdout; stderr:\n${result.stderr}`);
  try {
    return JSON.parse(last);
  } catch {
    throw new Error(`last stdout line is not JSON: ${last}\nstderr:\n${result.stderr}`);
  }
}

/** A readable account of a command run, for assertion messages. */
export function describeRun(result: CliResult): string {
  return `exit ${result.code} (signal ${result.signal}) after ${Math.round(result.durationMs)} ms\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}
