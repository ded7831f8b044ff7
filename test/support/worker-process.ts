// Starts the real worker entry point (src/cli/worker.ts) as a child process on a test pipeline's
// database and queue, with a free METRICS_PORT of its own, and waits until its /readyz says it
// takes jobs.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkerProcess } from '../../src/fleet/worker-processes.ts';
import type { Pipeline } from './pipeline.ts';

export const WORKER_READY_TIMEOUT_MS = 60_000;

export async function spawnWorkerProcess(p: Pipeline, env: Record<string, string> = {}, index = 1): Promise<WorkerProcess> {
  const w = await WorkerProcess.create(index, {
    logDir: mkdtempSync(join(tmpdir(), 'ft-worker-')),
    env: {
      DATABASE_URL: p.db.url,
      REDIS_URL: p.config.redisUrl,
      QUEUE_NAME: p.config.queueName,
      LOCK_KEY_PREFIX: p.config.lockKeyPrefix,
      LOCK_TTL_MS: String(p.config.lockTtlMs),
      WORKER_CONCURRENCY: String(p.config.workerConcurrency),
      DB_POOL_MAX: String(p.config.dbPoolMax),
      JOB_ATTEMPTS_MAX: String(p.config.jobAttemptsMax),
      LOG_LEVEL: 'info',
      ...env,
    },
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
