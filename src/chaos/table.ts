// `npx tsx src/chaos/table.ts DIR/report.json ...`: one Markdown table row per chaos run, for
// docs/chaos.md (faults by kind, applied, duplicates, stale fences, lock losses, retries,
// duration, verdict).
import { readFileSync } from 'node:fs';
import { runCli } from '../cli/run-cli.ts';
import { UsageError } from '../cli/args.ts';
import { FAULT_KINDS } from './options.ts';
import type { RunFigures } from './report.ts';

const SHORT: Record<string, string> = {
  'kill-worker': 'kill', 'pause-worker': 'stop', 'delete-locks': 'dl', 'delete-fences': 'df', 'restart-redis': 'rr',
  'terminate-backends': 'tb', 'link-delay': 'ld', 'link-stall': 'ls', 'link-cut': 'lc',
};

export function tableHeader(): string {
  return [
    '| seed | faults (kill/stop/dl/df/rr/tb/ld/ls/lc) | transfers applied | duplicates answered from the record | stale fences refused | leases lost (watchdog) | lock losses before commit | retries | deferrals + stalls | latency p50 / p99 (ms) | duration (s) | verdict |',
    '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ].join('\n');
}

export function tableRow(f: RunFigures): string {
  const byKind = FAULT_KINDS.map((k) => String(f.faults.byKind[k] ?? 0)).join('/');
  const leases = (f.workerLogEvents['lock_lost:lease_expired'] ?? 0) + (f.workerLogEvents['lock_lost:not_owner'] ?? 0);
  return `| ${f.seed} | ${f.faults.injected} (${byKind}) | ${f.ledger.transfersApplied} | ${f.answers.duplicate ?? 0} | ` +
    `${f.metrics.stale_fence ?? 0} | ${leases} | ${f.metrics.lock_lost ?? 0} | ${f.jobs.retries} | ${f.jobs.deferralsAndStalls} | ` +
    `${f.latencyMs.p50} / ${f.latencyMs.p99} | ${(f.durationMs.total / 1000).toFixed(0)} | ${f.verdict.pass ? 'PASS' : 'FAIL'} |`;
}

export const FAULT_LEGEND = Object.entries(SHORT).map(([k, v]) => `${v} = ${k}`).join(', ');

await runCli(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) throw new UsageError('usage: npx tsx src/chaos/table.ts RUN/report.json ...');
  const figures = files.map((file) => JSON.parse(readFileSync(file, 'utf8')) as RunFigures).sort((a, b) => a.seed - b.seed);
  process.stdout.write(`${tableHeader()}\n${figures.map(tableRow).join('\n')}\n\nfaults: ${FAULT_LEGEND}\n`);
});
