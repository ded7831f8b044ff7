// The length ratchet's arithmetic (test/support/function-lengths.ts) on scratch sources: what a
// function's length and identity are, which lengths break the ratchet against a list, and that
// tightening a list only ever removes or lowers entries.
import { describe, expect, it } from 'vitest';
import {
  describeOffences,
  FUNCTION_LINES_MAX,
  type FunctionLength,
  judgeLengths,
  measureSource,
  tightenList,
} from '../support/function-lengths.ts';

const LIST = 'test/layout/long-functions.json';

/** A function declaration exactly `lines` long (at least 2), behind a comment that does not count. */
function functionOf(name: string, lines: number): string {
  const body = Array.from({ length: lines - 2 }, (_, i) => `  step(${i});`);
  return [`// ${name}: a comment above is not part of it`, `export function ${name}() {`, ...body, '}', ''].join('\n');
}

function lengthsOf(path: string, text: string): Record<string, number> {
  return Object.fromEntries(measureSource(path, text).map((f) => [f.identity, f.lines]));
}

describe('measureSource', () => {
  it('counts from the first line to the last, inclusive', () => {
    expect(lengthsOf('src/a.ts', functionOf('settle', 70))).toEqual({ 'src/a.ts#settle': 70 });
    expect(lengthsOf('src/a.ts', 'const one = () => 1;\n')).toEqual({ 'src/a.ts#one': 1 });
  });

  it('names methods, constructors and accessors by their class', () => {
    const text = [
      'export class Ledger {',
      '  constructor(private readonly rows: number[]) {}',
      '  get size() { return this.rows.length; }',
      '  set size(value: number) { this.rows.length = value; }',
      '  apply(): void {',
      '    const check = (row: number) => row > 0;',
      '    this.rows.filter(check);',
      '  }',
      '  private readonly onTick = () => {};',
      '  overloaded(a: string): void;',
      '  overloaded(a: unknown): void {}',
      '}',
    ].join('\n');
    expect(lengthsOf('src/ledger.ts', text)).toEqual({
      'src/ledger.ts#Ledger.constructor': 1,
      'src/ledger.ts#Ledger.get size': 1,
      'src/ledger.ts#Ledger.set size': 1,
      'src/ledger.ts#Ledger.apply': 4,
      'src/ledger.ts#Ledger.apply.check': 1,
      'src/ledger.ts#Ledger.onTick': 1,
      'src/ledger.ts#Ledger.overloaded': 1,
    });
  });

  it('names an arrow by what holds it, and an anonymous one by a counter within its parent', () => {
    const text = [
      'export function drain(items: number[]) {',
      '  items.forEach((item) => item);',
      '  items.map((item) => {',
      '    return item;',
      '  });',
      '  const done = new Promise((resolve) => resolve(items));',
      '  return done;',
      '}',
      'const routes = { list() {}, nested: { show: (() => 1) as unknown } };',
      'await run(async () => {});',
      'export default () => {};',
    ].join('\n');
    expect(lengthsOf('src/drain.ts', text)).toEqual({
      'src/drain.ts#drain': 8,
      'src/drain.ts#drain.<anonymous>': 1,
      'src/drain.ts#drain.<anonymous>[2]': 3,
      'src/drain.ts#drain.done.<anonymous>': 1,
      'src/drain.ts#routes.list': 1,
      'src/drain.ts#routes.nested.show': 1,
      'src/drain.ts#<anonymous>': 1,
      'src/drain.ts#default': 1,
    });
  });

  it('gives identities that do not move with the lines above', () => {
    const text = functionOf('settle', 80);
    const shifted = `// a new header\n\nimport { x } from './x.ts';\n\n${text}`;
    expect(measureSource('src/a.ts', shifted)).toEqual(measureSource('src/a.ts', text));
  });
});

describe('judgeLengths', () => {
  const measure = (lines: number): FunctionLength[] => measureSource('src/scratch.ts', functionOf('settle', lines));

  it(`passes a function of ${FUNCTION_LINES_MAX} lines with no entry`, () => {
    expect(judgeLengths(measure(70), {})).toEqual([]);
  });

  it(`fails a function of ${FUNCTION_LINES_MAX + 1} lines with no entry`, () => {
    const offences = judgeLengths(measure(71), {});
    expect(offences).toEqual([{ kind: 'unlisted', identity: 'src/scratch.ts#settle', lines: 71 }]);
    expect(describeOffences(offences, LIST)).toBe(
      [
        `1 function(s) break the 70-line ratchet (${LIST}):`,
        '  src/scratch.ts#settle: 71 lines, allowed 70: split it (the list takes no new entry)',
      ].join('\n'),
    );
  });

  it('passes a listed function at its length, and fails one that grew', () => {
    expect(judgeLengths(measure(90), { 'src/scratch.ts#settle': 90 })).toEqual([]);
    const offences = judgeLengths(measure(91), { 'src/scratch.ts#settle': 90 });
    expect(offences).toEqual([{ kind: 'grew', identity: 'src/scratch.ts#settle', lines: 91, allowed: 90 }]);
    expect(describeOffences(offences, LIST)).toContain('src/scratch.ts#settle: 91 lines, allowed 90: it grew');
  });

  it('fails a listed function that shrank, gone or not, and asks to lower or remove its entry', () => {
    const lower = judgeLengths(measure(85), { 'src/scratch.ts#settle': 90 });
    expect(lower).toEqual([{ kind: 'shrank', identity: 'src/scratch.ts#settle', lines: 85, allowed: 90 }]);
    expect(describeOffences(lower, LIST)).toContain('85 lines, allowed 90: shorter, lower it in the list to 85');
    const remove = judgeLengths(measure(70), { 'src/scratch.ts#settle': 90 });
    expect(describeOffences(remove, LIST)).toContain('70 lines, allowed 90: now within 70, remove it from the list');
    const gone = judgeLengths([], { 'src/scratch.ts#settle': 90 });
    expect(gone).toEqual([{ kind: 'gone', identity: 'src/scratch.ts#settle', allowed: 90 }]);
    expect(describeOffences(gone, LIST)).toContain('no such function, allowed 90: remove it from the list');
    expect(describeOffences(gone, LIST)).toContain('npx tsx test/support/long-functions-cli.ts --write');
  });
});

describe('tightenList', () => {
  const measured: FunctionLength[] = [
    { identity: 'src/a.ts#grew', lines: 95 },
    { identity: 'src/a.ts#shorter', lines: 80 },
    { identity: 'src/a.ts#within', lines: 70 },
    { identity: 'src/a.ts#same', lines: 75 },
    { identity: 'src/a.ts#unlisted', lines: 200 },
  ];
  const list = {
    'src/a.ts#grew': 90,
    'src/a.ts#shorter': 90,
    'src/a.ts#within': 90,
    'src/a.ts#same': 75,
    'src/a.ts#gone': 90,
  };

  it('removes what is gone or within the limit, lowers what is shorter, and never adds or raises', () => {
    expect(tightenList(measured, list)).toEqual({ 'src/a.ts#grew': 90, 'src/a.ts#same': 75, 'src/a.ts#shorter': 80 });
    expect(tightenList(measured, {})).toEqual({});
  });

  it('leaves only what the code is, so the offences left are code to split', () => {
    expect(judgeLengths(measured, tightenList(measured, list)).map((o) => o.kind)).toEqual(['grew', 'unlisted']);
  });
});
