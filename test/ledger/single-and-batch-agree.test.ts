// apply_transfer() (one transfer, its own lean body since the lean-single-decision migration) and
// apply_transfers() (the batch body) must decide alike: the same seeded sequence of transfers —
// duplicates, conflicts, stale tokens, an equal token of another lease, insufficient funds,
// unknown and same wallets, intake requests — is decided one by one through each, in two
// databases, and every answer and every row written (wallets, records, ledger, intake, outcome
// events) must be the same. Shown to fail by dropping the lease check from the single body (the
// equal-token-other-lease step then answers applied instead of stale_fence).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTransfer, applyTransfers } from '../../src/ledger/apply-transfer.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let single: TestDatabase;
let batch: TestDatabase;
beforeAll(async () => {
  [single, batch] = await Promise.all([createTestDatabase('ft_agree_single'), createTestDatabase('ft_agree_batch')]);
});
afterAll(async () => Promise.all([single.drop(), batch.drop()]));

interface Step {
  request: TransferRequest;
  fence: bigint;
  holder: number;
}

/** A seeded sequence that reaches every branch of the decision. */
function steps(seed: number, count: number): Step[] {
  let state = seed >>> 0;
  const next = (n: number) => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state % n;
  };
  const out: Step[] = [];
  const fences = new Map<string, bigint>();
  for (let i = 0; i < count; i++) {
    const pick = next(10);
    const from = pick === 0 ? 'ghost' : `w${next(6) + 1}`;
    const to = pick === 1 ? from : pick === 2 ? 'usd1' : `w${next(6) + 1}`;
    const previous = out[next(Math.max(1, out.length))];
    const reuse = previous !== undefined && pick >= 8;
    const request: TransferRequest = reuse
      ? pick === 8
        ? previous.request
        : { ...previous.request, amountMinor: previous.request.amountMinor + 1n }
      : { operationId: `op-${i}`, from, to, amountMinor: BigInt(next(400) + 1), currency: pick === 3 ? 'USD' : null };
    const last = fences.get(request.from) ?? 0n;
    const move = next(4);
    const fence = move === 0 && last > 1n ? last - 1n : move === 1 && last > 0n ? last : last + 1n;
    const holder = move === 1 ? next(2) : 0;
    if (fence > last) fences.set(request.from, fence);
    out.push({ request, fence, holder });
  }
  // Redis lost increments: a second lease carries the token that set w5's fence.
  const top = (fences.get('w5') ?? 0n) + 1n;
  const lease = (operationId: string, holder: number): Step => ({
    request: { operationId, from: 'w5', to: 'w6', amountMinor: 1n, currency: null },
    fence: top,
    holder,
  });
  out.push(lease('lease-first', 0), lease('lease-second', 1));
  return out;
}

async function state(db: TestDatabase) {
  const q = async (sql: string) => (await db.pg.query(sql)).rows;
  return {
    wallets: await q('SELECT id, balance::text, last_fence::text, last_lease::text FROM wallets ORDER BY id'),
    transfers: await q(
      'SELECT operation_id, request_hash, status, reason, fence::text, lease::text FROM transfers ORDER BY operation_id',
    ),
    ledger: await q(
      "SELECT operation_id, wallet_id, kind, amount::text, fence::text, lease::text FROM ledger_entries WHERE kind IN ('debit', 'credit') ORDER BY operation_id, kind",
    ),
    requests: await q('SELECT operation_id, decided_at IS NOT NULL AS decided FROM transfer_requests ORDER BY 1'),
    events: await q('SELECT operation_id, kind, reason FROM outcome_pending ORDER BY operation_id'),
  };
}

describe('the single-transfer decision and the batch decide alike', () => {
  it('gives the same answers and writes the same rows for a seeded sequence of 400 transfers', async () => {
    const sequence = steps(20261205, 400);
    for (const db of [single, batch]) {
      await seedWallets(db.prisma, { wallets: 6, balanceMinor: 2_000n, prefix: 'w', currency: 'EUR' });
      await seedWallets(db.prisma, { wallets: 1, balanceMinor: 2_000n, prefix: 'usd', currency: 'USD' });
      // Some operations come through the intake, so marking a request decided is compared too.
      await db.pg.query(
        "SELECT request_transfer('op-' || i, 'w1', 'w2', 1) FROM generate_series(0, 399, 7) i WHERE NOT EXISTS (SELECT 1 FROM transfers WHERE operation_id = 'op-' || i)",
      );
    }
    const answers: { single: ApplyResult; batch: ApplyResult }[] = [];
    for (const { request, fence, holder } of sequence) {
      const leaseId = leaseIdFor(fence, holder);
      const one = await applyTransfer(single.prisma, request, fence, leaseId);
      const [many] = await applyTransfers(batch.prisma, [{ request, fence, leaseId }]);
      answers.push({ single: one, batch: many as ApplyResult });
    }
    const outcomes = new Set(answers.map((a) => a.single.outcome));
    // The sequence reaches every outcome, or the comparison proves less than it claims.
    expect([...outcomes].sort()).toEqual(['applied', 'conflict', 'duplicate', 'rejected', 'stale_fence']);
    for (const [i, a] of answers.entries()) expect(a.single, `step ${i}`).toEqual(a.batch);
    expect(answers.at(-1)?.single.outcome).toBe('stale_fence');
    expect(await state(single)).toEqual(await state(batch));
  });
});
