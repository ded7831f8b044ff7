// The shape of db-ceiling and seed-design: the bench process itself sends the transfers, one
// per commit, through workers × lanes connections (one lane each, closed loop), no queue,
// no lock. Throughput uses the same span as the queue cases (transfers.created_at), so the
// ratios compare like with like; each call's round trip is reported as its latency.
import { type TransferRequest, validateTransferRequest } from '../../src/ledger/transfer-request.ts';
import { benchBalanceMinor, benchWorkload } from './bench-workload.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { type CpuSample, cpuAccount, sampleIntervalMs, startCpuSampler } from './cpu-account.ts';
import { driveLanes } from './drive-lanes.ts';
import { commitTimes, createdAtThroughput, percentiles } from './measure.ts';
import { sandboxNames, withSandbox } from './sandbox.ts';
import { verifyLedger } from './verify.ts';
import { operationPrefixOf } from './worker-cases.ts';

/** How one lanes case applies a transfer; `open` connects all lanes before the clock starts. */
export interface LaneDriver {
  open(): Promise<void>;
  apply(request: TransferRequest): Promise<void>;
  close(): Promise<void>;
  /** Case-specific counts (retries, ...). */
  notes(): Record<string, number>;
}

export type LaneDriverFactory = (databaseUrl: string, lanes: number) => LaneDriver;

export async function runLanesCase(ctx: CaseContext, makeDriver: LaneDriverFactory): Promise<CaseRunResult> {
  const { options, config, caseName, run } = ctx;
  const lanes = options.workers * options.lanes;
  const operationPrefix = operationPrefixOf(run);
  const requests = benchWorkload({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    hot: false,
    operationPrefix,
  }).map((wire) => {
    const verdict = validateTransferRequest(wire, config.transferAmountMax);
    if (!verdict.ok) throw new Error(`bench workload produced an invalid transfer: ${verdict.reason}`);
    return verdict.request;
  });
  const names = sandboxNames(ctx.runId, caseName, run);
  ctx.progress.begin(run, options.runs, caseName, `${lanes} connections; database ${names.database}`);

  return withSandbox(
    {
      config,
      names,
      wallets: options.wallets,
      balanceMinor: benchBalanceMinor(options.transfers),
      withQueue: false,
    },
    async (sandbox) => {
      const driver = makeDriver(sandbox.requireDatabaseUrl(), lanes);
      let lanesRun: Awaited<ReturnType<typeof driveLanes>>;
      let cpuSamples: readonly CpuSample[] = [];
      try {
        await driver.open();
        // This process is the client here: its CPU is the account's `bench` part.
        const sampler = await startCpuSampler({
          pool: sandbox.pool,
          redis: null,
          intervalMs: sampleIntervalMs(options.quick),
        });
        try {
          lanesRun = await driveLanes(
            requests.length,
            lanes,
            (i) => driver.apply(requests[i] as TransferRequest),
            (done) => ctx.progress.tick(done, requests.length),
            ctx.signal,
          );
        } finally {
          cpuSamples = await sampler.stop();
        }
      } finally {
        await driver.close();
      }
      const commits = await commitTimes(sandbox.requirePool(), operationPrefix);
      return {
        case: caseName,
        run,
        ...createdAtThroughput(commits),
        wallMs: lanesRun.finishedMs - lanesRun.startedMs,
        latencyMs: {
          enqueueToCommit: null,
          enqueueToAnswer: null,
          activeToCommit: null,
          call: percentiles(lanesRun.taskMs),
        },
        processes: [],
        cpu: cpuAccount(cpuSamples, [...commits.values()]),
        verification: await verifyLedger(sandbox, operationPrefix, requests.length, null),
        notes: { connections: lanes, ...driver.notes() },
      } satisfies CaseRunResult;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}
