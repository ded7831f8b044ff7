// The timeline chart of a run, drawn the way Jepsen draws its: applied transfers per second
// and each job's latency over time, with the fault windows shaded behind them. A vega-lite
// spec compiled and rendered to SVG in Node by vega (no browser, no canvas).
import * as vega from 'vega';
import * as vl from 'vega-lite';
import type { FaultRecord } from './faults.ts';
import type { FinalJob } from './final-job.ts';
import { answerOf } from './report.ts';

/** Latency points drawn at most (evenly thinned beyond), to keep the SVG light. */
export const CHART_POINTS_MAX = 4_000;
/** Instantaneous faults are drawn this wide so they show. */
const INSTANT_FAULT_WIDTH_S = 0.3;
const WIDTH_PX = 900;

export interface ChartInput {
  readonly title: string;
  readonly jobs: readonly FinalJob[];
  readonly faults: readonly FaultRecord[];
  /** Date.now() at the start of the fault phase: the chart's zero. */
  readonly t0WallMs: number;
  /** End of the fault phase, s (a rule marks it). */
  readonly faultPhaseEndS: number;
}

export interface TimelineData {
  readonly points: { t: number; latencyMs: number; answer: string }[];
  readonly perSecond: { t: number; applied: number }[];
  readonly windows: { start: number; end: number; kind: string; detail: string }[];
  /** The instants a slot range changed master (failovers), with a label. */
  readonly failovers: { t: number; label: string }[];
}

export function timelineData(input: ChartInput): TimelineData {
  const finished = input.jobs.filter((j) => j.finishedOn !== null);
  const step = Math.max(1, Math.ceil(finished.length / CHART_POINTS_MAX));
  const points = finished
    .filter((_, i) => i % step === 0)
    .map((j) => ({
      t: Math.round(((j.finishedOn as number) - input.t0WallMs) / 10) / 100,
      latencyMs: Math.max(1, (j.finishedOn as number) - j.timestamp),
      answer: answerOf(j),
    }));
  const buckets = new Map<number, number>();
  for (const j of finished) {
    if (answerOf(j) !== 'applied') continue;
    const second = Math.floor(((j.finishedOn as number) - input.t0WallMs) / 1000);
    buckets.set(second, (buckets.get(second) ?? 0) + 1);
  }
  const seconds = [...buckets.keys()];
  const first = Math.min(0, ...seconds);
  const last = Math.max(0, ...seconds);
  const perSecond: TimelineData['perSecond'] = [];
  for (let s = first; s <= last; s++) perSecond.push({ t: s + 0.5, applied: buckets.get(s) ?? 0 });
  const windows = input.faults
    .filter((f) => f.error === null)
    .map((f) => ({
      start: f.startMs / 1000,
      end: Math.max(f.endMs / 1000, f.startMs / 1000 + INSTANT_FAULT_WIDTH_S),
      kind: f.kind,
      detail: f.detail,
    }));
  const failovers = input.faults
    .filter((f) => f.failoverAtMs !== undefined)
    .map((f) => ({
      t: (f.failoverAtMs as number) / 1000,
      label:
        f.kind === 'failover-lossy' && f.failover?.kind === 'lossy'
          ? `takeover, ${f.failover.fenceIncrementsLost} incr. lost`
          : 'master killed → promoted',
    }));
  return { points, perSecond, windows, failovers };
}

export function timelineSpec(input: ChartInput, data: TimelineData): vl.TopLevelSpec {
  const ts = [
    ...data.points.map((p) => p.t),
    ...data.perSecond.map((p) => p.t),
    ...data.windows.map((w) => w.end),
    0,
    input.faultPhaseEndS,
  ];
  const domain = [Math.floor(Math.min(...ts)), Math.ceil(Math.max(...ts))];
  const x = {
    field: 't',
    type: 'quantitative',
    title: 'time since the fault phase started (s)',
    scale: { domain },
  } as const;
  const faultLayer = {
    data: { values: data.windows },
    mark: { type: 'rect', opacity: 0.28 },
    encoding: {
      x: { field: 'start', type: 'quantitative', scale: { domain } },
      x2: { field: 'end' },
      color: { field: 'kind', type: 'nominal', title: 'fault', scale: { scheme: 'tableau20' } },
    },
  } as const;
  const failoverRules = {
    data: { values: data.failovers },
    layer: [
      {
        mark: { type: 'rule', color: '#b00020', strokeWidth: 2 },
        encoding: { x: { field: 't', type: 'quantitative', scale: { domain } } },
      },
      {
        mark: {
          type: 'text',
          color: '#b00020',
          angle: 270,
          align: 'right',
          baseline: 'bottom',
          dy: -2,
          fontSize: 9,
          y: 2,
        },
        encoding: { x: { field: 't', type: 'quantitative', scale: { domain } }, text: { field: 'label' } },
      },
    ],
  } as const;
  const phaseEnd = {
    data: { values: [{ t: input.faultPhaseEndS }] },
    mark: { type: 'rule', strokeDash: [4, 4], color: '#555' },
    encoding: { x: { field: 't', type: 'quantitative', scale: { domain } } },
  } as const;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: input.title,
    background: 'white',
    vconcat: [
      {
        width: WIDTH_PX,
        height: 160,
        layer: [
          faultLayer,
          phaseEnd,
          ...(data.failovers.length > 0 ? [failoverRules] : []),
          {
            data: { values: data.perSecond },
            mark: { type: 'line', interpolate: 'step-after', color: '#1f3b73' },
            encoding: { x, y: { field: 'applied', type: 'quantitative', title: 'applied transfers / s' } },
          },
        ],
      },
      {
        width: WIDTH_PX,
        height: 260,
        layer: [
          faultLayer,
          phaseEnd,
          {
            data: { values: data.points },
            mark: { type: 'point', filled: true, size: 9, opacity: 0.55 },
            encoding: {
              x,
              y: {
                field: 'latencyMs',
                type: 'quantitative',
                title: 'latency enqueue → answer (ms)',
                scale: { type: 'log' },
              },
              shape: { field: 'answer', type: 'nominal', title: 'answer' },
              fill: { field: 'answer', type: 'nominal', title: 'answer', scale: { scheme: 'dark2' } },
            },
          },
        ],
        resolve: { scale: { color: 'independent' } },
      },
    ],
    resolve: { scale: { color: 'shared' } },
  } as vl.TopLevelSpec;
}

export async function renderTimelineSvg(input: ChartInput): Promise<string> {
  const spec = timelineSpec(input, timelineData(input));
  const compiled = vl.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
