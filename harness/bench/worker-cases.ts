// e2e, e2e-unbatched, e2e-traced and hot: enqueue → applied through the real worker processes
// (src/cli/worker.ts: lock, fence, idempotency). The queue is filled first through the project's
// producer, then the workers start; throughput is transfers / (last − first deciding
// transaction) read from PostgreSQL, so process start-up is not in it. e2e-traced is e2e with
// tracing on (OTEL_EXPORTER_OTLP_ENDPOINT naming a receiver in the bench that counts the spans
// and keeps none): every transfer traced, what tracing costs beside e2e in the same run. Each
// runs on the lock service of its context (`--lock`, bench-locks.ts), labelled with it.
import { OtlpReceiver } from '../tracing/otlp-receiver.ts';

import { logDirOf, type SlotTimes } from './bench-fleet.ts';
import { lockedCaseLabel, openEpochFor } from './bench-locks.ts';
import { benchBalanceMinor, benchWorkload, HOT_WALLET_RATE } from './bench-workload.ts';
import { bullmqLatencies, drainWithFleet, enqueueStamped, withFleet } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { cpuAccount, sampleIntervalMs } from './cpu-account.ts';
import { commitTimes, createdAtThroughput } from './measure.ts';
import { type Sandbox, sandboxNames, withSandbox } from './sandbox.ts';
import { bullmqState, verifyLedger } from './verify.ts';

/** Batching as the worker reads it: its default (or --batch-max/--batch-wait-ms), or off. */
export type Batching = 'default' | 'off';

/** The environment of a real worker process of a case. */
export function workerEnv(ctx: CaseContext, sandbox: Sandbox, batching: Batching): Record<string, string> {
  const env: Record<string, string> = {
    DATABASE_URL: sandbox.requireDatabaseUrl(),
    REDIS_URL: ctx.config.redisUrl,
    QUEUE_NAME: sandbox.names.queue,
    LOCK_KEY_PREFIX: sandbox.names.keyPrefix,
    WORKER_CONCURRENCY: String(ctx.options.concurrency),
    LOG_LEVEL: 'warn',
    TRANSFERS_UNSAFE: '',
    TRANSFERS_ALLOW_UNSAFE: '',
    // Untraced, whatever the bench's own environment says (e2e-traced names its receiver).
    OTEL_EXPORTER_OTLP_ENDPOINT: '',
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
    ...ctx.locks.env(ctx.lock, sandbox.requireDatabaseUrl()),
  };
  if (batching === 'off') {
    env.TRANSFER_BATCH_MAX = '1';
  } else {
    if (ctx.options.batchMax !== null) env.TRANSFER_BATCH_MAX = String(ctx.options.batchMax);
    if (ctx.options.batchWaitMs !== null) env.TRANSFER_BATCH_WAIT_MS = String(ctx.options.batchWaitMs);
  }
  return env;
}

export function operationPrefixOf(run: number): string {
  return `r${run}-`;
}

export async function runWorkerCase(ctx: CaseContext): Promise<CaseRunResult> {
  const { options, caseName, run } = ctx;
  if (caseName !== 'e2e' && caseName !== 'e2e-unbatched' && caseName !== 'e2e-traced' && caseName !== 'hot') {
    throw new Error(`runWorkerCase cannot run ${caseName}`);
  }
  const operationPrefix = operationPrefixOf(run);
  const wires = benchWorkload({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    hot: caseName === 'hot',
    operationPrefix,
  });
  const names = sandboxNames(ctx.runId, caseName, run, ctx.lock);
  const label = lockedCaseLabel(caseName, ctx.lock);
  ctx.progress.begin(run, options.runs, label, `database ${names.database}, queue ${names.queue}`);
  const sink = caseName === 'e2e-traced' ? await OtlpReceiver.start({ keep: false }) : null;
  try {
    return await runWorkerCaseIn(ctx, names, wires, operationPrefix, sink);
  } finally {
    await sink?.close();
  }
}

async function runWorkerCaseIn(
  ctx: CaseContext,
  names: ReturnType<typeof sandboxNames>,
  wires: ReturnType<typeof benchWorkload>,
  operationPrefix: string,
  sink: OtlpReceiver | null,
): Promise<CaseRunResult> {
  const { options, config, caseName, run } = ctx;
  const label = lockedCaseLabel(caseName, ctx.lock);
  return withSandbox(
    {
      config,
      names,
      wallets: options.wallets,
      balanceMinor: benchBalanceMinor(options.transfers),
      withQueue: true,
    },
    async (sandbox) => {
      const queue = sandbox.requireQueue();
      await openEpochFor(sandbox.requirePool(), ctx.lock, `bench ${ctx.runId} ${label} run ${run}`);
      const enqueued = await enqueueStamped(queue, wires, config.transferAmountMax);
      ctx.progress.note(`${wires.length} transfers enqueued; starting ${options.workers} workers`);
      let slots: SlotTimes | null = null;
      const { processes, wallMs, cpuSamples } = await withFleet(
        {
          count: options.workers,
          env: {
            ...workerEnv(ctx, sandbox, caseName === 'e2e-unbatched' ? 'off' : 'default'),
            ...(sink === null ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint }),
          },
          logDir: logDirOf(ctx.logRoot, label, run),
          cpuProfDir: options.cpuProfDir === null ? null : logDirOf(options.cpuProfDir, label, run),
          workerEntry: ctx.config.workerEntry,
        },
        { ...sandbox.cpuServers(sampleIntervalMs(options.quick)), etcdPids: ctx.locks.etcdPids(ctx.lock) },
        async (fleet) => {
          await drainWithFleet(ctx, queue, fleet, wires.length);
          slots = await fleet.slotTimes();
        },
      );
      const slotTimes = slots as SlotTimes | null;

      const commits = await commitTimes(sandbox.requirePool(), operationPrefix);
      const latencyMs = await bullmqLatencies(sandbox.connection, queue, enqueued, commits);
      const verification = await verifyLedger(sandbox, operationPrefix, wires.length, await bullmqState(queue));
      return {
        case: caseName,
        lock: ctx.lock,
        run,
        ...createdAtThroughput(commits),
        wallMs,
        latencyMs,
        processes,
        cpu: cpuAccount(cpuSamples, [...commits.values()]),
        verification,
        notes: workerCaseNotes(ctx, sink, wires.length, slotTimes),
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}

/** The case's own figures beside the common ones. */
function workerCaseNotes(
  ctx: CaseContext,
  sink: OtlpReceiver | null,
  transfers: number,
  slotTimes: SlotTimes | null,
): CaseRunResult['notes'] {
  const { caseName, options } = ctx;
  return {
    hotWalletShare: caseName === 'hot' ? HOT_WALLET_RATE : 0,
    // Spans the traced case's workers exported (by the time the fleet stopped), per transfer.
    spansPerTransfer: sink === null ? null : Math.round((sink.count / transfers) * 100) / 100,
    transferBatchMax: caseName === 'e2e-unbatched' ? 1 : options.batchMax,
    // Of the time jobs held worker slots, the share spent waiting for a wallet lease.
    slotSeconds: slotTimes === null ? null : Math.round(slotTimes.slotSeconds * 1000) / 1000,
    lockWaitSeconds: slotTimes === null ? null : Math.round(slotTimes.lockWaitSeconds * 1000) / 1000,
    lockWaitShareOfSlotTime:
      slotTimes === null || slotTimes.slotSeconds === 0
        ? null
        : Math.round((slotTimes.lockWaitSeconds / slotTimes.slotSeconds) * 10_000) / 10_000,
  };
}
