// The chaos report's figures drawn from the final jobs (answers, latency, applied per second),
// and the files the report is written to: report.json, report.md and the timeline chart.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type ChartInput, renderTimelineSvg } from './chaos-chart.ts';
import type { ChaosOptions } from './chaos-options.ts';
import type { FinalJob } from './final-job.ts';
import type { History } from './history.ts';
import { answerOf, quantile, type RunFigures, renderMarkdown } from './report.ts';

/** How many jobs gave each answer. */
export function answerCounts(jobs: readonly FinalJob[]): Record<string, number> {
  const answers: Record<string, number> = {};
  for (const j of jobs) answers[answerOf(j)] = (answers[answerOf(j)] ?? 0) + 1;
  return answers;
}

/** Enqueue-to-finish time of the completed jobs. */
export function latencyFigures(jobs: readonly FinalJob[]): RunFigures['latencyMs'] {
  const latencies = jobs
    .filter((j) => j.finishedOn !== null && j.state === 'completed')
    .map((j) => (j.finishedOn as number) - j.timestamp)
    .sort((a, b) => a - b);
  return {
    p50: quantile(latencies, 0.5),
    p95: quantile(latencies, 0.95),
    p99: quantile(latencies, 0.99),
    max: latencies.at(-1) ?? 0,
  };
}

/** Applied transfers per second of the run (history time), mean over the active seconds and peak. */
export function appliedPerSecond(jobs: readonly FinalJob[], history: History): RunFigures['appliedPerSecond'] {
  const perSecond = new Map<number, number>();
  for (const j of jobs) {
    if (answerOf(j) === 'applied' && j.finishedOn !== null) {
      const s = Math.floor(history.offsetOfWallMs(j.finishedOn) / 1000);
      perSecond.set(s, (perSecond.get(s) ?? 0) + 1);
    }
  }
  const appliedTotal = [...perSecond.values()].reduce((a, b) => a + b, 0);
  const activeSeconds = Math.max(
    1,
    perSecond.size === 0 ? 1 : Math.max(...perSecond.keys()) - Math.min(...perSecond.keys()) + 1,
  );
  return { mean: appliedTotal / activeSeconds, peak: Math.max(0, ...perSecond.values()) };
}

/** Draws the timeline, then writes report.json and report.md (which links the chart when drawn). */
export async function writeReportFiles(
  options: ChaosOptions,
  figures: RunFigures,
  chart: Omit<ChartInput, 'title'>,
  log: (line: string) => void,
): Promise<void> {
  const outDir = options.out;
  const { verdict } = figures;
  let chartFile: string | null = 'timeline.svg';
  try {
    const svg = await renderTimelineSvg({
      title:
        `chaos seed ${options.seed} — ${options.redis === 'cluster' ? 'Redis Cluster, ' : ''}apply ${options.apply}, ` +
        `unsafe ${options.unsafe ?? 'none'}: ${verdict.pass ? 'PASS' : 'FAIL'}`,
      ...chart,
    });
    writeFileSync(join(outDir, chartFile), svg);
  } catch (err) {
    log(`chart not drawn: ${err instanceof Error ? err.message : String(err)}`);
    chartFile = null;
  }
  writeFileSync(join(outDir, 'report.json'), `${JSON.stringify(figures, null, 2)}\n`);
  writeFileSync(join(outDir, 'report.md'), renderMarkdown(figures, chartFile));
}
