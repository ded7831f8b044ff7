// Starts the real worker entry point as a child process on a test pipeline's database (as its
// worker role) and queue, and waits until it has registered with the queue. The entry is
// WORKER_ENTRY: the sources by default, the compiled dist/cli/worker.js in the `compiled` project.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkerProcess } from '../../src/fleet/worker-processes.ts';
import type { Pipeline } from './pipeline.ts';

export const WORKER_READY_TIMEOUT_MS = 20_000;

export async function spawnWorkerProcess(p: Pipeline, env: Record<string, string> = {}): Promise<WorkerProcess> {
  const before = await p.queue.getWorkersCount();
  const w = new WorkerProcess(1, {
    logDir: mkdtempSync(join(tmpdir(), 'ft-worker-')),
    entry: p.config.workerEntry,
    env: { ...p.workerEnv, LOG_LEVEL: 'info', ...env },
  });
  w.start();
  const deadline = performance.now() + WORKER_READY_TIMEOUT_MS;
  while ((await p.queue.getWorkersCount()) <= before) {
    if (!w.running) throw new Error('worker process exited during start');
    if (performance.now() > deadline) throw new Error('worker process did not register with the queue in time');
    await new Promise((r) => setTimeout(r, 100));
  }
  return w;
}
