// The bench's round-trip probe (harness/bench/machine.ts) against the real Redis: it times
// each PING from send to answer, one at a time, and reports the median in microseconds. A
// probe that timed nothing, or the whole loop, would fail here: the median of PINGs sent one
// after another must be above zero and within twice the loop's time per PING.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisRoundTripUs } from '../../../harness/bench/machine.ts';
import { loadConfig } from '../../../src/config/config.ts';

let redis: Redis;

beforeAll(() => {
  redis = new Redis(loadConfig(process.env).redisUrl, { lazyConnect: false });
});
afterAll(() => redis.disconnect());

describe('redisRoundTripUs', () => {
  it('reports the median PING round trip, within twice the loop time per PING', async () => {
    await redis.ping();
    const pings = 400;
    const t0 = process.hrtime.bigint();
    const us = await redisRoundTripUs(redis, pings);
    const loopUs = Number(process.hrtime.bigint() - t0) / 1_000;
    expect(us).toBeGreaterThan(0);
    // Round trips are skewed to the slow side, so their median sits at or below their mean, and
    // the mean below the loop's time per PING; twice that leaves room for an odd machine, and
    // still fails a probe that timed the whole loop (hundreds of times more).
    expect(us).toBeLessThan((2 * loopUs) / pings);
  });

  it('refuses a probe of no PINGs', async () => {
    await expect(redisRoundTripUs(redis, 0)).rejects.toThrow(RangeError);
  });
});
