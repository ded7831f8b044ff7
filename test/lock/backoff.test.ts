// Unit tests of the pure full-jitter back-off.
import { describe, expect, it } from 'vitest';
import { fullJitterDelayMs } from '../../src/lock/backoff.ts';
import { seededRandom } from '../../src/workload/prng.ts';

const JUST_BELOW_ONE = 1 - Number.EPSILON;

describe('fullJitterDelayMs', () => {
  it('draws from [0, min(cap, base * 2^attempt)]: the ends of the range', () => {
    expect(fullJitterDelayMs(0, 20, 500, () => 0)).toBe(0);
    expect(fullJitterDelayMs(0, 20, 500, () => JUST_BELOW_ONE)).toBe(20);
    expect(fullJitterDelayMs(1, 20, 500, () => JUST_BELOW_ONE)).toBe(40);
    expect(fullJitterDelayMs(3, 20, 500, () => JUST_BELOW_ONE)).toBe(160);
    expect(fullJitterDelayMs(4, 20, 500, () => JUST_BELOW_ONE)).toBe(320);
    expect(fullJitterDelayMs(5, 20, 500, () => JUST_BELOW_ONE)).toBe(500);
    expect(fullJitterDelayMs(5, 20, 500, () => 0)).toBe(0);
  });

  it('scales linearly with the draw and returns whole milliseconds', () => {
    expect(fullJitterDelayMs(2, 25, 1000, () => 0.5)).toBe(50);
    const delayMs = fullJitterDelayMs(2, 25, 1000, () => 0.123456);
    expect(Number.isInteger(delayMs)).toBe(true);
  });

  it('stays at the cap for huge attempt numbers instead of overflowing', () => {
    expect(fullJitterDelayMs(10_000, 20, 500, () => JUST_BELOW_ONE)).toBe(500);
    expect(fullJitterDelayMs(Number.MAX_SAFE_INTEGER, 1, 60_000, () => JUST_BELOW_ONE)).toBe(60_000);
  });

  it('covers the whole range roughly uniformly (seeded)', () => {
    const random = seededRandom(42);
    const draws = Array.from({ length: 20_000 }, () => fullJitterDelayMs(3, 10, 1000, random));
    expect(Math.min(...draws)).toBe(0);
    expect(Math.max(...draws)).toBe(80);
    const meanMs = draws.reduce((sum, value) => sum + value, 0) / draws.length;
    expect(meanMs).toBeGreaterThan(38);
    expect(meanMs).toBeLessThan(42);
    // Full jitter: the lower half is as likely as the upper half (equal jitter would never go below 40).
    const lowerHalf = draws.filter((value) => value < 40).length / draws.length;
    expect(lowerHalf).toBeGreaterThan(0.45);
    expect(lowerHalf).toBeLessThan(0.55);
  });

  it('is deterministic for the same random source', () => {
    const first = Array.from({ length: 10 }, (_, attempt) => fullJitterDelayMs(attempt, 20, 500, seededRandom(7)));
    const second = Array.from({ length: 10 }, (_, attempt) => fullJitterDelayMs(attempt, 20, 500, seededRandom(7)));
    expect(first).toEqual(second);
  });

  it('refuses nonsense inputs', () => {
    expect(() => fullJitterDelayMs(-1, 20, 500, () => 0)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(1.5, 20, 500, () => 0)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(0, 0, 500, () => 0)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(0, 20, 10, () => 0)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(0, 20, 500, () => 1)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(0, 20, 500, () => -0.1)).toThrow(RangeError);
    expect(() => fullJitterDelayMs(0, 20, 500, () => Number.NaN)).toThrow(RangeError);
  });
});
