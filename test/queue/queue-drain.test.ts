// waitForDrain on a queue whose counts never answer (its connection retries for ever while
// Redis is gone): the wait fails within its bound, saying the counts did not answer, instead of
// hanging; and an interrupted run stops waiting at once. The queue is a stand-in whose
// getJobCounts never settles: the wait only reads counts.
import type { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { waitForDrain } from '../../src/queue/queue-drain.ts';

const WAIT_MS = 300;
/** Far above WAIT_MS and a poll interval, far below the long wait of the interrupted case. */
const NOTICED_WITHIN_MS = 5_000;
const LONG_WAIT_MS = 60_000;

const stuck = { name: 'stuck', getJobCounts: () => new Promise(() => undefined) } as unknown as Queue;

describe('waitForDrain', () => {
  it('fails within its bound when the counts never answer', async () => {
    const t0 = performance.now();
    await expect(waitForDrain(stuck, WAIT_MS)).rejects.toThrow(
      `queue stuck did not drain within ${WAIT_MS} ms: its counts did not answer`,
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });

  it('stops at once when interrupted while the counts do not answer', async () => {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), WAIT_MS);
    const t0 = performance.now();
    await expect(waitForDrain(stuck, LONG_WAIT_MS, undefined, stop.signal)).rejects.toThrow('interrupted');
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });
});
