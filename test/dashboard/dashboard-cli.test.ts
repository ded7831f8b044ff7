// The dashboard command (src/cli/dashboard.ts, what `npm run dashboard` runs): it prints where it
// listens, serves the configured queue (read-only unless DASHBOARD_READ_ONLY=false), stops with
// exit 0 on SIGTERM, and a port already in use is one line naming DASHBOARD_PORT with exit code 1.
// The node process is started directly so that SIGTERM reaches it rather than npm.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { bundledEntry } from '../../harness/fleet/source-bundle.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { describeRun, runCommand } from '../support/cli-process.ts';
import { uniqueName } from '../support/test-db.ts';

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
const TEST_TIMEOUT_MS = 120_000;

interface Started {
  child: ChildProcessWithoutNullStreams;
  url: string;
  readOnly: boolean;
  output(): { stdout: string; stderr: string };
  exited: Promise<number | null>;
}

const running: ChildProcessWithoutNullStreams[] = [];

afterEach(() => {
  for (const child of running.splice(0)) {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined)
      process.kill(-child.pid, 'SIGKILL');
  }
});

/** Starts the dashboard command and resolves with the line it prints once listening. */
function startCli(env: Record<string, string>): Promise<Started> {
  const child = spawn(process.execPath, [bundledEntry('src/cli/dashboard.ts')], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, DASHBOARD_PORT: '0', LOG_LEVEL: 'info', ...env },
    // Its own process group, so that afterEach can kill whatever is left of it.
    detached: true,
  });
  running.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const output = () => ({ stdout, stderr });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no listening line after ${START_TIMEOUT_MS} ms\n${stderr}`)),
      START_TIMEOUT_MS,
    );
    const onData = (): void => {
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (line === undefined) return;
      clearTimeout(timer);
      child.stdout.off('data', onData);
      const printed = JSON.parse(line) as { url: string; readOnly: boolean };
      resolve({ child, url: printed.url, readOnly: printed.readOnly, output, exited });
    };
    child.stdout.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(
        new Error(`npm run dashboard exited with ${code} before listening\nstdout:\n${stdout}\nstderr:\n${stderr}`),
      );
    });
  });
}

async function stop(started: Started): Promise<number | null> {
  started.child.kill('SIGTERM');
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), STOP_TIMEOUT_MS));
  const code = await Promise.race([started.exited, timeout]);
  if (code === 'timeout') throw new Error(`npm run dashboard still running ${STOP_TIMEOUT_MS} ms after SIGTERM`);
  return code;
}

async function queuesOf(url: string): Promise<{ name: string; readOnlyMode: boolean }[]> {
  const response = await fetch(new URL('api/queues', url));
  expect(response.status).toBe(200);
  return ((await response.json()) as { queues: { name: string; readOnlyMode: boolean }[] }).queues;
}

describe('npm run dashboard', { timeout: TEST_TIMEOUT_MS }, () => {
  it('serves QUEUE_NAME read-only on loopback and stops on SIGTERM with exit 0', async () => {
    const queueName = uniqueName('dash_cli');
    const started = await startCli({ QUEUE_NAME: queueName });
    expect(started.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(started.readOnly).toBe(true);
    expect(await queuesOf(started.url)).toMatchObject([{ name: queueName, readOnlyMode: true }]);
    const page = await fetch(started.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('fenced transfers');
    expect(await stop(started)).toBe(0);
    expect(started.output().stderr).toContain('"msg":"dashboard stopped"');
  });

  it('lets DASHBOARD_READ_ONLY=false open the actions, and says so in its log', async () => {
    const started = await startCli({ QUEUE_NAME: uniqueName('dash_cli'), DASHBOARD_READ_ONLY: 'false' });
    expect(started.readOnly).toBe(false);
    expect((await queuesOf(started.url))[0]?.readOnlyMode).toBe(false);
    expect(started.output().stderr).toContain('NOT read-only');
    expect(await stop(started)).toBe(0);
  });

  it('says which variable to change when the port is in use', async () => {
    const blocker: Server = createServer();
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, '127.0.0.1', () => {
        const address = blocker.address();
        resolve(typeof address === 'object' && address !== null ? address.port : -1);
      }),
    );
    try {
      const result = await runCommand('npm', ['run', '--silent', 'dashboard'], {
        DASHBOARD_PORT: String(port),
        QUEUE_NAME: uniqueName('dash_cli'),
        LOG_LEVEL: 'silent',
      });
      expect(result.code, describeRun(result)).toBe(1);
      expect(result.stderr).toBe(`configuration error: DASHBOARD_PORT: port ${port} on 127.0.0.1 is already in use\n`);
    } finally {
      blocker.close();
    }
  });
});
