// Starts the real worker entry point as a child process on a test pipeline's database (as its
// worker role) and queue, with an HTTP port of its own (which it reports), and waits until its /readyz says
// it takes jobs. The entry is WORKER_ENTRY: the sources by default, the compiled
// dist/cli/worker.js in the `compiled` project.
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join } from 'node:path';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import type { Pipeline } from './pipeline.ts';

export const WORKER_READY_TIMEOUT_MS = 60_000;
export const TEST_WORKER_LOG_ROOT = join(PROJECT_ROOT, '.runs', 'test-workers');

export async function spawnWorkerProcess(
  p: Pipeline,
  env: Record<string, string> = {},
  index = 1,
): Promise<WorkerProcess> {
  const w = new WorkerProcess(index, {
    // Under the project's git-ignored run folder, not the system's temp folder, which nothing empties.
    logDir: mkdtempSync(join(mkdirSync(TEST_WORKER_LOG_ROOT, { recursive: true }) ?? TEST_WORKER_LOG_ROOT, 'worker-')),
    entry: p.config.workerEntry,
    env: { ...p.workerEnv, LOG_LEVEL: 'info', ...env },
  });
  w.start();
  try {
    await w.waitUntilReady(WORKER_READY_TIMEOUT_MS);
  } catch (err) {
    await w.stop();
    throw err;
  }
  return w;
}
