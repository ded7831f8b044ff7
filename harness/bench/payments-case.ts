// e2e-payments: the payment kinds through the real worker processes, measured the way e2e
// measures transfers, in one database and queue, in three parts one after the other:
//   e2e-payments-hold     e2e's transfers of the run, each as a hold (same payer, payee, amount);
//   e2e-payments-capture  the capture of each hold, whole: enqueued only once every hold is decided;
//   e2e-payments-split    a split of SPLIT_LEGS legs from each of e2e's payers.
// Each part is e2e once more: its queue filled first through the project's producer
// (enqueueOperations), then the same worker fleet starts (same count, concurrency and
// environment), drains it and stops; its throughput is operations / (last − first deciding
// transaction) and its CPU account is taken over the same span, so each part's figures are
// e2e's per operation. Between the parts the workers are stopped, the part is verified and the
// completed jobs are removed, so every part starts on an empty queue, as e2e does.
// A payment is a hold and its capture: its cost is the two parts' CPU per operation added, its
// rate the payments over the two spans added (summary.ts holds the ratios to e2e).

import type { OperationWire } from '../../src/ledger/transfer-request.ts';
import { logDirOf, type SlotTimes } from './bench-fleet.ts';
import { PAYMENT_PART_KINDS, PAYMENT_PARTS, type PaymentPart, SPLIT_LEGS } from './bench-options.ts';
import {
  BENCH_HOLD_EXPIRES_IN_MS,
  benchBalanceMinor,
  benchPayments,
  paymentPrefixesOf,
  paymentsFunded,
} from './bench-workload.ts';
import { bullmqLatencies, drainWithFleet, enqueueOperationsStamped, withFleet } from './bullmq-drive.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { cpuAccount, sampleIntervalMs } from './cpu-account.ts';
import { commitTimes, createdAtThroughput } from './measure.ts';
import { type Sandbox, sandboxNames, withSandbox } from './sandbox.ts';
import { bullmqState, queueProblems, verifyLedger, verifyPaymentsPart } from './verify.ts';
import { operationPrefixOf, workerEnv } from './worker-cases.ts';

const PART_NOUNS: Readonly<Record<PaymentPart, string>> = {
  'e2e-payments-hold': 'holds',
  'e2e-payments-capture': 'captures',
  'e2e-payments-split': 'splits',
};

interface PartChecks {
  readonly problems: readonly string[];
  /** Operations of the part recorded as applied. */
  readonly applied: number;
  readonly invariantsHeld: boolean;
}

const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;

/**
 * Payments per second of one run: a payment is a hold then its capture, so its time is the two
 * parts' spans added. Null unless both parts have a span.
 */
export function paymentsPerS(payments: number, holdSpanMs: number | null, captureSpanMs: number | null): number | null {
  if (holdSpanMs === null || captureSpanMs === null || holdSpanMs + captureSpanMs <= 0) return null;
  return round((payments * 1000) / (holdSpanMs + captureSpanMs), 1);
}

/** Machine CPU ms of one payment: its hold's and its capture's, per operation. Null when either is missing. */
export function paymentMachineMs(hold: CaseRunResult | undefined, capture: CaseRunResult | undefined): number | null {
  const h = hold?.cpu?.msPerTransfer.machine ?? null;
  const c = capture?.cpu?.msPerTransfer.machine ?? null;
  return h === null || c === null ? null : round(h + c, 3);
}

/** One part: fill the queue, run the fleet until it drained, measure and verify, empty the completed set. */
async function runPart(
  ctx: CaseContext,
  sandbox: Sandbox,
  part: PaymentPart,
  wires: readonly OperationWire[],
  verify: (sent: number) => Promise<PartChecks>,
): Promise<CaseRunResult> {
  const { options, config, run } = ctx;
  const partCtx: CaseContext = { ...ctx, caseName: part };
  const noun = PART_NOUNS[part];
  ctx.progress.begin(run, options.runs, part, `database ${sandbox.names.database}, queue ${sandbox.names.queue}`);
  const queue = sandbox.requireQueue();
  const enqueued = await enqueueOperationsStamped(queue, wires, config.transferAmountMax, config.holdExpiryMaxMs);
  ctx.progress.note(`${wires.length} ${noun} enqueued; starting ${options.workers} workers`);
  let slots: SlotTimes | null = null;
  const { processes, wallMs, cpuSamples } = await withFleet(
    {
      count: options.workers,
      env: workerEnv(ctx, sandbox, 'default'),
      logDir: logDirOf(ctx.logRoot, part, run),
      cpuProfDir: options.cpuProfDir === null ? null : logDirOf(options.cpuProfDir, part, run),
      workerEntry: config.workerEntry,
    },
    sandbox.cpuServers(sampleIntervalMs(options.quick)),
    async (fleet) => {
      await drainWithFleet(partCtx, queue, fleet, wires.length);
      slots = await fleet.slotTimes();
    },
  );
  const slotTimes = slots as SlotTimes | null;
  const prefix = paymentPrefixesOf(operationPrefixOf(run))[PAYMENT_PART_KINDS[part]];
  const commits = await commitTimes(sandbox.requirePool(), prefix);
  const latencyMs = await bullmqLatencies(sandbox.connection, queue, enqueued, commits);
  const state = await bullmqState(queue);
  const checks = await verify(wires.length);
  const problems = [...checks.problems, ...queueProblems(state, wires.length)];
  // The next part starts on an empty queue, as e2e does (and the completed set stays in its bound).
  await queue.clean(0, 0, 'completed');
  return {
    case: part,
    run,
    ...createdAtThroughput(commits),
    wallMs,
    latencyMs,
    processes,
    cpu: cpuAccount(cpuSamples, [...commits.values()]),
    verification: {
      ok: problems.length === 0,
      expected: wires.length,
      applied: checks.applied,
      notApplied: wires.length - checks.applied,
      failedJobs: state.failedJobs,
      jobsLeft: state.jobsLeft,
      invariantsHeld: checks.invariantsHeld,
      problems,
    },
    notes: {
      operations: wires.length,
      transferBatchMax: options.batchMax,
      slotSeconds: slotTimes === null ? null : round(slotTimes.slotSeconds, 3),
      lockWaitSeconds: slotTimes === null ? null : round(slotTimes.lockWaitSeconds, 3),
      lockWaitShareOfSlotTime:
        slotTimes === null || slotTimes.slotSeconds === 0
          ? null
          : round(slotTimes.lockWaitSeconds / slotTimes.slotSeconds, 4),
    },
  } satisfies CaseRunResult;
}

/**
 * The three parts of e2e-payments, in order, in one sandbox; a part that fails its checks ends
 * the case there (its result is the last one returned, and the bench stops on it).
 */
export async function runPaymentsCase(ctx: CaseContext): Promise<CaseRunResult[]> {
  const { options, config, run } = ctx;
  const operationPrefix = operationPrefixOf(run);
  const openingMinor = benchBalanceMinor(options.transfers);
  const holdExpiresInMs = Math.min(BENCH_HOLD_EXPIRES_IN_MS, config.holdExpiryMaxMs);
  const payments = benchPayments({
    transfers: options.transfers,
    wallets: options.wallets,
    run,
    operationPrefix,
    holdExpiresInMs,
  });
  if (!paymentsFunded(payments, openingMinor)) {
    throw new Error(`e2e-payments: a payer cannot pay its holds and splits from ${openingMinor}; use more --wallets`);
  }
  const wiresOf: Readonly<Record<PaymentPart, readonly OperationWire[]>> = {
    'e2e-payments-hold': payments.holds,
    'e2e-payments-capture': payments.captures,
    'e2e-payments-split': payments.splits,
  };
  return withSandbox(
    {
      config,
      names: sandboxNames(ctx.runId, 'e2e-payments', run),
      wallets: options.wallets,
      balanceMinor: openingMinor,
      withQueue: true,
    },
    async (sandbox) => {
      const results: CaseRunResult[] = [];
      let sent = 0;
      for (const part of PAYMENT_PARTS) {
        const result = await runPart(ctx, sandbox, part, wiresOf[part], async (count) => {
          sent += count;
          // Every operation sent so far applied, nothing else recorded, the invariants hold.
          const ledger = await verifyLedger(sandbox, operationPrefix, sent, null);
          const own = await verifyPaymentsPart(sandbox, part, payments, operationPrefix, options.wallets, openingMinor);
          return {
            problems: [...ledger.problems, ...own.problems],
            applied: own.applied,
            invariantsHeld: ledger.invariantsHeld === true,
          };
        });
        results.push(withPartNotes(result, part, results, { holdExpiresInMs }));
        const t = result.throughputPerS;
        ctx.progress.note(
          `${t === null ? '' : `${Math.round(t)} ${PART_NOUNS[part]}/s, `}verified: ${result.verification.ok ? 'yes' : result.verification.problems.join('; ')}`,
        );
        if (!result.verification.ok) break;
      }
      return results;
    },
    (err) => ctx.progress.note(`cleanup failed: ${err instanceof Error ? err.message : String(err)}`),
  );
}

/** Each part's own notes: the holds' expiry, the run's payments/s and machine ms per payment, the legs. */
function withPartNotes(
  result: CaseRunResult,
  part: PaymentPart,
  earlier: readonly CaseRunResult[],
  settings: { readonly holdExpiresInMs: number },
): CaseRunResult {
  const extra: Record<string, number | null> = {};
  if (part === 'e2e-payments-hold') extra.holdExpiresInMs = settings.holdExpiresInMs;
  if (part === 'e2e-payments-capture') {
    const hold = earlier.find((r) => r.case === 'e2e-payments-hold');
    extra.paymentsPerS = paymentsPerS(result.transfers, hold?.spanMs ?? null, result.spanMs);
    extra.machineMsPerPayment = paymentMachineMs(hold, result);
  }
  if (part === 'e2e-payments-split') extra.splitLegs = SPLIT_LEGS;
  return { ...result, notes: { ...result.notes, ...extra } };
}
