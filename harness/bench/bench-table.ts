// The table printed on stdout, as Markdown so it can be quoted in the README as printed:
// one row per case (medians over the runs), then the ratios the acceptance reads. With several
// lock services (`--lock`) each table gets a lock column, and the lock table sets them side by side.
import { SPLIT_LEGS } from './bench-options.ts';
import {
  type CaseSummary,
  intakePostgresMsPerTransfer,
  type MedianPercentiles,
  onRedis,
  type Ratios,
  SYSTEM_PARTS,
} from './summary.ts';

/** Whether the cases ran on more than one lock service (or on one but Redis): then the tables name it. */
export function showsLocks(summaries: readonly CaseSummary[]): boolean {
  return summaries.some((s) => !onRedis(s));
}

/** A Markdown cell of a summary's lock service ('' for a case that takes no lock). */
function lockCell(s: CaseSummary): string {
  return ` ${s.lock ?? ''} |`;
}

function ms(p: MedianPercentiles | null): string {
  if (p === null) return '';
  const f = (v: number | null) => (v === null ? '?' : v >= 100 ? v.toFixed(0) : v.toFixed(1));
  return `${f(p.p50)} / ${f(p.p95)} / ${f(p.p99)}`;
}

function num(v: number | null, places = 0): string {
  return v === null ? '' : v.toLocaleString('en-US', { minimumFractionDigits: places, maximumFractionDigits: places });
}

/** The latency a case is best described by, and what it is. */
function mainLatency(s: CaseSummary): { label: string; value: MedianPercentiles | null } {
  if (s.latencyMs.call !== null) return { label: 'call', value: s.latencyMs.call };
  if (s.latencyMs.enqueueToCommit !== null) return { label: 'enqueue→commit', value: s.latencyMs.enqueueToCommit };
  return { label: 'enqueue→done', value: s.latencyMs.enqueueToAnswer };
}

export function formatTable(summaries: readonly CaseSummary[], r: Ratios, runs: number): string {
  const dbCeiling = summaries.find((s) => s.case === 'db-ceiling')?.throughputPerS.median ?? null;
  const locks = showsLocks(summaries);
  const lines = [
    `| case |${locks ? ' lock |' : ''} transfers/s (median of ${runs}) | min – max | × db-ceiling | latency p50 / p95 / p99 (ms) | of | worker: taken → commit p50 / p95 / p99 (ms) | peak RSS per process (MiB) | verified |`,
    `|---|${locks ? '---|' : ''}---:|---:|---:|---:|---|---:|---:|---|`,
  ];
  for (const s of summaries) {
    const t = s.throughputPerS;
    const main = mainLatency(s);
    const vsCeiling = t.median !== null && dbCeiling !== null && dbCeiling > 0 ? (t.median / dbCeiling).toFixed(2) : '';
    lines.push(
      `| ${s.case} |${locks ? lockCell(s) : ''} ${num(t.median)} | ${t.min === null ? '' : `${num(t.min)} – ${num(t.max)}`} | ${vsCeiling} | ` +
        `${ms(main.value)} | ${main.value === null ? '' : main.label} | ${ms(s.latencyMs.activeToCommit)} | ${num(s.peakRssMbMax, 1)} | ` +
        `${s.verified ? 'yes' : 'NO'} |`,
    );
  }
  const show = (v: number | null, suffix = '') => (v === null ? 'n/a (case not run)' : `${v}${suffix}`);
  lines.push(
    '',
    `e2eToDbCeilingRatio          ${show(r.e2eToDbCeilingRatio)}`,
    `e2eToFasterCeilingRatio      ${show(r.e2eToFasterCeilingRatio)}`,
    `singleToFirstDecisionRatio   ${show(r.singleToFirstDecisionRatio)}`,
    `singleToFirstPairedRatio     ${show(r.singleToFirstPairedRatio)}`,
    `e2eUnbatchedToDbCeilingRatio ${show(r.e2eUnbatchedToDbCeilingRatio)}`,
    `e2eToSeedDesignRatio         ${show(r.e2eToSeedDesignRatio)}`,
    `e2eToPeerRatio               ${show(r.e2eToPeerRatio)}`,
    `hotToUniformRatio            ${show(r.hotToUniformRatio)}`,
    `e2eToQueueCeilingRatio       ${show(r.e2eToQueueCeilingRatio)}`,
    `lowRateBatchingAddedP50Ms    ${show(r.lowRateBatchingAddedP50Ms, ' ms')}`,
    `lowRateBatchingAddedP95Ms    ${show(r.lowRateBatchingAddedP95Ms, ' ms')}`,
    `slot time waiting for locks  e2e ${show(r.e2eLockWaitShareOfSlotTime)}, hot ${show(r.hotLockWaitShareOfSlotTime)}`,
    `e2eIntake1ToE2eRatio         ${show(r.e2eIntake1ToE2eRatio)}`,
    `e2eIntake100ToE2eRatio       ${show(r.e2eIntake100ToE2eRatio)}`,
    `e2eTracedToE2eRatio          ${show(r.e2eTracedToE2eRatio)}`,
    `paymentCostToTransferRatio   ${show(r.paymentCostToTransferRatio)}`,
    `splitCostToTransferRatio     ${show(r.splitCostToTransferRatio)}`,
    `paymentsToE2eRatio           ${show(r.paymentsToE2eRatio)}`,
    `splitsToE2eRatio             ${show(r.splitsToE2eRatio)}`,
  );
  for (const [lock, x] of Object.entries(r.e2eToRedisRatio ?? {})) {
    lines.push(
      `e2eToRedisRatio ${`${lock}`.padEnd(12)} transfers/s ${show(x.throughputRatio)}, machine CPU ${show(x.machineCpuRatio)}, system CPU ${show(x.systemCpuRatio)}`,
    );
  }
  return lines.join('\n');
}

/**
 * Where each case's machine time went: CPU milliseconds per transfer by part (medians over the
 * runs), and the machine's total against db-ceiling's. On a saturated machine throughput is
 * cores ÷ CPU per transfer, so that column is close to the inverse of "× db-ceiling" above; it
 * moves with the machine's hour less than throughput does, and it says which part a case pays for.
 */
export function formatCpuTable(summaries: readonly CaseSummary[]): string | null {
  const withCpu = summaries.filter((s) => s.cpuMsPerTransfer !== null);
  if (withCpu.length === 0) return null;
  const ceiling = summaries.find((s) => s.case === 'db-ceiling')?.cpuMsPerTransfer?.machine ?? null;
  const f = (v: number | null | undefined) => (v === null || v === undefined ? '' : v.toFixed(3));
  // The lock and etcd columns only when a case ran on another service than Redis: the default table is as it was.
  const locks = showsLocks(summaries);
  const etcd = withCpu.some((s) => s.cpuMsPerTransfer?.etcd != null);
  const lines = [
    `| case |${locks ? ' lock |' : ''} CPU ms per transfer: processes | relays | postgres | redis |${etcd ? ' etcd |' : ''} bench | other | machine | machine × db-ceiling | busy cores |`,
    `|---|${locks ? '---|' : ''}---:|---:|---:|---:|${etcd ? '---:|' : ''}---:|---:|---:|---:|---:|`,
  ];
  for (const s of withCpu) {
    const c = s.cpuMsPerTransfer;
    if (c === null) continue;
    const vs = c.machine !== null && ceiling !== null && ceiling > 0 ? (c.machine / ceiling).toFixed(2) : '';
    lines.push(
      `| ${s.case} |${locks ? lockCell(s) : ''} ${f(c.processes)} | ${f(c.relays)} | ${f(c.postgres)} | ${f(c.redis)} |${etcd ? ` ${f(c.etcd)} |` : ''} ${f(c.bench)} | ${f(c.other)} | ${f(c.machine)} | ${vs} | ${s.machineCores === null ? '' : s.machineCores.toFixed(2)} |`,
    );
  }
  const intake = formatIntakeCpu(summaries.filter(onRedis));
  if (intake !== null) lines.push('', intake);
  return lines.join('\n');
}

/**
 * `--lock`: each case of LOCK_MODES on each lock service beside the same case on Redis. The
 * medians of the rows, and the ratios to Redis taken run by run (lockToRedisRatios). Null when
 * the cases ran on Redis alone.
 */
export function formatLockTable(summaries: readonly CaseSummary[], r: Ratios): string | null {
  const locked = summaries.filter((s) => s.lock !== undefined);
  if (!showsLocks(summaries) || locked.length === 0) return null;
  const f = (v: number | null | undefined, places: number) =>
    v === null || v === undefined
      ? ''
      : v.toLocaleString('en-US', { minimumFractionDigits: places, maximumFractionDigits: places });
  const system = (s: CaseSummary) => {
    const c = s.cpuMsPerTransfer;
    return c === null || c.processes === null ? null : SYSTEM_PARTS.reduce((sum, p) => sum + (c[p] ?? 0), 0);
  };
  const lines = [
    `| case | lock | transfers/s | × redis | CPU ms per transfer: machine | × redis | system (${SYSTEM_PARTS.join(' + ')}) | × redis |`,
    '|---|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of locked) {
    const x = r.lockToRedisRatios.find((q) => q.case === s.case && q.lock === s.lock);
    const one = s.lock === 'redis' ? 1 : null;
    lines.push(
      `| ${s.case} | ${s.lock} | ${f(s.throughputPerS.median, 0)} | ${f(x?.throughputRatio ?? one, 3)} | ${f(s.cpuMsPerTransfer?.machine, 3)} | ${f(x?.machineCpuRatio ?? one, 3)} | ${f(system(s), 3)} | ${f(x?.systemCpuRatio ?? one, 3)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * The intake cases' producer phase (requests committed before the pipeline starts), per request,
 * and the PostgreSQL CPU per transfer of each intake case against e2e's: what the intake adds.
 */
export function formatIntakeCpu(summaries: readonly CaseSummary[]): string | null {
  const intake = summaries.filter((s) => s.case === 'e2e-intake-1' || s.case === 'e2e-intake-100');
  if (intake.length === 0) return null;
  const f = (v: number | null | undefined) => (v === null || v === undefined ? '?' : v.toFixed(3));
  const e2e = summaries.find((s) => s.case === 'e2e')?.cpuMsPerTransfer?.postgres ?? null;
  const lines = [
    '| intake case | producer phase CPU ms per request: postgres | producer (bench) | machine | postgres per transfer: pipeline + producer = total | e2e | extra |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const s of intake) {
    const p = s.producerCpuMsPerTransfer;
    const total = intakePostgresMsPerTransfer(s);
    const extra = total === null || e2e === null ? null : total - e2e;
    lines.push(
      `| ${s.case} | ${f(p?.postgres)} | ${f(p?.bench)} | ${f(p?.machine)} | ${f(s.cpuMsPerTransfer?.postgres)} + ${f(p?.postgres)} = ${f(total)} | ${f(e2e)} | ${f(extra)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * e2e-payments beside e2e: each part's operations/s and machine CPU ms per operation (medians
 * over the runs), a payment (hold + capture) as one row, and each against e2e's transfer; the
 * ratios of the last column are per run against that run's e2e (see paymentRatios), the others
 * medians of the rows above. Null when e2e-payments did not run.
 */
export function formatPaymentsTable(summaries: readonly CaseSummary[], r: Ratios): string | null {
  const part = (c: string) => summaries.find((s) => s.case === c && onRedis(s));
  const hold = part('e2e-payments-hold');
  const capture = part('e2e-payments-capture');
  const split = part('e2e-payments-split');
  if (hold === undefined && capture === undefined && split === undefined) return null;
  const e2e = part('e2e');
  const f = (v: number | null | undefined, places: number) =>
    v === null || v === undefined
      ? ''
      : v.toLocaleString('en-US', { minimumFractionDigits: places, maximumFractionDigits: places });
  const machine = (s: CaseSummary | undefined) => s?.cpuMsPerTransfer?.machine ?? null;
  const lines = [
    '| e2e-payments | operations/s | payments/s | machine CPU ms per operation | per payment | × e2e transfer (same run) |',
    '|---|---:|---:|---:|---:|---:|',
    `| e2e (plain transfer) | ${f(e2e?.throughputPerS.median, 0)} | | ${f(machine(e2e), 3)} | | |`,
    `| hold | ${f(hold?.throughputPerS.median, 0)} | | ${f(machine(hold), 3)} | | |`,
    `| capture (whole) | ${f(capture?.throughputPerS.median, 0)} | | ${f(machine(capture), 3)} | | |`,
    `| payment = hold + capture | | ${f(r.paymentsPerS, 0)} | | ${f(r.machineMsPerPayment, 3)} | cost ${f(r.paymentCostToTransferRatio, 3)}, rate ${f(r.paymentsToE2eRatio, 3)} |`,
    `| split (${SPLIT_LEGS} legs) | ${f(split?.throughputPerS.median, 0)} | | ${f(machine(split), 3)} | | cost ${f(r.splitCostToTransferRatio, 3)}, rate ${f(r.splitsToE2eRatio, 3)} |`,
  ];
  return lines.join('\n');
}
