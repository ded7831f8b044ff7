// Renders the spans of one trace, as an OTLP receiver got them (otlp-receiver.ts), into an SVG
// waterfall like Jaeger's: one row per span, in tree order (each span under its parent, siblings
// by start), indented by depth, its bar on a common time axis, coloured by the process that made
// it; a failed span is outlined red, and a span linked to another (a transfer's wait and its
// batch) says so. What Jaeger would show, where Jaeger cannot run (docs/operating/monitoring.md).
import type { AttributeValue, ExportedSpan } from './otlp-receiver.ts';

/** Layout, in SVG pixels. */
const ROW_HEIGHT = 22;
const LABEL_WIDTH = 430;
const BARS_WIDTH = 560;
const MARGIN = 12;
const HEADER_HEIGHT = 46;
const INDENT = 14;
/** Characters of a span's label at most (a SQL statement's name can be long). */
const LABEL_CHARS_MAX = 58;

/** One colour per process, in the order they first appear. */
const SERVICE_COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#edc948'];

/** The attributes shown beside a span's name, when it has them. */
const SHOWN_ATTRIBUTES = [
  'lock.outcome',
  'lock.fence',
  'batch.size',
  'decision.outcome',
  'outcome.kind',
  'relay.send_count',
];

interface Row {
  readonly span: ExportedSpan;
  readonly depth: number;
}

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The spans in tree order: roots first (by start), each followed by its subtree. */
export function treeRows(spans: readonly ExportedSpan[]): Row[] {
  const ids = new Set(spans.map((s) => s.spanId));
  const byStart = [...spans].sort((a, b) => (a.startNs < b.startNs ? -1 : a.startNs > b.startNs ? 1 : 0));
  const children = new Map<string, ExportedSpan[]>();
  const roots: ExportedSpan[] = [];
  for (const s of byStart) {
    if (s.parentSpanId === null || !ids.has(s.parentSpanId)) roots.push(s);
    else children.set(s.parentSpanId, [...(children.get(s.parentSpanId) ?? []), s]);
  }
  const rows: Row[] = [];
  const visit = (span: ExportedSpan, depth: number) => {
    rows.push({ span, depth });
    for (const child of children.get(span.spanId) ?? []) visit(child, depth + 1);
  };
  for (const root of roots) visit(root, 0);
  return rows;
}

function labelOf(span: ExportedSpan): string {
  const shown = SHOWN_ATTRIBUTES.flatMap((key) => {
    const value: AttributeValue | undefined = span.attributes[key];
    return value === undefined ? [] : [`${key.split('.').pop()}=${value}`];
  });
  const text = shown.length === 0 ? span.name : `${span.name} (${shown.join(', ')})`;
  return text.length > LABEL_CHARS_MAX ? `${text.slice(0, LABEL_CHARS_MAX - 1)}…` : text;
}

function msLabel(ms: number): string {
  return ms >= 100 ? `${Math.round(ms)} ms` : `${ms.toFixed(1)} ms`;
}

/** The SVG of the spans of one trace. */
export function renderTraceSvg(spans: readonly ExportedSpan[], title: string): string {
  if (spans.length === 0) throw new Error('no spans to draw');
  const rows = treeRows(spans);
  const byNs = (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0);
  const startNs = rows.map((r) => r.span.startNs).sort(byNs)[0] ?? 0n;
  const endNs = rows.map((r) => r.span.endNs).sort(byNs)[rows.length - 1] ?? startNs;
  const totalMs = Math.max(0.001, Number(endNs - startNs) / 1e6);
  const xOf = (ns: bigint) => LABEL_WIDTH + (Number(ns - startNs) / 1e6 / totalMs) * BARS_WIDTH;
  const services = [...new Set(rows.map((r) => r.span.service))];
  const colourOf = (service: string) => SERVICE_COLOURS[services.indexOf(service) % SERVICE_COLOURS.length];
  const linked = new Set(spans.flatMap((s) => s.links.map((l) => l.spanId)));
  const width = LABEL_WIDTH + BARS_WIDTH + MARGIN * 2;
  const height = HEADER_HEIGHT + rows.length * ROW_HEIGHT + 40;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11">`,
    `<title>${escapeXml(title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${MARGIN}" y="18" font-size="13" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="${MARGIN}" y="34" fill="#555">trace ${escapeXml(rows[0]?.span.traceId ?? '')} · ${rows.length} spans · ${msLabel(totalMs)}</text>`,
  ];
  // The time axis: five ticks.
  for (let i = 0; i <= 4; i += 1) {
    const x = LABEL_WIDTH + (BARS_WIDTH * i) / 4;
    out.push(
      `<line x1="${x}" y1="${HEADER_HEIGHT - 4}" x2="${x}" y2="${HEADER_HEIGHT + rows.length * ROW_HEIGHT}" stroke="#e3e3e3"/>`,
      `<text x="${x}" y="${HEADER_HEIGHT - 8}" fill="#777" text-anchor="${i === 4 ? 'end' : 'middle'}">${msLabel((totalMs * i) / 4)}</text>`,
    );
  }
  rows.forEach(({ span, depth }, i) => {
    const y = HEADER_HEIGHT + i * ROW_HEIGHT;
    const colour = colourOf(span.service);
    const x = xOf(span.startNs);
    const w = Math.max(1.5, xOf(span.endNs) - x);
    const failed = span.statusCode === 2;
    const link = span.links.length > 0 || linked.has(span.spanId) ? ' ⇄' : '';
    if (i % 2 === 1) out.push(`<rect x="0" y="${y}" width="${width}" height="${ROW_HEIGHT}" fill="#f7f7f7"/>`);
    out.push(
      `<rect x="${MARGIN + depth * INDENT}" y="${y + 6}" width="8" height="8" fill="${colour}"/>`,
      `<text x="${MARGIN + depth * INDENT + 12}" y="${y + 14}">${escapeXml(labelOf(span))}${link}</text>`,
      `<rect x="${x.toFixed(1)}" y="${y + 4}" width="${w.toFixed(1)}" height="${ROW_HEIGHT - 8}" rx="2" fill="${colour}"${failed ? ' stroke="#d62728" stroke-width="2"' : ''}/>`,
      // The duration right of the bar, or left of it when the bar ends near the edge.
      x + w + 60 > width
        ? `<text x="${(x - 4).toFixed(1)}" y="${y + 14}" fill="#555" text-anchor="end">${msLabel(Number(span.endNs - span.startNs) / 1e6)}</text>`
        : `<text x="${(x + w + 4).toFixed(1)}" y="${y + 14}" fill="#555">${msLabel(Number(span.endNs - span.startNs) / 1e6)}</text>`,
    );
  });
  // The legend: the processes, and what the marks mean.
  const legendY = HEADER_HEIGHT + rows.length * ROW_HEIGHT + 22;
  let lx = MARGIN;
  for (const service of services) {
    out.push(
      `<rect x="${lx}" y="${legendY - 9}" width="10" height="10" fill="${colourOf(service)}"/>`,
      `<text x="${lx + 14}" y="${legendY}">${escapeXml(service)}</text>`,
    );
    lx += 24 + service.length * 6.5;
  }
  out.push(
    `<rect x="${lx}" y="${legendY - 9}" width="10" height="10" fill="none" stroke="#d62728" stroke-width="2"/>`,
    `<text x="${lx + 14}" y="${legendY}">failed</text>`,
    `<text x="${lx + 64}" y="${legendY}">⇄ linked (a transfer's wait and its batch)</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
