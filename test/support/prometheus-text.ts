// A strict parser of the Prometheus text exposition format (version 0.0.4), for tests that read
// a worker's /metrics as a scraper would. Throws on anything a scraper would reject: a sample
// before its family's TYPE, a malformed name, label or value, a family split in two, a
// histogram whose buckets are not cumulative or whose +Inf bucket differs from its _count.
export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface MetricFamily {
  readonly name: string;
  readonly type: MetricType;
  readonly help: string;
  readonly samples: Sample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: readonly MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

/** As Prometheus reads values (Go's ParseFloat): NaN and Inf in any case (prom-client prints `Nan`). */
function parseValue(raw: string, line: number): number {
  const lower = raw.toLowerCase();
  if (lower === 'nan') return Number.NaN;
  if (lower === '+inf' || lower === 'inf' || lower === '+infinity' || lower === 'infinity')
    return Number.POSITIVE_INFINITY;
  if (lower === '-inf' || lower === '-infinity') return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw))
    throw new Error(`line ${line}: bad value ${JSON.stringify(raw)}`);
  return Number(raw);
}

/** Parses `{a="x",b="y"}` starting at text[0] === '{'; returns the labels and the rest of the line. */
function parseLabels(text: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    while (text[i] === ' ') i++;
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const nameMatch = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(text.slice(i));
    if (nameMatch === null) throw new Error(`line ${line}: bad label name at ${JSON.stringify(text.slice(i))}`);
    const name = nameMatch[0];
    if (!LABEL_NAME.test(name)) throw new Error(`line ${line}: bad label name ${name}`);
    if (name in labels) throw new Error(`line ${line}: label ${name} twice`);
    i += name.length;
    if (text[i] !== '=' || text[i + 1] !== '"') throw new Error(`line ${line}: expected ="…" after label ${name}`);
    i += 2;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const next = text[i + 1];
        if (next === 'n') value += '\n';
        else if (next === '\\' || next === '"') value += next;
        else throw new Error(`line ${line}: bad escape \\${next ?? ''}`);
        i += 2;
        continue;
      }
      value += c;
      i += 1;
    }
    labels[name] = value;
    i += 1;
    while (text[i] === ' ') i++;
    if (text[i] === ',') i += 1;
    else if (text[i] !== '}') throw new Error(`line ${line}: expected , or } after label ${name}`);
  }
}

/** The family a sample name belongs to, given the declared families. */
function familyOf(sample: string, families: Map<string, MetricFamily>): MetricFamily | undefined {
  const direct = families.get(sample);
  if (direct !== undefined && direct.type !== 'histogram') return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sample.endsWith(suffix)) continue;
    const family = families.get(sample.slice(0, -suffix.length));
    if (family === undefined) continue;
    if (family.type === 'histogram') return family;
    if (family.type === 'summary' && suffix !== '_bucket') return family;
  }
  return direct;
}

export function parsePrometheusText(text: string): Map<string, MetricFamily> {
  const families = new Map<string, MetricFamily>();
  const finished = new Set<string>();
  let current: MetricFamily | null = null;
  const lines = text.split('\n');
  if (lines.at(-1) !== '') throw new Error('the exposition must end with a newline');
  lines.forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(raw);
      if (m === null) return; // a plain comment
      const [, kind, name, rest = ''] = m as unknown as [string, string, string, string | undefined];
      if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`);
      if (finished.has(name)) throw new Error(`line ${line}: family ${name} appears twice`);
      let family = families.get(name);
      if (family === undefined) {
        if (current !== null && current.name !== name) finished.add(current.name);
        family = { name, type: 'untyped', help: '', samples: [] };
        families.set(name, family);
        current = family;
      }
      if (kind === 'TYPE') {
        if (!(TYPES as readonly string[]).includes(rest.trim())) throw new Error(`line ${line}: unknown type ${rest}`);
        if (family.samples.length > 0) throw new Error(`line ${line}: TYPE of ${name} after its samples`);
        (family as { type: MetricType }).type = rest.trim() as MetricType;
      } else {
        (family as { help: string }).help = rest;
      }
      return;
    }
    const nameMatch = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(raw);
    if (nameMatch === null) throw new Error(`line ${line}: bad sample ${JSON.stringify(raw)}`);
    const name = nameMatch[0];
    let rest = raw.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, line));
    const fields = rest.trim().split(/\s+/);
    if (fields.length < 1 || fields.length > 2 || fields[0] === '')
      throw new Error(`line ${line}: expected a value and an optional timestamp`);
    const value = parseValue(fields[0] as string, line);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1]))
      throw new Error(`line ${line}: bad timestamp ${fields[1]}`);
    let family = familyOf(name, families);
    if (family === undefined) {
      family = { name, type: 'untyped', help: '', samples: [] };
      families.set(name, family);
    }
    if (finished.has(family.name)) throw new Error(`line ${line}: samples of ${family.name} are not grouped together`);
    if (current !== null && current !== family) finished.add(current.name);
    current = family;
    family.samples.push({ name, labels, value });
  });
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family);
  return families;
}

function checkHistogram(family: MetricFamily): void {
  const series = new Map<string, { buckets: { le: number; value: number }[]; count?: number }>();
  const keyOf = (labels: Readonly<Record<string, string>>) =>
    JSON.stringify(
      Object.entries(labels)
        .filter(([k]) => k !== 'le')
        .sort(),
    );
  for (const s of family.samples) {
    const key = keyOf(s.labels);
    const entry = series.get(key) ?? { buckets: [] };
    series.set(key, entry);
    if (s.name === `${family.name}_bucket`) {
      const le = s.labels.le;
      if (le === undefined) throw new Error(`${family.name}: a bucket without le`);
      entry.buckets.push({ le: parseValue(le, 0), value: s.value });
    } else if (s.name === `${family.name}_count`) {
      entry.count = s.value;
    }
  }
  for (const [key, { buckets, count }] of series) {
    for (let i = 1; i < buckets.length; i++) {
      const a = buckets[i - 1] as { le: number; value: number };
      const b = buckets[i] as { le: number; value: number };
      if (!(b.le > a.le) || b.value < a.value) throw new Error(`${family.name}${key}: buckets not cumulative`);
    }
    const inf = buckets.at(-1);
    if (inf === undefined || inf.le !== Number.POSITIVE_INFINITY)
      throw new Error(`${family.name}${key}: no +Inf bucket`);
    if (count !== inf.value)
      throw new Error(`${family.name}${key}: _count ${count} differs from the +Inf bucket ${inf.value}`);
  }
}

/** The value of the sample named `sample` with exactly these labels (also `_count`, `_sum`, `_bucket` of a histogram), 0 when absent. */
export function sampleValue(
  families: Map<string, MetricFamily>,
  sample: string,
  labels: Record<string, string> = {},
): number {
  const f = familyOf(sample, families);
  const s = f?.samples.find(
    (x) =>
      x.name === sample &&
      Object.entries(labels).every(([k, v]) => x.labels[k] === v) &&
      Object.keys(x.labels).length === Object.keys(labels).length,
  );
  return s?.value ?? 0;
}
