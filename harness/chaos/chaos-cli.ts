// `npm run chaos -- [options]`: one chaos run against private Redis and PostgreSQL instances
// (see harness/chaos/run-chaos.ts). Exit 0 only when the verdict is "as expected": every invariant holds,
// or, for a negative control, the violation was detected. SIGINT/SIGTERM stop the run and
// remove everything it started.
import { relative } from 'node:path';
import { runCli } from '../../src/cli/run-cli.ts';
import { lockBackendSummary } from './chaos-lock.ts';
import { CHAOS_USAGE, parseChaosArgs } from './chaos-options.ts';
import { paymentSummary, type RunFigures } from './report.ts';
import { runChaos } from './run-chaos.ts';

function failoverLine(f: RunFigures): string {
  const failovers = f.faults.list.filter((r) => r.failover !== undefined);
  if (failovers.length === 0) return '';
  const lossy = failovers.flatMap((r) => (r.failover?.kind === 'lossy' ? [r] : []));
  const lost = lossy
    .map((r) => (r.failover?.kind === 'lossy' ? `${r.failover.fenceIncrementsLost}/${r.failover.lockKeysLost}` : ''))
    .join(', ');
  return (
    `  failovers: ${lossy.length} lossy (fence increments/lock keys lost: ${lost || 'none'}), ` +
    `${failovers.length - lossy.length} master kills; faults that met no transfer in flight: ${f.faults.idle}\n`
  );
}

function intakeLine(f: RunFigures): string {
  const i = f.intake;
  if (i === undefined) return '';
  const p = i.producerFigures;
  const lost = i.failoverLosses.reduce((a, l) => a + l.jobsLost, 0);
  const resent = i.failoverLosses.reduce((a, l) => a + l.resentAndDecided, 0);
  const otherwise = i.failoverLosses.reduce((a, l) => a + l.decidedOtherwise, 0);
  const never = i.failoverLosses.reduce((a, l) => a + l.neverDecided, 0);
  return (
    `  intake (${i.producer}): ${i.acknowledged} acknowledged, ${i.lostTransfers} never decided; ` +
    `${i.failoverLosses.length} lossy failover(s) on queue shards lost ${lost} acknowledged adds ` +
    `(${resent} re-sent by a relay and decided, ${otherwise} decided otherwise, ${never} never decided); ` +
    `re-sends ${i.resends}, of which found no job ${i.resendsFindingNoJob}; relay kills ${i.relayKills}; ` +
    `feed ${i.feedEvents} events (${i.conflictEvents} conflict, ${i.givenUpEvents} given_up)` +
    (i.feedReaders === null
      ? ''
      : `, ${i.feedReaders.positionsObserved} positions observed by ${i.feedReaders.reads} reads during the run`) +
    (p === null || p.bothDoorsPairs === 0
      ? ''
      : `; both doors: ${p.bothDoorsPairs} pairs, ${p.bothDoorsRefused} refused at once, ${p.bothDoorsDuplicate} duplicate`) +
    `; relays' DB_POOL_MAX ${i.relayPoolMax ?? 'default'}\n`
  );
}

await runCli(async () => {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`usage: ${CHAOS_USAGE}\n`);
    return;
  }
  const { options, notices } = parseChaosArgs(argv);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  for (const notice of notices) log(`note: ${notice}`);

  const stop = new AbortController();
  const interrupt = (signal: string) => {
    if (stop.signal.aborted) {
      log(`${signal} again: exiting without cleaning up`);
      process.exit(130);
    }
    log(`${signal}: stopping the run and cleaning up (again to exit at once)`);
    stop.abort();
  };
  process.on('SIGINT', () => interrupt('SIGINT'));
  process.on('SIGTERM', () => interrupt('SIGTERM'));

  let result: Awaited<ReturnType<typeof runChaos>>;
  try {
    result = await runChaos(options, argv, log, stop.signal);
  } catch (err) {
    if (!stop.signal.aborted) throw err;
    log('interrupted: every process and folder the run started is gone; the output folder keeps what was written');
    process.exitCode = 130;
    return;
  }
  const f = result.figures;
  const failed = f.checks.filter((c) => !c.ok).map((c) => c.name);
  process.stdout.write(
    `${f.verdict.pass ? 'PASS' : 'FAIL'} seed ${f.seed} (${f.mode.apply}, unsafe ${f.mode.unsafe ?? 'none'}): ${f.verdict.detail}\n` +
      `  ${f.faults.injected} faults, ${f.ledger.transfersApplied} applied, ${f.answers.duplicate ?? 0} duplicates answered from the record, ` +
      `${f.metrics.stale_fence ?? 0} stale fences refused, ${f.metrics.lock_lost ?? 0} lock losses, ${f.jobs.retries} retries, ` +
      `${(f.durationMs.total / 1000).toFixed(1)} s\n` +
      (failed.length > 0 ? `  failed checks: ${failed.join('; ')}\n` : '') +
      failoverLine(f) +
      lockBackendSummary(f) +
      intakeLine(f) +
      (f.payments === undefined ? '' : `  payments: ${paymentSummary(f.payments)}\n`) +
      `  report: ${relative(process.cwd(), result.outDir) || '.'}/report.md\n`,
  );
  if (!result.pass) process.exitCode = 1;
});
// Explicitly, once the report is out and everything the run started is stopped: in intake runs
// with kill-relay, the harness was seen (2 runs of about 10) to spin after its verdict instead
// of exiting, for a reason not found yet (docs/verification/chaos.md, "Known limits").
process.exit();
