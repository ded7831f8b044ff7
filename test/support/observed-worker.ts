// An in-process worker of a test pipeline, built as src/queue/run-worker.ts builds one, whose log
// lines, counters and fault reports the test reads: for the tests of what a worker records about
// a job (permanent failures, give-ups), where the pipeline's own workers log nothing.
import { pino } from 'pino';
import { loadConfig } from '../../src/config/config.ts';
import type { WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import type { FaultReporter, TransferWorker, TransferWorkerHooks } from '../../src/queue/transfer-worker.ts';
import { startInProcessWorker } from './in-process-worker.ts';
import type { Pipeline } from './pipeline.ts';

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
  const faults: { kind: string; reason: string }[] = [];
  const reporter: FaultReporter = {
    permanent: (kind, reason) => faults.push({ kind, reason }),
    decided: () => undefined,
  };
  const worker = startInProcessWorker(config, logger, 'observed', {
    faults: reporter,
    ...(options.hooks ? { hooks: options.hooks } : {}),
  });
  const { running, metrics } = worker;
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
      await worker.close();
    },
  };
}
