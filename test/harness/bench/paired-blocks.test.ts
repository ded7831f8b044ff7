// db-ceiling-paired alternates today's single decision and the first migration's in blocks:
// which call uses which, how long a block is, and how each function's rate is summed.
import { describe, expect, it } from 'vitest';
import {
  PAIRED_BLOCKS_PER_FUNCTION,
  pairedBlockSize,
  pairedDecisionOfBlock,
  pairedRates,
} from '../../../harness/bench/db-ceiling.ts';

describe('db-ceiling-paired blocks', () => {
  it('alternates the functions block by block, today, first, first, today (ABBA)', () => {
    const calls = Array.from({ length: 15 }, (_, i) => pairedDecisionOfBlock(Math.floor(i / 3)));
    expect(calls).toEqual([
      ...['today', 'today', 'today'],
      ...['first', 'first', 'first'],
      ...['first', 'first', 'first'],
      ...['today', 'today', 'today'],
      ...['today', 'today', 'today'],
    ]);
  });

  it("puts both functions' blocks at the same mean position in a default run", () => {
    const blocks = Array.from({ length: 2 * PAIRED_BLOCKS_PER_FUNCTION }, (_, b) => b);
    const mean = (which: string) => {
      const own = blocks.filter((b) => pairedDecisionOfBlock(b) === which);
      return own.reduce((a, b) => a + b, 0) / own.length;
    };
    expect(mean('today')).toBe(mean('first'));
  });

  it('gives each function a tenth of its share per block, and every connection four calls at least', () => {
    expect(pairedBlockSize(20_000, 64)).toBe(20_000 / (2 * PAIRED_BLOCKS_PER_FUNCTION));
    expect(pairedBlockSize(300, 64)).toBe(256);
  });

  it("sums each function's calls over the summed spans of its own blocks", () => {
    const rates = pairedRates(
      new Map([
        [0, { calls: 100, startMs: 0, endMs: 100 }], // today: 100 calls in 100 ms
        [1, { calls: 100, startMs: 100, endMs: 300 }], // first: 100 calls in 200 ms
        [2, { calls: 50, startMs: 300, endMs: 500 }], // first: 50 in 200 ms
        [3, { calls: 50, startMs: 500, endMs: 550 }], // today: 50 in 50 ms
      ]),
    );
    expect(rates.today).toBeCloseTo(1_000, 6);
    expect(rates.first).toBeCloseTo(375, 6);
    expect(pairedRates(new Map([[0, { calls: 10, startMs: 0, endMs: 10 }]])).first).toBeNull();
  });
});
