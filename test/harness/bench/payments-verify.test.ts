// e2e-payments' operations and its own checks (harness/bench/bench-workload.ts, verify.ts):
// the holds are e2e's transfers of the run, each capture follows its hold, each split has four
// distinct payees, and every wire is one the worker accepts. Then, against a real sandbox on the
// configured PostgreSQL (the operations decided with apply_payments() as the worker calls it),
// each part passes its checks once its operations applied, and is refused when a hold is
// missing or left active, a leg is missing, or a wallet is off its expected balance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPLIT_LEGS } from '../../../harness/bench/bench-options.ts';
import {
  BENCH_HOLD_EXPIRES_IN_MS,
  benchBalanceMinor,
  benchPayments,
  benchWorkload,
  paymentsFunded,
  SPLIT_LEG_AMOUNT_MAX_MINOR,
} from '../../../harness/bench/bench-workload.ts';
import { UNLOCKED_FENCE, UNLOCKED_LEASE_ID } from '../../../harness/bench/decision-call.ts';
import { benchRunId, Sandbox, sandboxNames } from '../../../harness/bench/sandbox.ts';
import { expectedPaymentBalances, holdingWalletOf, verifyPaymentsPart } from '../../../harness/bench/verify.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { applyPayments } from '../../../src/ledger/apply-payments.ts';
import {
  type OperationWire,
  type PaymentRequest,
  validateOperationRequest,
} from '../../../src/ledger/transfer-request.ts';

const OPERATIONS = 12;
const WALLETS = 20;
const AMOUNT_MAX = 10n ** 15n;
const config = loadConfig();
const spec = {
  transfers: OPERATIONS,
  wallets: WALLETS,
  run: 1,
  operationPrefix: 'r1-',
  holdExpiresInMs: BENCH_HOLD_EXPIRES_IN_MS,
};
const payments = benchPayments(spec);
const opening = benchBalanceMinor(OPERATIONS);

describe('e2e-payments operations', () => {
  it('holds e2e’s transfers of the run, captures each hold whole, splits from the same payers', () => {
    const transfers = benchWorkload({ ...spec, hot: false });
    expect(payments.holds.map((h) => [h.from, h.to, h.amount])).toEqual(transfers.map((t) => [t.from, t.to, t.amount]));
    expect(payments.holds[0]?.operationId).toBe(`r1-h${transfers[0]?.operationId.slice(3)}`);
    expect(payments.captures.map((c) => [c.hold, c.from])).toEqual(payments.holds.map((h) => [h.operationId, h.from]));
    expect(payments.captures.every((c) => c.amount === undefined)).toBe(true);
    expect(payments.splits.map((s) => s.from)).toEqual(transfers.map((t) => t.from));
    for (const s of payments.splits) {
      const payees = s.legs.map((l) => l.to);
      expect(new Set(payees).size).toBe(SPLIT_LEGS);
      expect(payees).not.toContain(s.from);
      for (const l of s.legs) expect(Number(l.amount)).toBeLessThanOrEqual(SPLIT_LEG_AMOUNT_MAX_MINOR);
    }
    // The same run gives the same operations; every one of them is accepted as the worker reads it.
    expect(benchPayments(spec)).toEqual(payments);
    for (const wire of [...payments.holds, ...payments.captures, ...payments.splits]) {
      const verdict = validateOperationRequest(wire, AMOUNT_MAX, config.holdExpiryMaxMs);
      expect(verdict.ok, JSON.stringify(wire)).toBe(true);
    }
    expect(paymentsFunded(payments, opening)).toBe(true);
    expect(paymentsFunded(payments, 1n)).toBe(false);
    expect(() => benchPayments({ ...spec, wallets: SPLIT_LEGS })).toThrow(RangeError);
  });

  it('moves each hold to its payer’s holding wallet, then to its payee', () => {
    const h = payments.holds[0];
    if (h === undefined) throw new Error('no hold');
    const held = expectedPaymentBalances(payments, WALLETS, opening, 'e2e-payments-hold');
    const sumHeld = payments.holds.filter((x) => x.from === h.from).reduce((a, x) => a + BigInt(x.amount), 0n);
    expect(held.get(holdingWalletOf(h.from))).toBe(sumHeld);
    const captured = expectedPaymentBalances(payments, WALLETS, opening, 'e2e-payments-capture');
    expect(captured.get(holdingWalletOf(h.from))).toBe(0n);
    const total = (m: Map<string, bigint>) => [...m.values()].reduce((a, b) => a + b, 0n);
    const split = expectedPaymentBalances(payments, WALLETS, opening, 'e2e-payments-split');
    expect(total(held)).toBe(opening * BigInt(WALLETS));
    expect(total(split)).toBe(opening * BigInt(WALLETS));
  });
});

describe('bench verification of the payments case', () => {
  let sandbox: Sandbox;
  const pool = () => sandbox.requirePool();
  const check = (part: Parameters<typeof verifyPaymentsPart>[1]) =>
    verifyPaymentsPart(sandbox, part, payments, 'r1-', WALLETS, opening);
  const apply = async (wires: readonly OperationWire[]) => {
    const items = wires.map((wire) => {
      const verdict = validateOperationRequest(wire, AMOUNT_MAX, config.holdExpiryMaxMs);
      if (!verdict.ok) throw new Error(verdict.reason);
      return { request: verdict.request as PaymentRequest, fence: UNLOCKED_FENCE, leaseId: UNLOCKED_LEASE_ID };
    });
    const prisma = sandbox.prisma;
    if (prisma === null) throw new Error('no database');
    const results = await applyPayments(prisma, items, { holdExpiryMaxMs: config.holdExpiryMaxMs });
    expect(results.map((r) => r.outcome)).toEqual(wires.map(() => 'applied'));
  };

  beforeAll(async () => {
    sandbox = await Sandbox.create({
      config,
      names: sandboxNames(benchRunId(), 'e2e-payments', 1),
      wallets: WALLETS,
      balanceMinor: opening,
      withQueue: false,
    });
  });
  afterAll(() => sandbox.dispose());

  it('passes each part once its operations applied, and refuses one left undone', async () => {
    // One hold missing: the holds are refused, then pass.
    await apply(payments.holds.slice(1));
    const partial = await check('e2e-payments-hold');
    expect(partial.applied).toBe(OPERATIONS - 1);
    expect(partial.problems.join('; ')).toMatch(
      /1 of 12 holds not active as sent.*wallets off their expected balance.*11 holds applied, expected 12/,
    );
    await apply(payments.holds.slice(0, 1));
    expect(await check('e2e-payments-hold')).toEqual({ problems: [], applied: OPERATIONS });

    // One hold left active: the captures are refused, then pass.
    await apply(payments.captures.slice(0, -1));
    expect((await check('e2e-payments-capture')).problems.join('; ')).toMatch(
      /1 of 12 holds not captured whole by their capture.*wallets off their expected balance/,
    );
    await apply(payments.captures.slice(-1));
    expect(await check('e2e-payments-capture')).toEqual({ problems: [], applied: OPERATIONS });

    await apply(payments.splits.slice(0, -1));
    expect((await check('e2e-payments-split')).problems.join('; ')).toMatch(
      new RegExp(
        `${(OPERATIONS - 1) * SPLIT_LEGS} split legs recorded, ${(OPERATIONS - 1) * SPLIT_LEGS} as sent, expected ${OPERATIONS * SPLIT_LEGS}`,
      ),
    );
    await apply(payments.splits.slice(-1));
    expect(await check('e2e-payments-split')).toEqual({ problems: [], applied: OPERATIONS });
  });

  it("refuses a payer's held amount off its expected one", async () => {
    const payer = payments.holds[0]?.from ?? '';
    // Money into a payer's holding account: the accounts no longer match what was sent (both sides moved).
    await pool().query('UPDATE wallets SET held = held + 1, balance = balance - 1 WHERE id = $1', [payer]);
    try {
      const v = await check('e2e-payments-split');
      expect(v.problems).toHaveLength(1);
      expect(v.problems[0]).toMatch(
        new RegExp(`^2 wallets off their expected balance: .*\\$held:${payer} 1 \\(expected 0\\)`),
      );
    } finally {
      await pool().query('UPDATE wallets SET held = held - 1, balance = balance + 1 WHERE id = $1', [payer]);
    }
  });
});
