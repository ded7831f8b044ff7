// queue-ceiling: the same jobs (same producer, same job options) through the same number of
// processes and concurrency, each job a no-op: how fast BullMQ and Redis alone go here.
// Throughput = jobs / (last − first finishedOn), BullMQ's completion times.
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { logDirOf } from './bench-fleet.ts';
import { benchWorkload } from './bench-workload.ts';
import { bullmqLatencies, enqueueStamped, finishTimes, runFleetUntilDrained } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { cpuAccount, sampleIntervalMs } from './cpu-account.ts';
import { spanOf } from './measure.ts';
import { sandboxNames, withSandbox } from './sandbox.ts';
import { bullmqState, verifyJobs } from './verify.ts';
import { operationPrefixOf } from './worker-cases.ts';

export const NOOP_WORKER_ENTRY = join(PROJECT_ROOT, 'harness', 'bench', 'noop-worker.ts');

export async function runQueueCeiling(ctx: CaseContext): Promise<CaseRunResult> {
  const { options, config, run } = ctx;
  const wires = benchWorkload({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    hot: false,
    operationPrefix: operationPrefixOf(run),
  });
  const names = sandboxNames(ctx.runId, 'queue-ceiling', run);
  ctx.progress.begin(run, options.runs, 'queue-ceiling', `queue ${names.queue} (no database)`);
  return withSandbox(
    { config, names, wallets: 0, balanceMinor: 0n, withQueue: true },
    async (sandbox) => {
      const queue = sandbox.requireQueue();
      const enqueued = await enqueueStamped(queue, wires, config.transferAmountMax);
      const { processes, wallMs, cpuSamples } = await runFleetUntilDrained(
        ctx,
        queue,
        {
          count: options.workers,
          entry: NOOP_WORKER_ENTRY,
          env: {
            REDIS_URL: config.redisUrl,
            QUEUE_NAME: names.queue,
            WORKER_CONCURRENCY: String(options.concurrency),
            LOG_LEVEL: 'warn',
          },
          logDir: logDirOf(ctx.logRoot, 'queue-ceiling', run),
          cpuProfDir: options.cpuProfDir === null ? null : logDirOf(options.cpuProfDir, 'queue-ceiling', run),
          workerEntry: ctx.config.workerEntry,
        },
        sandbox.cpuServers(sampleIntervalMs(options.quick)),
        wires.length,
      );
      const finished = await finishTimes(sandbox.connection, queue, [...enqueued.jobIds.values()]);
      const span = spanOf(finished);
      return {
        case: 'queue-ceiling',
        run,
        transfers: span?.count ?? 0,
        throughputPerS: span?.perS ?? null,
        spanMs: span?.spanMs ?? null,
        spanSource: 'job.finishedOn',
        wallMs,
        latencyMs: await bullmqLatencies(sandbox.connection, queue, enqueued, null),
        processes,
        cpu: cpuAccount(cpuSamples, finished),
        verification: verifyJobs(wires.length, await bullmqState(queue)),
        notes: {},
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}
