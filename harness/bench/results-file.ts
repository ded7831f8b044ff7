// Writes a bench report as `<out>/<time>.json` and its chart as `<out>/<time>.svg`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderBenchSvg } from './bench-chart.ts';
import type { BenchReport } from './run-bench.ts';

export interface ResultsPaths {
  readonly json: string;
  readonly svg: string;
}

/** `2026-12-01T12:34:56.789Z` → `20261201T123456Z`. */
export function resultsStem(startedAt: string): string {
  return startedAt.replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

export async function writeResults(outDir: string, report: BenchReport): Promise<ResultsPaths> {
  mkdirSync(outDir, { recursive: true });
  const stem = resultsStem(report.startedAt);
  const paths = { json: join(outDir, `${stem}.json`), svg: join(outDir, `${stem}.svg`) };
  writeFileSync(paths.json, `${JSON.stringify(report, null, 2)}\n`);
  const p = report.parameters;
  const title =
    `fenced transfers bench ${report.startedAt.slice(0, 16)}Z: ${String(p.workers)} workers × ${String(p.concurrency)} ` +
    `(anchors × ${String(p.lanes)}), ` +
    `${String(p.transfers)} transfers, ${String(p.wallets)} wallets, ${report.summary[0]?.runs ?? 0} run(s)` +
    `${report.ok ? '' : ' (FAILED)'}`;
  writeFileSync(paths.svg, await renderBenchSvg({ title, summaries: report.summary, results: report.runs }));
  return paths;
}
