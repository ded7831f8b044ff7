// low-rate and low-rate-unbatched: a paced, open-loop load through the real workers, to show
// what batching costs a quiet system. The workers start first and are warmed up (a few
// transfers, drained), then one transfer is enqueued every 1/rate s with the project's
// producer (enqueueTransfer, one add each) whatever the answers, and enqueue→commit latency is
// measured on the paced transfers only.
import type { TransferWire } from '../../src/ledger/transfer-request.ts';
import { enqueueTransfer } from '../../src/queue/producer.ts';
import { logDirOf } from './bench-fleet.ts';
import { benchBalanceMinor, benchWorkload } from './bench-workload.ts';
import { bullmqLatencies, drainWithFleet, emptyEnqueued, enqueueStamped, withFleet } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { commitTimes } from './measure.ts';
import { sandboxNames, withSandbox } from './sandbox.ts';
import { bullmqState, verifyLedger } from './verify.ts';
import { operationPrefixOf, workerEnv } from './worker-cases.ts';

/** Warm-up transfers per worker slot: connections open, scripts loaded, code compiled. */
export const WARMUP_PER_SLOT = 2;

export async function runLowRate(ctx: CaseContext): Promise<CaseRunResult> {
  const { options, config, caseName, run } = ctx;
  if (caseName !== 'low-rate' && caseName !== 'low-rate-unbatched')
    throw new Error(`runLowRate cannot run ${caseName}`);
  const paced = options.lowRatePerS * options.lowRateS;
  const warmup = options.workers * options.concurrency * WARMUP_PER_SLOT;
  const operationPrefix = operationPrefixOf(run);
  const wires = benchWorkload({
    transfers: warmup + paced,
    wallets: options.wallets,
    run,
    hot: false,
    operationPrefix,
  });
  const warmWires = wires.slice(0, warmup);
  const pacedWires = wires.slice(warmup);
  const names = sandboxNames(ctx.runId, caseName, run);
  ctx.progress.begin(
    run,
    options.runs,
    caseName,
    `${paced} transfers at ${options.lowRatePerS}/s after ${warmup} warm-up transfers; database ${names.database}`,
  );

  return withSandbox(
    {
      config,
      names,
      wallets: options.wallets,
      balanceMinor: benchBalanceMinor(wires.length),
      withQueue: true,
    },
    async (sandbox) => {
      const queue = sandbox.requireQueue();
      const pacedEnqueued = emptyEnqueued();
      let sentFirstMs = 0;
      let sentLastMs = 0;
      const { processes, wallMs } = await withFleet(
        {
          count: options.workers,
          env: workerEnv(ctx, sandbox, caseName === 'low-rate-unbatched' ? 'off' : 'default'),
          logDir: logDirOf(ctx.logRoot, caseName, run),
          cpuProfDir: null,
          workerEntry: ctx.config.workerEntry,
          // Paced, the machine is mostly idle: its CPU per transfer says little, and is not taken.
        },
        null,
        async (fleet) => {
          await enqueueStamped(queue, warmWires, config.transferAmountMax);
          await drainWithFleet(ctx, queue, fleet, warmup);
          ctx.progress.note(`warmed up; pacing ${paced} transfers at ${options.lowRatePerS}/s`);
          const sent = await pace(
            pacedWires,
            options.lowRatePerS,
            ctx.signal,
            async (wire) => {
              const stampMs = Date.now();
              const added = await enqueueTransfer(queue, wire, config.transferAmountMax);
              pacedEnqueued.enqueuedAtMs.set(added.operationId, stampMs);
              pacedEnqueued.jobIds.set(added.operationId, added.jobId);
            },
            (done) => {
              fleet.sampleMemory();
              ctx.progress.tick(done, paced, 'sent');
            },
          );
          sentFirstMs = sent.firstMs;
          sentLastMs = sent.lastMs;
          await drainWithFleet(ctx, queue, fleet, wires.length);
        },
      );

      const commits = await commitTimes(sandbox.requirePool(), operationPrefix);
      const latencyMs = await bullmqLatencies(sandbox.connection, queue, pacedEnqueued, commits);
      const verification = await verifyLedger(sandbox, operationPrefix, wires.length, await bullmqState(queue));
      const sentSpanMs = sentLastMs - sentFirstMs;
      return {
        case: caseName,
        run,
        transfers: pacedEnqueued.jobIds.size,
        throughputPerS: null,
        spanMs: null,
        spanSource: 'transfers.created_at',
        wallMs,
        latencyMs,
        processes,
        cpu: null,
        verification,
        notes: {
          targetRatePerS: options.lowRatePerS,
          achievedRatePerS:
            paced > 1 && sentSpanMs > 0 ? Math.round(((paced - 1) * 1000 * 10) / sentSpanMs) / 10 : null,
          warmupTransfers: warmup,
          transferBatchMax: caseName === 'low-rate-unbatched' ? 1 : options.batchMax,
        },
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}

/**
 * Calls `send` for wire i at start + i/rate (open loop: a slow answer does not delay the next
 * send; when the bench falls behind it sends at once until it has caught up). Resolves when
 * every send has resolved, with the Date.now() of the first and last send.
 */
async function pace(
  wires: readonly TransferWire[],
  ratePerS: number,
  signal: AbortSignal,
  send: (wire: TransferWire) => Promise<void>,
  onSent: (done: number) => void,
): Promise<{ firstMs: number; lastMs: number }> {
  const intervalMs = 1000 / ratePerS;
  const startMs = performance.now();
  const pending: Promise<void>[] = [];
  const errors: unknown[] = [];
  let firstMs = 0;
  let lastMs = 0;
  for (let i = 0; i < wires.length; i++) {
    if (signal.aborted) throw new Error('interrupted');
    const waitMs = startMs + i * intervalMs - performance.now();
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs));
    const now = Date.now();
    if (i === 0) firstMs = now;
    lastMs = now;
    // Failures are collected, not left unhandled while the loop still waits for the next slot.
    pending.push(
      send(wires[i] as TransferWire).then(
        () => onSent(i + 1),
        (err: unknown) => {
          errors.push(err);
        },
      ),
    );
  }
  await Promise.all(pending);
  if (errors.length > 0) throw errors[0];
  return { firstMs, lastMs };
}
