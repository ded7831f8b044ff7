// Batched decisions through real BullMQ workers against the real Redis and PostgreSQL: jobs a
// process holds at once share a round trip and a commit, a hot wallet's jobs ride on one lease,
// and a batch whose backend is killed is retried with every transfer ending exactly once.

import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { BatchStats } from '../../src/ledger/decision-batcher.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { lockKeysOf } from '../../src/lock/lock-keys.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';

const open = pipelinePerTest();

async function runAll(p: Pipeline, wires: object[]): Promise<TransferOutcome[]> {
  const jobs = await p.queue.addBulk(wires.map((data) => ({ name: 'transfer', data })));
  return (await Promise.all(jobs.map((j) => p.result(j, 60_000)))) as TransferOutcome[];
}

const uniform = (n: number, wallets: number) =>
  Array.from({ length: n }, (_, i) => ({
    operationId: `u-${i}`,
    from: `w${1 + (i % wallets)}`,
    to: `w${1 + ((i + 1) % wallets)}`,
    amount: '1',
  }));

describe('jobs held at the same time', () => {
  it('are decided together: fewer commits than transfers, each with its own outcome', async () => {
    const p = await open({ WORKER_CONCURRENCY: '16', TRANSFER_BATCH_WAIT_MS: '50' });
    await p.seed(40, 1_000n);
    const batches: BatchStats[] = [];
    await p.startWorker({ onBatch: (s) => batches.push(s) });
    const outcomes = await runAll(p, uniform(80, 40));
    expect(outcomes.every((o) => o.outcome === 'applied')).toBe(true);
    expect(batches.reduce((n, b) => n + b.size, 0)).toBe(80);
    expect(Math.max(...batches.map((b) => b.size))).toBeGreaterThan(1);
    expect(batches.length).toBeLessThan(80);
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });

  it('control: TRANSFER_BATCH_MAX=1 sends one transfer per commit', async () => {
    const p = await open({ WORKER_CONCURRENCY: '16', TRANSFER_BATCH_WAIT_MS: '50', TRANSFER_BATCH_MAX: '1' });
    await p.seed(40, 1_000n);
    const batches: BatchStats[] = [];
    await p.startWorker({ onBatch: (s) => batches.push(s) });
    const outcomes = await runAll(p, uniform(80, 40));
    expect(outcomes.every((o) => o.outcome === 'applied')).toBe(true);
    expect(batches.map((b) => b.size)).toEqual(Array(80).fill(1));
  });

  it('a lone job on a quiet worker is sent at once, without waiting for company', async () => {
    const p = await open({ WORKER_CONCURRENCY: '16', TRANSFER_BATCH_WAIT_MS: '1000' });
    await p.seed(2, 1_000n);
    const batches: BatchStats[] = [];
    await p.startWorker({ onBatch: (s) => batches.push(s) });
    const [outcome] = await runAll(p, [{ operationId: 'lone', from: 'w1', to: 'w2', amount: '1' }]);
    expect(outcome?.outcome).toBe('applied');
    expect(batches).toEqual([expect.objectContaining({ size: 1, trigger: 'quiet' })]);
  });
});

describe('a hot wallet', () => {
  async function hotRun(
    env: Record<string, string>,
  ): Promise<{ acquisitions: number; metrics: Record<string, number> }> {
    const p = await open({ WORKER_CONCURRENCY: '16', TRANSFER_BATCH_WAIT_MS: '20', ...env });
    await p.seed(10, 100_000n);
    await p.startWorker();
    const wires = Array.from({ length: 60 }, (_, i) => ({
      operationId: `hot-${i}`,
      from: 'w1',
      to: `w${2 + (i % 9)}`,
      amount: '1',
    }));
    const outcomes = await runAll(p, wires);
    expect(outcomes.every((o) => o.outcome === 'applied')).toBe(true);
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
    // Every acquisition of w1's lock took one number from its fence counter.
    const fence = await p.redis.get(lockKeysOf(p.config.lockKeyPrefix, 'w1').fenceKey);
    return { acquisitions: Number(fence), metrics: await p.metrics() };
  }

  it('costs one lock acquisition per ride, not per job, and no job is handed back as busy', async () => {
    const { acquisitions, metrics } = await hotRun({});
    expect(acquisitions).toBeGreaterThan(0);
    expect(acquisitions).toBeLessThanOrEqual(20);
    expect(metrics.lock_busy ?? 0).toBe(0);
  });

  it('control: with riding off (LOCK_RIDE_MS_MAX=0) every job takes the lock itself', async () => {
    const { acquisitions } = await hotRun({ LOCK_RIDE_MS_MAX: '0' });
    expect(acquisitions).toBeGreaterThanOrEqual(60);
  });
});

describe('a batch whose database backend is killed', () => {
  it('fails as a whole, is retried, and every transfer in it ends applied exactly once', async () => {
    const p = await open({ WORKER_CONCURRENCY: '10', TRANSFER_BATCH_WAIT_MS: '300' });
    await p.seed(11, 1_000n);
    // Hold w1's row, so the batch (which needs it) waits inside the call where it can be killed.
    const blocker = new pg.Client({ connectionString: p.db.url });
    blocker.on('error', () => undefined);
    await blocker.connect();
    await blocker.query("BEGIN; SELECT 1 FROM wallets WHERE id = 'w1' FOR UPDATE");
    const batches: BatchStats[] = [];
    await p.startWorker({ onBatch: (s) => batches.push(s) });
    const wires = Array.from({ length: 10 }, (_, i) => ({
      operationId: `k-${i}`,
      from: `w${2 + i}`,
      to: 'w1',
      amount: '5',
    }));
    const jobs = await p.queue.addBulk(wires.map((data) => ({ name: 'transfer', data })));
    let killed = 0;
    try {
      for (let i = 0; i < 400 && killed === 0; i++) {
        const r = await p.db.pg.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%apply_transfers%'",
        );
        for (const { pid } of r.rows) {
          await p.db.pg.query('SELECT pg_terminate_backend($1)', [pid]);
          killed += 1;
        }
        if (killed === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    expect(killed).toBe(1);
    const outcomes = (await Promise.all(jobs.map((j) => p.result(j, 60_000)))) as TransferOutcome[];
    expect(outcomes.map((o) => o.outcome)).toEqual(Array(10).fill('applied'));
    expect(batches.filter((b) => !b.ok).length).toBeGreaterThanOrEqual(1);
    expect((await p.metrics()).transient_error ?? 0).toBeGreaterThanOrEqual(1);
    for (const w of wires) expect(await p.debitsOf(w.operationId)).toBe(1);
    expect((await p.balances()).w1).toBe(1_050n);
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });
});
