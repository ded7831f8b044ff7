// `npm run bench:ha -- [--rounds R] [bench flags]`: what synchronous replication costs a transfer.
// The `e2e` case of the bench, one run at a time, against the server of DATABASE_URL and against
// a private pg_auto_failover formation (a primary and two standbys, number-sync-standbys 1,
// fsync on, reached through its endpoint: harness/services/local-pg-formation.ts), alternated
// ABBA over R rounds, in one invocation. Prints transfers/s and machine CPU ms per transfer of
// each side and their ratios, and writes `<out>/<time>-ha.json` with every run's figures. The
// other bench flags (--transfers, --workers, ...) go to both sides as given; --modes and --runs
// are its own.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { integerFlag } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { UsageError } from '../../src/errors.ts';
import { LocalPgFormation } from '../services/local-pg-formation.ts';
import { PrimaryEndpoint } from '../services/primary-endpoint.ts';
import { parseBenchArgs } from './bench-options.ts';
import { median } from './measure.ts';
import { writeResults } from './results-file.ts';
import { preflight, runBench } from './run-bench.ts';

export const BENCH_HA_USAGE = 'npm run bench:ha -- [--rounds R] [bench flags but --modes and --runs]';
const ROUNDS_DEFAULT = 3;
const ROUNDS_MAX = 20;

type Side = 'single' | 'ha';

interface SideRun {
  readonly round: number;
  readonly side: Side;
  readonly transfersPerS: number;
  readonly machineMsPerTransfer: number | null;
  readonly results: string;
}

await runCli(async () => {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`usage: ${BENCH_HA_USAGE}\n`);
    return;
  }
  let rounds = ROUNDS_DEFAULT;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--rounds') {
      rounds = integerFlag(argv[i + 1] ?? '', '--rounds', 1, ROUNDS_MAX);
      i += 1;
    } else if (a === '--modes' || a === '--runs') {
      throw new UsageError(`${a} is set by bench:ha (e2e, one run per side and round)\nusage: ${BENCH_HA_USAGE}`);
    } else rest.push(a);
  }
  const benchArgv = [...rest, '--modes', 'e2e', '--runs', '1'];
  const options = parseBenchArgs(benchArgv);
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const stop = new AbortController();
  process.on('SIGINT', () => stop.abort());
  process.on('SIGTERM', () => stop.abort());

  const dir = mkdtempSync(join(tmpdir(), 'bench-pg-ha-'));
  log('bench:ha: starting the formation (a monitor, a primary, two synchronous standbys)');
  const formation = await LocalPgFormation.start({ dir });
  const endpoint = await PrimaryEndpoint.start(formation).catch(async (err) => {
    await formation.stop();
    throw err;
  });
  const runs: SideRun[] = [];
  try {
    const urlOf = (side: Side) =>
      side === 'ha' ? endpoint.url : (process.env.DATABASE_URL ?? loadConfig().databaseUrl);
    for (let round = 1; round <= rounds; round++) {
      const order: Side[] = round % 2 === 1 ? ['single', 'ha'] : ['ha', 'single'];
      for (const side of order) {
        if (stop.signal.aborted) throw new Error('interrupted');
        const config = loadConfig({ ...process.env, DATABASE_URL: urlOf(side) });
        log(`bench:ha round ${round}/${rounds}: e2e on ${side === 'ha' ? 'the HA formation' : 'the single server'}`);
        await preflight(options, config);
        const { report, error } = await runBench(options, config, benchArgv, log, stop.signal);
        const paths = await writeResults(options.out, report);
        if (error !== null && error !== undefined) throw error;
        const e2e = report.runs.find((r) => r.case === 'e2e');
        if (e2e === undefined) throw new Error('the bench ran no e2e case');
        runs.push({
          round,
          side,
          transfersPerS: Math.round(e2e.throughputPerS ?? 0),
          machineMsPerTransfer: e2e.cpu?.msPerTransfer.machine ?? null,
          results: basename(paths.json),
        });
      }
    }
  } finally {
    await endpoint.close();
    await formation.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const of = (side: Side, pick: (r: SideRun) => number | null) =>
    median(runs.filter((r) => r.side === side).flatMap((r) => (pick(r) === null ? [] : [pick(r) as number])));
  const rate = { single: of('single', (r) => r.transfersPerS), ha: of('ha', (r) => r.transfersPerS) };
  const cpu = { single: of('single', (r) => r.machineMsPerTransfer), ha: of('ha', (r) => r.machineMsPerTransfer) };
  const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? null : a / b);
  const summary = {
    rounds,
    runs,
    medians: { transfersPerS: rate, machineMsPerTransfer: cpu },
    /** HA over single: below 1 for the rate, above 1 for the CPU, is what replication costs. */
    haToSingleRateRatio: ratio(rate.ha, rate.single),
    haToSingleCpuRatio: ratio(cpu.ha, cpu.single),
  };
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');
  const out = join(options.out, `${stamp}-ha.json`);
  writeFileSync(out, `${JSON.stringify(summary, null, 2)}\n`);
  const lines = [
    '| round | side | transfers/s | machine CPU ms per transfer | results |',
    '| ---: | --- | ---: | ---: | --- |',
    ...runs.map(
      (r) => `| ${r.round} | ${r.side} | ${r.transfersPerS} | ${r.machineMsPerTransfer ?? 'n/a'} | ${r.results} |`,
    ),
    '',
    `medians: single ${rate.single} transfers/s (${cpu.single} ms), HA ${rate.ha} transfers/s (${cpu.ha} ms)`,
    `haToSingleRateRatio ${summary.haToSingleRateRatio?.toFixed(3) ?? 'n/a'}, haToSingleCpuRatio ${summary.haToSingleCpuRatio?.toFixed(3) ?? 'n/a'}`,
    `results: ${out}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
});
