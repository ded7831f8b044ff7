// `npm run bench -- [flags]`: measures the cases of harness/bench side by side (see options.ts),
// progress on stderr, a Markdown table on stdout, `<out>/<time>.json` and `.svg`. Exit 0 only
// when every case ran and verified. SIGINT/SIGTERM stop the run and remove what it created
// (databases, queues, keys, processes); a second signal exits at once.
import { relative } from 'node:path';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { BENCH_USAGE, parseBenchArgs } from './bench-options.ts';
import { formatCpuTable, formatLockTable, formatPaymentsTable, formatTable } from './bench-table.ts';
import { VerificationFailedError } from './case-result.ts';
import { writeResults } from './results-file.ts';
import { preflight, runBench } from './run-bench.ts';

/** Signals within this long of the first are the same interruption, delivered twice. */
export const REPEAT_SIGNAL_WINDOW_MS = 2_000;

/** A path relative to the working directory when it lies under it, else absolute. */
function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel === '' || rel.startsWith('..') ? path : rel;
}

await runCli(async () => {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`usage: ${BENCH_USAGE}\n`);
    return;
  }
  const options = parseBenchArgs(argv);
  const config = loadConfig();
  const log = (line: string) => process.stderr.write(`${line}\n`);

  const stop = new AbortController();
  let firstSignalMs = 0;
  const interrupt = (signal: string) => {
    // One Ctrl-C reaches us more than once (the terminal signals the whole process group, and
    // npm and tsx relay it too): only a signal well after the first one means "exit now".
    if (stop.signal.aborted && performance.now() - firstSignalMs < REPEAT_SIGNAL_WINDOW_MS) return;
    if (stop.signal.aborted) {
      log(`${signal} again: exiting without cleaning up`);
      process.exit(130);
    }
    log(`${signal}: stopping the bench and cleaning up (again to exit at once)`);
    firstSignalMs = performance.now();
    stop.abort();
  };
  process.on('SIGINT', () => interrupt('SIGINT'));
  process.on('SIGTERM', () => interrupt('SIGTERM'));

  await preflight(options, config);
  const { report, error } = await runBench(options, config, argv, log, stop.signal);
  const paths = await writeResults(options.out, report);
  process.stdout.write(`${formatTable(report.summary, report, options.runs)}\n`);
  process.stdout.write(`e2ePeakRssMbPerWorker        ${report.e2ePeakRssMbPerWorker ?? 'n/a'}\n`);
  const rt = (us: number | null) => (us === null ? 'n/a' : `${us} µs`);
  process.stdout.write(
    `redis PING round trip        ${rt(report.machine.redisRoundTripUsStart)} at start, ${rt(report.machine.redisRoundTripUsEnd)} at end\n`,
  );
  const cpuTable = formatCpuTable(report.summary);
  if (cpuTable !== null) process.stdout.write(`\n${cpuTable}\n\n`);
  const paymentsTable = formatPaymentsTable(report.summary, report);
  if (paymentsTable !== null) process.stdout.write(`${paymentsTable}\n\n`);
  const lockTable = formatLockTable(report.summary, report);
  if (lockTable !== null) process.stdout.write(`${lockTable}\n\n`);
  process.stdout.write(`results: ${shown(paths.json)}\nchart:   ${shown(paths.svg)}\n`);
  if (error !== null) {
    if (stop.signal.aborted) {
      log('interrupted: the databases, queues, keys and processes of the bench are gone');
      process.exitCode = 130;
      return;
    }
    if (error instanceof VerificationFailedError) {
      // An expected way for a bench to fail: one line, no stack.
      log(`error: ${error.message}`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
});
