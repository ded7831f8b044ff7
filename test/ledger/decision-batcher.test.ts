// The batcher's bounds, with a decide() the test controls: a decision that never comes back is
// given up at the deadline (its transfers withdrawn with a retryable error, its slot freed for
// the next batch), an answer after the deadline is ignored, and a transfer whose lease is lost
// while it waits for a slot leaves at once (one in flight waits for its answer, as before).
import { describe, expect, it } from 'vitest';
import { DecisionTimeoutError } from '../../src/errors.ts';
import type { FencedOperation } from '../../src/ledger/apply-payments.ts';
import { type BatchStats, DECISION_DEADLINE_MS_DEFAULT, DecisionBatcher } from '../../src/ledger/decision-batcher.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';

const DEADLINE_MS = 150;
const LEASE_ID = '00000000-0000-4000-8000-000000000001';

function request(n: number): TransferRequest {
  return { operationId: `op-${n}`, from: 'w1', to: 'w2', amountMinor: 1n, currency: null };
}

function applied(transfers: readonly FencedOperation[]): ApplyResult[] {
  return transfers.map((t) => ({ outcome: 'applied', operationId: t.request.operationId, fence: String(t.fence) }));
}

/** A decide() whose calls the test answers (or never does). */
function controlledDecide() {
  const calls: { transfers: readonly FencedOperation[]; answer: (r: ApplyResult[]) => void }[] = [];
  const decide = (transfers: readonly FencedOperation[]) =>
    new Promise<ApplyResult[]>((resolve) => {
      calls.push({ transfers, answer: resolve });
    });
  return { calls, decide };
}

function settle<T>(p: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; err: unknown }> {
  return p.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
}

describe('DecisionBatcher deadline', () => {
  it('withdraws a batch whose decision does not come back, and frees its slot', async () => {
    const { calls, decide } = controlledDecide();
    const stats: BatchStats[] = [];
    const batcher = new DecisionBatcher({
      decide,
      batchMax: 2,
      waitMs: 0,
      inFlightMax: 1,
      deadlineMs: DEADLINE_MS,
      onBatch: (s) => stats.push(s),
    });
    const started = performance.now();
    const first = settle(batcher.expect().submit({ request: request(1), fence: 1n, leaseId: LEASE_ID }));
    // Waits for the slot the hung batch holds.
    const second = settle(batcher.expect().submit({ request: request(2), fence: 1n, leaseId: LEASE_ID }));
    const r1 = await first;
    expect(r1.ok).toBe(false);
    expect(r1.ok ? null : r1.err).toBeInstanceOf(DecisionTimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(DEADLINE_MS - 5);
    expect(stats[0]).toMatchObject({ size: 1, ok: false, timedOut: true });

    // The slot is free again: the second transfer went out, and this time the database answers.
    await expect.poll(() => calls.length).toBe(2);
    calls[1]?.answer(applied(calls[1].transfers));
    const r2 = await second;
    expect(r2).toMatchObject({ ok: true, value: { outcome: 'applied', operationId: 'op-2' } });

    // The first decision's late answer changes nothing.
    calls[0]?.answer(applied(calls[0].transfers));
    await batcher.idle();
    expect(batcher.load).toEqual({ pending: 0, expected: 0, inFlight: 0 });
    expect(stats.map((s) => s.timedOut)).toEqual([true, false]);
  });

  it('has a default deadline: the longest a call may take while the database answers', () => {
    const batcher = new DecisionBatcher({ decide: async () => [], batchMax: 1, waitMs: 0, inFlightMax: 1 });
    expect(batcher.deadlineMs).toBe(DECISION_DEADLINE_MS_DEFAULT);
    expect(DECISION_DEADLINE_MS_DEFAULT).toBe(11_000);
    expect(
      () => new DecisionBatcher({ decide: async () => [], batchMax: 1, waitMs: 0, inFlightMax: 1, deadlineMs: 0 }),
    ).toThrow(RangeError);
  });
});

describe('DecisionBatcher and a lost lease', () => {
  it('withdraws a waiting transfer at once when its signal fires', async () => {
    const { calls, decide } = controlledDecide();
    const batcher = new DecisionBatcher({ decide, batchMax: 1, waitMs: 0, inFlightMax: 1, deadlineMs: 60_000 });
    const first = settle(batcher.expect().submit({ request: request(1), fence: 1n, leaseId: LEASE_ID }));
    const lease = new AbortController();
    const waiting = settle(
      batcher.expect().submit({ request: request(2), fence: 1n, leaseId: LEASE_ID, signal: lease.signal }),
    );
    await expect.poll(() => calls.length).toBe(1);
    expect(batcher.load.pending).toBe(1);
    lease.abort(new Error('lease lost'));
    expect(await waiting).toMatchObject({ ok: false, err: { message: 'lease lost' } });
    expect(batcher.load.pending).toBe(0);
    calls[0]?.answer(applied(calls[0].transfers));
    expect(await first).toMatchObject({ ok: true });
    await batcher.idle();
    // Never sent.
    expect(calls).toHaveLength(1);
  });

  it('lets an in-flight transfer wait for its answer: the fence judges a decision already sent', async () => {
    const { calls, decide } = controlledDecide();
    const batcher = new DecisionBatcher({ decide, batchMax: 2, waitMs: 0, inFlightMax: 1, deadlineMs: 60_000 });
    const lease = new AbortController();
    const inFlight = settle(
      batcher.expect().submit({ request: request(1), fence: 1n, leaseId: LEASE_ID, signal: lease.signal }),
    );
    await expect.poll(() => calls.length).toBe(1);
    lease.abort(new Error('lease lost'));
    calls[0]?.answer(applied(calls[0].transfers));
    expect(await inFlight).toMatchObject({ ok: true, value: { outcome: 'applied' } });
    await batcher.idle();
    expect(batcher.load.inFlight).toBe(0);
  });

  it('does not queue a transfer whose signal has fired already', async () => {
    const { calls, decide } = controlledDecide();
    const batcher = new DecisionBatcher({ decide, batchMax: 1, waitMs: 0, inFlightMax: 1, deadlineMs: 60_000 });
    const lease = new AbortController();
    lease.abort(new Error('gone'));
    expect(
      await settle(
        batcher.expect().submit({ request: request(1), fence: 1n, leaseId: LEASE_ID, signal: lease.signal }),
      ),
    ).toMatchObject({ ok: false, err: { message: 'gone' } });
    await batcher.idle();
    expect(calls).toHaveLength(0);
  });
});
