// The length ratchet: no function in src/ or harness/ is over 70 lines (TigerStyle's limit, see
// test/support/function-lengths.ts) unless test/layout/long-functions.json lists it, and a listed
// one is at most as long as its entry. The list only shrinks: a function missing from it, one that
// grew, and an entry the code has outgrown all fail here; `npx tsx
// test/support/long-functions-cli.ts --write` removes and lowers entries and can do nothing else.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, assert, describe, expect, it } from 'vitest';
import { describeOffences, judgeLengths } from '../support/function-lengths.ts';
import {
  LONG_FUNCTIONS_LIST,
  measuredFiles,
  measureProject,
  readList,
  tightenListFile,
} from '../support/long-functions.ts';

describe('the length ratchet', () => {
  it('holds on src/ and harness/', () => {
    expect(measuredFiles().length).toBeGreaterThan(100);
    expect(measuredFiles().some((path) => path.startsWith('src/generated/'))).toBe(false);
    const offences = judgeLengths(measureProject(), readList());
    if (offences.length > 0) assert.fail(describeOffences(offences, LONG_FUNCTIONS_LIST));
  });

  describe('its regeneration', () => {
    const scratch = mkdtempSync(join(tmpdir(), 'ft-long-functions-'));
    afterAll(() => rmSync(scratch, { recursive: true, force: true }));
    const write = (path: string, text: string): void => {
      mkdirSync(dirname(join(scratch, path)), { recursive: true });
      writeFileSync(join(scratch, path), text);
    };
    const functionOf = (name: string, lines: number): string =>
      [`export function ${name}() {`, ...Array.from({ length: lines - 2 }, () => '  step();'), '}', ''].join('\n');

    it('removes and lowers entries in the file, and never adds or raises one', () => {
      write(
        'src/flow.ts',
        [80, 95, 60, 120].map((lines, i) => functionOf(['shorter', 'grew', 'split', 'fresh'][i]!, lines)).join(''),
      );
      write(
        LONG_FUNCTIONS_LIST,
        JSON.stringify({
          about: 'scratch',
          functions: {
            'src/flow.ts#grew': 90,
            'src/flow.ts#shorter': 90,
            'src/flow.ts#split': 90,
            'src/gone.ts#old': 90,
          },
        }),
      );
      const measured = measureProject(scratch, ['src']);
      const written = tightenListFile(measured, scratch);
      expect(written).toEqual({ 'src/flow.ts#grew': 90, 'src/flow.ts#shorter': 80 });
      expect(readList(scratch)).toEqual(written);
      expect(readFileSync(join(scratch, LONG_FUNCTIONS_LIST), 'utf8')).toContain('\n    "src/flow.ts#grew": 90,\n');
      expect(judgeLengths(measured, written).map((o) => `${o.kind} ${o.identity}`)).toEqual([
        'unlisted src/flow.ts#fresh',
        'grew src/flow.ts#grew',
      ]);
    });
  });
});
