// An in-process worker of a test pipeline, built as src/queue/run-worker.ts builds one, whose log
// lines, counters and fault reports the test reads: for the tests of what a worker records about
// a job (permanent failures, give-ups), where the pipeline's own workers log nothing.
import { pino } from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import { bullmqConnection, lockConnection } from '../../src/queue/redis-connection.ts';
import {
  type FaultReporter,
  startTransferWorker,
  type TransferWorker,
  type TransferWorkerHooks,
} from '../../src/queue/transfer-worker.ts';
import type { Pipeline } from './pipeline.ts';
import { uniqueName } from './test-db.ts';

export interface ObservedWorker {
  readonly running: TransferWorker;
  readonly metrics: WorkerMetrics;
  /** The permanent faults the worker reported, in order. */
  readonly faults: { kind: string; reason: string }[];
  /** The JSON log lines so far whose `event` is this one. */
  events(event: string): Record<string, unknown>[];
  /** The value of one counter series (0 when it has none). */
  counter(name: string, labels?: Record<string, string>): Promise<number>;
  stop(): Promise<void>;
}

export async function startObservedWorker(
  p: Pipeline,
  options: { hooks?: TransferWorkerHooks; env?: Record<string, string> } = {},
): Promise<ObservedWorker> {
  const config = loadConfig({ ...process.env, ...p.workerEnv, ...options.env });
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write: (s: string) =>
        lines.push(
          ...s
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l)),
        ),
    },
  );
  const prisma = createPrisma(config);
  const lockRedis = lockConnection(config);
  const connection = bullmqConnection(config);
  const lock = new FencedLock({
    redis: lockRedis,
    lockTtlMs: config.lockTtlMs,
    keyPrefix: config.lockKeyPrefix,
    logger,
  });
  const metrics = new WorkerMetrics({ instanceId: uniqueName('observed'), queueName: config.queueName });
  const faults: { kind: string; reason: string }[] = [];
  const reporter: FaultReporter = {
    permanent: (kind, reason) => faults.push({ kind, reason }),
    decided: () => undefined,
  };
  const running = startTransferWorker({
    config,
    prisma,
    lock,
    connection,
    logger,
    metrics,
    faults: reporter,
    ...(options.hooks ? { hooks: options.hooks } : {}),
  });
  await Promise.all(running.workers.map((w) => w.waitUntilReady()));
  let stopped = false;
  return {
    running,
    metrics,
    faults,
    events: (event) => lines.filter((l) => l.event === event),
    async counter(name, labels = {}) {
      const samples = await metrics.counterSamples();
      const match = samples.find(
        (s) =>
          s.name === name &&
          Object.keys(labels).length === Object.keys(s.labels).length &&
          Object.entries(labels).every(([k, v]) => s.labels[k] === v),
      );
      return match?.value ?? 0;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await running.close(true);
      await closePrisma(prisma);
      lockRedis.disconnect();
      connection.disconnect();
    },
  };
}
