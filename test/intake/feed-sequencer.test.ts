// A worker process keeps the outcome feed moving by itself (src/intake/feed-sequencer.ts): reading
// never sequences (the front-door-edges migration), so without the worker's timer a decision
// would never reach a reader of the feed. Here nobody but the worker sequences: the test only reads.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readOutcomes } from '../../src/intake/outcome-feed.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';
import { waitFor } from '../support/worker-ops.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

let p: Pipeline;

beforeAll(async () => {
  p = await createPipeline();
  await p.seed(2, 1_000n, 'w');
});

afterAll(async () => {
  await p?.close();
});

it('a decision of a worker process reaches the feed within its OUTCOME_SEQUENCE_INTERVAL_MS, with no other sequencer', {
  timeout: 120_000,
}, async () => {
  const worker = await spawnWorkerProcess(p, { OUTCOME_SEQUENCE_INTERVAL_MS: '50' });
  try {
    const job = await p.queue.add(TRANSFER_JOB_NAME, { operationId: 'seq-1', from: 'w1', to: 'w2', amount: '5' });
    expect(await p.result(job)).toMatchObject({ outcome: 'applied' });
    const events = await waitFor('the decision in the feed', 10_000, async () => {
      const read = await readOutcomes(p.db.pg, 0n);
      return read.length > 0 ? read : undefined;
    });
    expect(events.map((e) => [e.position, e.operationId, e.kind])).toEqual([[1n, 'seq-1', 'applied']]);
  } finally {
    await worker.stop();
  }
});
