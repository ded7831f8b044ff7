// The bench's chart, next to its JSON: transfers/s per case (the median as a bar, each run as
// a dot) and, for the paced low-rate cases, enqueue→commit latency percentiles with batching on
// and off. A vega-lite spec compiled and rendered to SVG in Node by vega, as the chaos chart.
import * as vega from 'vega';
import * as vl from 'vega-lite';
import { lockedCaseLabel } from './bench-locks.ts';
import type { CaseRunResult } from './case-result.ts';
import type { CaseSummary } from './summary.ts';

const WIDTH_PX = 640;

/** A bar's name: the case, with its lock service unless Redis (`--lock`: `e2e-etcd` beside `e2e`). */
function chartCase(x: { readonly case: string; readonly lock?: CaseSummary['lock'] }): string {
  return lockedCaseLabel(x.case, x.lock ?? 'redis');
}

export interface BenchChartInput {
  readonly title: string;
  readonly summaries: readonly CaseSummary[];
  readonly results: readonly CaseRunResult[];
}

export function benchChartSpec(input: BenchChartInput): vl.TopLevelSpec {
  const order = input.summaries.map(chartCase);
  const bars = input.summaries
    .filter((s) => s.throughputPerS.median !== null)
    .map((s) => ({ case: chartCase(s), perS: s.throughputPerS.median }));
  const dots = input.results
    .filter((r) => r.throughputPerS !== null)
    .map((r) => ({ case: chartCase(r), perS: Math.round((r.throughputPerS as number) * 10) / 10, run: r.run }));
  const latency = input.summaries
    .filter((s) => (s.case === 'low-rate' || s.case === 'low-rate-unbatched') && s.latencyMs.enqueueToCommit !== null)
    .flatMap((s) =>
      (['p50', 'p95', 'p99'] as const).map((p) => ({
        case: s.case === 'low-rate' ? 'batching on (default)' : 'batching off (max 1)',
        percentile: p,
        ms: s.latencyMs.enqueueToCommit?.[p] ?? null,
      })),
    );
  const y = { field: 'case', type: 'nominal', sort: order, title: null, axis: { labelLimit: 240 } } as const;
  const throughput = {
    width: WIDTH_PX,
    height: { step: 26 },
    title: 'transfers/s: bar = median of the runs, dots = each run',
    layer: [
      {
        data: { values: bars },
        mark: { type: 'bar', color: '#4c78a8' },
        encoding: {
          y,
          x: {
            field: 'perS',
            type: 'quantitative',
            title: 'transfers / s, first → last deciding transaction (queue-ceiling: no-op jobs / s)',
          },
        },
      },
      {
        data: { values: bars },
        mark: { type: 'text', align: 'left', dx: 4, fontSize: 11 },
        encoding: {
          y,
          x: { field: 'perS', type: 'quantitative' },
          text: { field: 'perS', type: 'quantitative', format: ',.0f' },
        },
      },
      {
        data: { values: dots },
        mark: { type: 'point', filled: true, color: '#e45756', size: 30 },
        encoding: { y, x: { field: 'perS', type: 'quantitative' } },
      },
    ],
  };
  const panels: object[] = [throughput];
  if (latency.length > 0) {
    panels.push({
      width: WIDTH_PX,
      height: { step: 14 },
      title: 'paced low rate: enqueue → commit latency (ms, medians of the runs)',
      data: { values: latency },
      mark: { type: 'bar' },
      encoding: {
        y: { field: 'case', type: 'nominal', title: null, axis: { labelLimit: 240 } },
        yOffset: { field: 'percentile', type: 'nominal', sort: ['p50', 'p95', 'p99'] },
        x: { field: 'ms', type: 'quantitative', title: 'ms' },
        color: { field: 'percentile', type: 'nominal', sort: ['p50', 'p95', 'p99'], scale: { scheme: 'tableau10' } },
      },
    });
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: input.title,
    background: 'white',
    vconcat: panels,
  } as vl.TopLevelSpec;
}

export async function renderBenchSvg(input: BenchChartInput): Promise<string> {
  const compiled = vl.compile(benchChartSpec(input)).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
