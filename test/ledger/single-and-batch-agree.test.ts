// apply_transfer() (one transfer, its own lean body since the lean-single-decision migration) and
// apply_transfers() (the batch body) must decide alike: the same seeded sequence of transfers —
// duplicates, conflicts, stale tokens, an equal token of another lease, insufficient funds,
// unknown and same wallets, intake requests — is decided one by one through each, in two
// databases, and every answer and every row written (wallets, records, ledger, intake, outcome
// events) must be the same. Shown to fail by dropping the lease check from the single body (the
// equal-token-other-lease step then answers applied instead of stale_fence).
//
// Payments: every pair of operations where the second names the first (a capture, a void or a
// refund of a transfer, a hold, a capture, a void, a refund or a split, the first applied or
// rejected) is decided in two calls in one database and in one batch in the other, and every
// answer and every row must be the same: an operation decided earlier in a batch is seen as a
// committed one. Shown to fail by a refund of a capture or of a refund answering
// original_not_found in one batch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyPayments, decideOperations, type FencedOperation } from '../../src/ledger/apply-payments.ts';
import { applyTransfer, applyTransfers } from '../../src/ledger/apply-transfer.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import {
  type OperationRequest,
  type PaymentRequest,
  type TransferRequest,
  walletOf,
} from '../../src/ledger/transfer-request.ts';
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

const FIRST_KINDS = ['transfer', 'hold', 'capture', 'void', 'refund', 'split'] as const;
const NAMING_KINDS = ['capture', 'void', 'refund'] as const;
type FirstKind = (typeof FIRST_KINDS)[number];
type NamingKind = (typeof NAMING_KINDS)[number];
const PAYMENT_OPTIONS = { holdExpiryMaxMs: 604_800_000 };
/** More than any payer here has: the first of a pair is rejected insufficient_funds. */
const TOO_MUCH = 1_000_000_000n;

/** What a pair needs decided before it (a hold to capture or void, a transfer to refund). */
function setupOf(first: FirstKind, id: string): OperationRequest | undefined {
  if (first === 'capture' || first === 'void') {
    return {
      kind: 'hold',
      operationId: `${id}-h`,
      from: 'p1',
      to: 'p2',
      amountMinor: 100n,
      currency: null,
      expiresInMs: 60_000,
      expiresAt: null,
    };
  }
  if (first === 'refund') return { operationId: `${id}-t`, from: 'p1', to: 'p2', amountMinor: 100n, currency: null };
  return undefined;
}

/** The first of a pair, applied or (rejected) refused by a check of its own kind. */
function firstOf(kind: FirstKind, id: string, rejected: boolean): OperationRequest {
  const operationId = `${id}-a`;
  switch (kind) {
    case 'transfer':
      return { operationId, from: 'p1', to: 'p2', amountMinor: rejected ? TOO_MUCH : 100n, currency: null };
    case 'hold':
      return {
        kind,
        operationId,
        from: 'p1',
        to: 'p2',
        amountMinor: rejected ? TOO_MUCH : 100n,
        currency: null,
        expiresInMs: 60_000,
        expiresAt: null,
      };
    case 'capture':
      return { kind, operationId, from: 'p1', hold: `${id}-h`, amountMinor: rejected ? 101n : 70n };
    case 'void':
      return { kind, operationId, from: rejected ? 'p3' : 'p1', hold: `${id}-h` };
    case 'refund':
      return { kind, operationId, from: 'p2', original: `${id}-t`, amountMinor: rejected ? 101n : 40n };
    case 'split':
      return {
        kind,
        operationId,
        from: 'p1',
        currency: null,
        legs: [
          { to: 'p2', amountMinor: rejected ? TOO_MUCH : 60n },
          { to: 'p3', amountMinor: 40n },
        ],
      };
  }
}

/** The second of a pair names the first, from the wallet its rule wants debited. */
function secondOf(kind: NamingKind, first: OperationRequest, id: string): PaymentRequest {
  const operationId = `${id}-b`;
  // A refund is paid back by the first's payee (a void's: its payer); a capture or a void debits
  // the first's payer.
  const payee = 'kind' in first && (first.kind === 'refund' || first.kind === 'void') ? 'p1' : 'p2';
  if (kind === 'refund') return { kind, operationId, from: payee, original: first.operationId, amountMinor: null };
  const from = walletOf(first);
  if (kind === 'capture') return { kind, operationId, from, hold: first.operationId, amountMinor: null };
  return { kind, operationId, from, hold: first.operationId };
}

const described = (r: ApplyResult) =>
  r.outcome === 'rejected' ? `rejected:${r.reason}` : r.outcome === 'stale_fence' ? 'stale_fence' : r.outcome;

async function paymentState(db: TestDatabase) {
  const q = async (sql: string) => (await db.pg.query(sql)).rows;
  return {
    wallets: await q(
      "SELECT id, balance::text, held::text, last_fence::text FROM wallets WHERE id LIKE 'p%' ORDER BY id",
    ),
    transfers: await q(
      "SELECT operation_id, kind, original_id, from_wallet, to_wallet, amount::text, status, reason, fence::text FROM transfers WHERE operation_id LIKE 'pair-%' ORDER BY operation_id",
    ),
    ledger: await q(
      "SELECT operation_id, wallet_id, kind, amount::text FROM ledger_entries WHERE operation_id LIKE 'pair-%' OR operation_id LIKE '$expiry:pair-%' ORDER BY operation_id, wallet_id, kind",
    ),
    holds: await q(
      'SELECT hold_id, from_wallet, to_wallet, amount::text, state, captured::text, released::text, ended_by FROM holds ORDER BY hold_id',
    ),
    legs: await q('SELECT operation_id, leg, to_wallet, amount::text FROM split_legs ORDER BY operation_id, leg'),
    events: await q(
      "SELECT operation_id, kind, reason, operation, original_id, from_wallet, to_wallet, amount::text FROM outcome_pending WHERE operation_id LIKE 'pair-%' ORDER BY operation_id, id",
    ),
  };
}

describe('a pair of payment operations decides alike in one batch and in two calls', () => {
  it('every second operation naming the first, the first applied or rejected: same answers, same rows', async () => {
    for (const db of [single, batch]) {
      await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000_000n, prefix: 'p', currency: 'EUR' });
    }
    let fence = 1_000_000n;
    const fenced = (request: OperationRequest): FencedOperation => ({ request, fence, leaseId: leaseIdFor(fence) });
    const differ: string[] = [];
    const reached = new Set<string>();
    let pairs = 0;
    for (const firstKind of FIRST_KINDS) {
      for (const secondKind of NAMING_KINDS) {
        for (const rejected of [false, true]) {
          const id = `pair-${firstKind}-${secondKind}${rejected ? '-rejected' : ''}`;
          const first = firstOf(firstKind, id, rejected);
          const second = secondOf(secondKind, first, id);
          fence += 1n;
          const setup = setupOf(firstKind, id);
          for (const db of [single, batch]) {
            if (setup !== undefined) await decideOperations(db.prisma, [fenced(setup)], PAYMENT_OPTIONS);
          }
          fence += 1n;
          const apart = [
            ...(await decideOperations(single.prisma, [fenced(first)], PAYMENT_OPTIONS)),
            ...(await decideOperations(single.prisma, [fenced(second)], PAYMENT_OPTIONS)),
          ];
          // One call of the payments' decision in this order; a transfer can only go first, through
          // decideOperations(), which decides it before the payments.
          const together =
            'kind' in first
              ? await applyPayments(
                  batch.prisma,
                  [first, second].map(fenced) as Parameters<typeof applyPayments>[1],
                  PAYMENT_OPTIONS,
                )
              : await decideOperations(batch.prisma, [fenced(first), fenced(second)], PAYMENT_OPTIONS);
          pairs += 1;
          const [a, b] = [apart.map(described).join(', '), together.map(described).join(', ')];
          for (const r of apart) reached.add(described(r));
          if (a !== b) differ.push(`${id}: two calls ${a}; one batch ${b}`);
        }
      }
    }
    // The refund of a refund is among them: a refund of a transfer, then a refund naming it.
    expect(pairs).toBe(FIRST_KINDS.length * NAMING_KINDS.length * 2);
    expect(differ).toEqual([]);
    // The pairs reach these answers (of the first and of the second), or they prove less than they claim.
    expect([...reached].sort()).toEqual([
      'applied',
      'rejected:exceeds_hold_amount',
      'rejected:hold_not_found',
      'rejected:hold_rejected',
      'rejected:insufficient_funds',
      'rejected:original_not_refundable',
      'rejected:refund_exceeds_original',
      'rejected:wallet_mismatch',
    ]);
    expect(await paymentState(batch)).toEqual(await paymentState(single));
  });
});
