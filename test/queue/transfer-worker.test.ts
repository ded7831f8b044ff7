// The pipeline end to end against the real Redis and PostgreSQL: duplicates, stale holders,
// lost fence counters, opposite transfers, overdrafts and conflicts, through real BullMQ workers.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { lockKeysOf } from '../../src/lock/lock-keys.ts';
import { type Pipeline, pipelinePerTest } from '../support/pipeline.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

const open = pipelinePerTest();

/** Blocks the whole thread, timers included, like a stop-the-world GC pause. */
function freezeThread(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

const FREEZE_POLL_MS = 50;
/** How long a frozen worker waits for the other to overtake it, on a loaded machine. */
const OVERTAKE_WAIT_MAX_MS = 30_000;

/**
 * Freezes the thread for at least minMs and then until `overtaken()` holds, at most
 * OVERTAKE_WAIT_MAX_MS: a pause that ends only once the world moved on, however slow the other
 * worker is. `overtaken` runs synchronously (a child process waited for), so no timer of the frozen
 * worker, its watchdog's included, runs before the pause ends. Answers whether it was overtaken.
 */
function freezeUntil(minMs: number, overtaken: () => boolean): boolean {
  freezeThread(minMs);
  const deadline = performance.now() + OVERTAKE_WAIT_MAX_MS;
  while (!overtaken()) {
    if (performance.now() > deadline) return false;
    freezeThread(FREEZE_POLL_MS);
  }
  return true;
}

/** Whether the operation's debit is committed, asked through psql so that the caller's thread stays blocked. */
function debitCommitted(databaseUrl: string, operationId: string): boolean {
  const sql = `SELECT count(*) FROM ledger_entries WHERE operation_id = '${operationId}' AND kind = 'debit'`;
  const r = spawnSync('psql', [databaseUrl, '-Atc', sql], { encoding: 'utf8', timeout: 10_000 });
  return r.status === 0 && r.stdout.trim() === '1';
}

describe('duplicate delivery', () => {
  async function deliverTenTimes(p: Pipeline): Promise<TransferOutcome[]> {
    await p.seed(2, 1_000n);
    await Promise.all([p.startWorker(), p.startWorker(), p.startWorker()]);
    const wire = { operationId: 'op-dup', from: 'w1', to: 'w2', amount: '100' };
    const jobs = await Promise.all(Array.from({ length: 10 }, () => p.addRaw(wire)));
    return (await Promise.all(jobs.map((j) => p.result(j)))) as TransferOutcome[];
  }

  it('the same operation delivered 10 times at once across 3 workers moves money once', async () => {
    const p = await open();
    const outcomes = await deliverTenTimes(p);
    expect(outcomes.filter((o) => o.outcome === 'applied')).toHaveLength(1);
    const duplicates = outcomes.filter((o) => o.outcome === 'duplicate');
    expect(duplicates).toHaveLength(9);
    for (const d of duplicates) {
      expect(d).toMatchObject({ outcome: 'duplicate', operationId: 'op-dup', stored: { status: 'applied' } });
    }
    expect(await p.debitsOf('op-dup')).toBe(1);
    expect(await p.balances()).toEqual({ w1: 900n, w2: 1_100n });
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });

  it('with the idempotency record switched off (unsafe), the same test sees money move more than once', async () => {
    const p = await open({
      TRANSFERS_UNSAFE: 'no-idempotency',
      TRANSFERS_ALLOW_UNSAFE: 'i-understand-this-breaks-guarantees',
    });
    const outcomes = await deliverTenTimes(p);
    // The guarded assertions of the test above fail here: that is the point of this control.
    expect(outcomes.filter((o) => o.outcome === 'applied').length).toBeGreaterThan(1);
    expect(await p.debitsOf('op-dup')).toBeGreaterThan(1);
    const report = await reconcile(p.db.prisma);
    expect(report.invariants.find((i) => i.name === 'at most one debit per operation')?.ok).toBe(false);
  });
});

describe('a worker paused past its lock TTL inside the apply', () => {
  /**
   * Worker A (in this process, one slot) takes op-slow alone. After its last lease check,
   * right before sending the decision, it starts worker B (another process, so B does not
   * freeze with it), hands B op-fast from the same wallet, and freezes: timers and all, as in
   * a stop-the-world GC pause. B takes the expired lock with a newer token and applies
   * op-fast; when A wakes, its decision carries the old token.
   */
  async function pauseScenario(p: Pipeline, ttlMs: number): Promise<TransferOutcome> {
    await p.seed(2, 1_000n);
    let paused = 0;
    let overtaken = false;
    let other: WorkerProcess | null = null;
    await p.startWorker({
      beforeApply: async ({ request }) => {
        if (request.operationId !== 'op-slow' || paused > 0) return;
        paused += 1;
        other = await spawnWorkerProcess(p);
        const fast = await p.addRaw({ operationId: 'op-fast', from: 'w1', to: 'w2', amount: '10' });
        while ((await fast.getState()) === 'waiting') await new Promise((r) => setTimeout(r, 10));
        // Past the lease, and until B has applied op-fast with the newer token: A's decision, when
        // it wakes, always comes after B's.
        overtaken = freezeUntil(8 * ttlMs, () => debitCommitted(p.db.url, 'op-fast'));
      },
    });
    try {
      const slow = await p.addRaw({ operationId: 'op-slow', from: 'w1', to: 'w2', amount: '100' });
      const outcome = (await p.result(slow, 50_000)) as TransferOutcome;
      expect(paused).toBe(1);
      expect(overtaken, `the other worker did not apply op-fast within ${OVERTAKE_WAIT_MAX_MS} ms`).toBe(true);
      return outcome;
    } finally {
      await (other as WorkerProcess | null)?.stop();
    }
  }

  it('is overtaken; its decision is refused (stale_fence) or aborted (lock_lost); applied exactly once', async () => {
    const p = await open({ LOCK_TTL_MS: '500', WORKER_CONCURRENCY: '1' });
    const outcome = await pauseScenario(p, 500);
    expect(outcome.outcome).toBe('applied');
    const metrics = await p.metrics();
    expect((metrics.stale_fence ?? 0) + (metrics.lock_lost ?? 0)).toBeGreaterThanOrEqual(1);
    expect(await p.debitsOf('op-slow')).toBe(1);
    expect(await p.debitsOf('op-fast')).toBe(1);
    expect(await p.balances()).toEqual({ w1: 890n, w2: 1_110n });
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });

  it('with fencing switched off (unsafe), the stale decision is taken and the checker sees fences go backwards', async () => {
    const p = await open({
      LOCK_TTL_MS: '500',
      WORKER_CONCURRENCY: '1',
      TRANSFERS_UNSAFE: 'no-fencing',
      TRANSFERS_ALLOW_UNSAFE: 'i-understand-this-breaks-guarantees',
    });
    await pauseScenario(p, 500);
    const metrics = await p.metrics();
    expect(metrics.stale_fence ?? 0).toBe(0);
    const report = await reconcile(p.db.prisma);
    const fences = report.invariants.find((i) => i.name.startsWith('per wallet, debit fences never decrease'));
    expect(fences?.ok).toBe(false);
    expect(fences?.counterexamples[0]).toMatchObject({ wallet_id: 'w1', operation_id: 'op-slow' });
  });
});

describe('Redis loses the fence counter', () => {
  it('transfers from the wallet resume by themselves, nothing double-applied', async () => {
    const p = await open();
    await p.seed(2, 10_000n);
    await p.startWorker();
    for (let i = 1; i <= 5; i++)
      await p.result(await p.addRaw({ operationId: `before-${i}`, from: 'w1', to: 'w2', amount: '1' }));
    // Data loss: the counter restarts at 1, below the database's last_fence of 5.
    await p.redis.del(lockKeysOf(p.config.lockKeyPrefix, 'w1').fenceKey);
    const outcomes: TransferOutcome[] = [];
    for (let i = 1; i <= 5; i++) {
      outcomes.push(
        (await p.result(
          await p.addRaw({ operationId: `after-${i}`, from: 'w1', to: 'w2', amount: '1' }),
        )) as TransferOutcome,
      );
    }
    expect(outcomes.map((o) => o.outcome)).toEqual(['applied', 'applied', 'applied', 'applied', 'applied']);
    const metrics = await p.metrics();
    expect(metrics.stale_fence).toBe(1);
    expect(metrics.fence_advanced).toBe(1);
    // Recovered inside the first attempt: no job failed an attempt on the way.
    const retried = (await p.queue.getCompleted()).filter(
      (j) => (j.stacktrace ?? []).length > 0 || j.attemptsMade !== 1,
    );
    expect(retried.map((j) => ({ id: j.data.operationId, trace: j.stacktrace }))).toEqual([]);
    expect(await p.balances()).toEqual({ w1: 9_990n, w2: 10_010n });
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });
});

describe('opposite transfers at once', () => {
  it('A->B and B->A, 500 each, from 3 workers: all applied or insufficient_funds, none failed, reconcile holds', async () => {
    const p = await open({ WORKER_CONCURRENCY: '8' });
    await p.seed(2, 2_000n);
    await Promise.all([p.startWorker(), p.startWorker(), p.startWorker()]);
    const wires = Array.from({ length: 500 }, (_, i) => [
      { operationId: `ab-${i}`, from: 'w1', to: 'w2', amount: String(1 + (i % 7)) },
      { operationId: `ba-${i}`, from: 'w2', to: 'w1', amount: String(1 + (i % 5)) },
    ]).flat();
    const jobs = await p.queue.addBulk(wires.map((data) => ({ name: 'transfer', data })));
    const settled = await Promise.all(jobs.map((j) => p.settle(j, 60_000)));
    expect(settled.filter((s) => !s.ok)).toEqual([]);
    const outcomes = settled.map((s) => (s.ok ? (s.value as TransferOutcome) : null));
    for (const o of outcomes) {
      expect(o?.outcome === 'applied' || (o?.outcome === 'rejected' && o.reason === 'insufficient_funds')).toBe(true);
    }
    expect(await p.queue.getFailedCount()).toBe(0);
    const report = await reconcile(p.db.prisma);
    expect(report.ok).toBe(true);
    expect(report.totals.transfersApplied + report.totals.transfersRejected).toBe(1_000);
  }, 120_000);
});

describe('concurrent debits against one balance', () => {
  it('balance 1,000 and 50 concurrent debits of 100: exactly 0 left, 10 applied, 40 insufficient_funds', async () => {
    const p = await open({ WORKER_CONCURRENCY: '8' });
    await p.seed(2, 1_000n);
    await Promise.all([p.startWorker(), p.startWorker(), p.startWorker()]);
    const jobs = await p.queue.addBulk(
      Array.from({ length: 50 }, (_, i) => ({
        name: 'transfer',
        data: { operationId: `debit-${i}`, from: 'w1', to: 'w2', amount: '100' },
      })),
    );
    const outcomes = (await Promise.all(jobs.map((j) => p.result(j)))) as TransferOutcome[];
    expect(outcomes.filter((o) => o.outcome === 'applied')).toHaveLength(10);
    expect(outcomes.filter((o) => o.outcome === 'rejected' && o.reason === 'insufficient_funds')).toHaveLength(40);
    expect(await p.balances()).toEqual({ w1: 0n, w2: 2_000n });
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });
});

describe('same operation id, different request', () => {
  it('moves money once; the other delivery answers conflict with the stored outcome', async () => {
    const p = await open();
    await p.seed(2, 1_000n);
    await p.startWorker();
    const first = (await p.result(
      await p.addRaw({ operationId: 'op-c', from: 'w1', to: 'w2', amount: '100' }),
    )) as TransferOutcome;
    const second = (await p.result(
      await p.addRaw({ operationId: 'op-c', from: 'w1', to: 'w2', amount: '250' }),
    )) as TransferOutcome;
    expect(first.outcome).toBe('applied');
    expect(second).toMatchObject({ outcome: 'conflict', operationId: 'op-c', stored: { status: 'applied' } });
    expect(await p.debitsOf('op-c')).toBe(1);
    expect(await p.balances()).toEqual({ w1: 900n, w2: 1_100n });
  });

  it('two different requests racing under one id: one decision, the other conflict', async () => {
    const p = await open();
    await p.seed(3, 1_000n);
    await Promise.all([p.startWorker(), p.startWorker()]);
    // Different source wallets: different locks, so only the database separates them.
    const jobs = await Promise.all([
      p.addRaw({ operationId: 'op-race', from: 'w1', to: 'w3', amount: '100' }),
      p.addRaw({ operationId: 'op-race', from: 'w2', to: 'w3', amount: '100' }),
    ]);
    const outcomes = (await Promise.all(jobs.map((j) => p.result(j)))) as TransferOutcome[];
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['applied', 'conflict']);
    expect(await p.debitsOf('op-race')).toBe(1);
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });
});
