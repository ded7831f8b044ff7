// `npx tsx harness/chaos/chaos-table.ts DIR/report.json ...`: one Markdown table row per chaos
// run, for docs/verification/results/chaos-history.md (faults by kind, applied, duplicates, stale
// fences, lock losses, retries, duration, verdict); runs on a Redis Cluster get a table of their own with the failovers, and
// intake runs (--intake, --unsafe direct-enqueue) one with the adds lost and how they came back.
import { readFileSync } from 'node:fs';
import { runCli } from '../../src/cli/run-cli.ts';
import { UsageError } from '../../src/errors.ts';
import { ALL_FAULT_KINDS, FAULT_KINDS } from './chaos-options.ts';
import type { RunFigures } from './report.ts';

const SHORT: Record<string, string> = {
  'kill-worker': 'kill',
  'pause-worker': 'stop',
  'delete-locks': 'dl',
  'delete-fences': 'df',
  'restart-redis': 'rr',
  'terminate-backends': 'tb',
  'link-delay': 'ld',
  'link-stall': 'ls',
  'link-cut': 'lc',
  'pg-blackhole': 'pb',
  'failover-lossy': 'fl',
  'kill-master': 'km',
  'kill-relay': 'kr',
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
  return (
    `| ${f.seed} | ${f.faults.injected} (${byKind}) | ${f.ledger.transfersApplied} | ${f.answers.duplicate ?? 0} | ` +
    `${f.metrics.stale_fence ?? 0} | ${leases} | ${f.metrics.lock_lost ?? 0} | ${f.jobs.retries} | ${f.jobs.deferralsAndStalls} | ` +
    `${f.latencyMs.p50} / ${f.latencyMs.p99} | ${(f.durationMs.total / 1000).toFixed(0)} | ${f.verdict.pass ? 'PASS' : 'FAIL'} |`
  );
}

export function clusterTableHeader(): string {
  return [
    '| seed | unsafe | faults (kill/stop/dl/df/rr/tb/ld/ls/lc/fl/km) | failover-lossy: fence increments lost (wallets), lock keys lost | ' +
      'stale-fence refusals / fences advanced after them | kill-master: promoted after (ms) | faults with nothing in flight | ' +
      'transfers applied | stale fences refused (all) | duration (s) | verdict |',
    '| ---: | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |',
  ].join('\n');
}

export function clusterTableRow(f: RunFigures): string {
  const byKind = ALL_FAULT_KINDS.map((k) => String(f.faults.byKind[k] ?? 0)).join('/');
  const lossy = f.faults.list.flatMap((r) =>
    r.failover?.kind === 'lossy' ? [{ fo: r.failover, rec: r.recovery }] : [],
  );
  const kills = f.faults.list.flatMap((r) => (r.failover?.kind === 'kill' ? [r.failover.promotionMs] : []));
  const lost = lossy
    .map(({ fo }) => `${fo.fenceIncrementsLost} (${fo.fenceKeysBehind}), ${fo.lockKeysLost}`)
    .join('; ');
  const recovered = lossy.map(({ rec }) => `${rec?.staleFenceRefusals ?? 0} / ${rec?.fencesAdvanced ?? 0}`).join('; ');
  return (
    `| ${f.seed} | ${f.mode.unsafe ?? 'none'} | ${f.faults.injected} (${byKind}) | ${lost || 'none'} | ${recovered || '–'} | ` +
    `${kills.join(', ') || 'none'} | ${f.faults.idle ?? 0} | ${f.ledger.transfersApplied} | ${f.metrics.stale_fence ?? 0} | ` +
    `${(f.durationMs.total / 1000).toFixed(0)} | ${f.verdict.pass ? 'PASS' : 'FAIL'} |`
  );
}

export function intakeTableHeader(): string {
  return [
    '| seed | producer | faults (lossy failovers on a queue shard / kill-relay) | acknowledged adds lost in those failovers | ' +
      'their transfers: re-sent by a relay and decided / decided otherwise / never decided (per lost job) | re-sends (found no job) | ' +
      'acknowledged transfers never decided | feed events | transfers applied | duration (s) | verdict |',
    '| ---: | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- |',
  ].join('\n');
}

export function intakeTableRow(f: RunFigures): string {
  const i = f.intake;
  if (i === undefined) throw new Error(`seed ${f.seed} is not an intake run`);
  const losses = i.failoverLosses;
  const sum = (pick: (l: (typeof losses)[number]) => number) => losses.reduce((a, l) => a + pick(l), 0);
  return (
    `| ${f.seed} | ${i.producer} | ${f.faults.injected} (${losses.length} / ${i.relayKills}) | ` +
    `${losses.map((l) => l.jobsLost).join(' + ') || '0'} | ` +
    `${sum((l) => l.resentAndDecided)} / ${sum((l) => l.decidedOtherwise)} / ${sum((l) => l.neverDecided)} | ` +
    `${i.resends} (${i.resendsFindingNoJob}) | ${i.lostTransfers} | ${i.feedEvents} | ${f.ledger.transfersApplied} | ` +
    `${(f.durationMs.total / 1000).toFixed(0)} | ${f.verdict.pass ? 'PASS' : 'FAIL'} |`
  );
}

export const FAULT_LEGEND = Object.entries(SHORT)
  .map(([k, v]) => `${v} = ${k}`)
  .join(', ');

await runCli(async () => {
  const files = process.argv.slice(2);
  if (files.length === 0) throw new UsageError('usage: npx tsx harness/chaos/chaos-table.ts RUN/report.json ...');
  const figures = files
    .map((file) => JSON.parse(readFileSync(file, 'utf8')) as RunFigures)
    .sort((a, b) => a.seed - b.seed);
  const single = figures.filter((f) => f.mode.redis !== 'cluster');
  const intake = figures.filter((f) => f.intake !== undefined);
  const cluster = figures.filter((f) => f.mode.redis === 'cluster' && f.intake === undefined);
  if (single.length > 0) process.stdout.write(`${tableHeader()}\n${single.map(tableRow).join('\n')}\n\n`);
  if (cluster.length > 0)
    process.stdout.write(`${clusterTableHeader()}\n${cluster.map(clusterTableRow).join('\n')}\n\n`);
  if (intake.length > 0) process.stdout.write(`${intakeTableHeader()}\n${intake.map(intakeTableRow).join('\n')}\n\n`);
  process.stdout.write(`faults: ${FAULT_LEGEND}\n`);
});
