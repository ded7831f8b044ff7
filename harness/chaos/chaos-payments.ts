// The payment operations a chaos run mixes with its transfers: holds later captured (whole or in
// part), voided, left to expire, captured and voided at once, captured after their expiry,
// captured or voided again after they ended; refunds of applied transfers, of captured holds and
// of split legs, up to and past the original (some without an amount); splits of 2 to 16 legs,
// some larger than all the money there is. A seeded stream of its own, so the transfers are the
// ones a run without payments sends. A dependent operation (a capture of a hold, a refund of its
// original) is placed later in the send order, about `gapMs` of the fault phase after it: it
// may still be decided first (a fault delays the original), and is then refused (hold_not_found,
// original_not_found, original_not_refundable), which the checker's model accepts.
//
// Every wallet that holds also gets one long hold placed first, its anchor, which stays active
// through the run: a capture or void of an ended hold that a broken decision lets through
// (--unsafe double-capture) takes its money from the wallet's held amount, and the anchor is
// what is there to take, so the broken decision commits (and is caught) instead of failing
// CHECK (held >= 0).
import type {
  CaptureWire,
  HoldWire,
  PaymentWire,
  RefundWire,
  SplitLegWire,
  SplitWire,
  TransferWire,
  VoidWire,
} from '../../src/ledger/transfer-request.ts';
import { type Random, randomInt, seededRandom } from '../../src/workload/prng.ts';

const PAYMENTS_SEED_SALT = 0x9a7e_0c0d;
/** Payment scenarios per transfer of the workload. */
export const PAYMENT_SCENARIOS_PER_TRANSFER = 0.04;
/** The anchors' expiry: longer than any run, so they are active at the check. */
export const ANCHOR_EXPIRES_IN_MS = 3_600_000;
/** A hold meant to be captured or voided lives this long; one left to expire 1-3 s. */
const HOLD_LIFE_MS: readonly [number, number] = [12_000, 16_000];
const SHORT_HOLD_MS: readonly [number, number] = [1_000, 3_000];

/** One payment message and where it goes: before the valid message of that index (the length: at the end). */
export interface PlacedPayment {
  readonly position: number;
  readonly wire: PaymentWire;
  /** The largest amount it may debit from `from` (opening balances cover it). */
  readonly outflow: bigint;
}

export interface PaymentPlanOptions {
  readonly seed: number;
  readonly wallets: number;
  readonly transfers: number;
  readonly amountMaxMinor: number;
  readonly durationS: number;
}

/** A transfer original a refund may name, and its place among the valid messages. */
export interface RefundableTransfer {
  readonly position: number;
  readonly wire: TransferWire;
}

export interface PaymentPlan {
  readonly placed: PlacedPayment[];
  /** Splits no wallet can cover: made once the opening balances are known (see uncoverable()). */
  readonly uncoverable: { position: number; operationId: string; from: string; to: readonly string[] }[];
}

function walletOf(i: number): string {
  return `w${i}`;
}

/** Plans the payments among `validCount` valid messages, sent over the fault phase. */
export function planPayments(
  o: PaymentPlanOptions,
  validCount: number,
  refundable: readonly RefundableTransfer[],
): PaymentPlan {
  const random = seededRandom((o.seed ^ PAYMENTS_SEED_SALT) >>> 0);
  const msPerMessage = (o.durationS * 1000) / Math.max(1, validCount);
  const after = (position: number, ms: number) => Math.min(validCount, position + Math.ceil(ms / msPerMessage));
  const amount = (max = o.amountMaxMinor) => randomInt(random, 1, Math.max(1, max));
  const otherWallet = (from: number) => {
    const to = randomInt(random, 1, o.wallets - 1);
    return to >= from ? to + 1 : to;
  };
  const placed: PlacedPayment[] = [];
  const uncoverable: PaymentPlan['uncoverable'] = [];
  /** Per holding wallet: what its holds could drain, counting every message that ends one and its expiry. */
  const drain = new Map<string, bigint>();
  let n = 0;
  const id = (what: string) => `pay-${o.seed}-${++n}-${what}`;
  const put = (position: number, wire: PaymentWire, outflow = 0n) => placed.push({ position, wire, outflow });

  const hold = (position: number, lifeMs: readonly [number, number], minAmount = 1): HoldWire => {
    const from = randomInt(random, 1, o.wallets);
    const held = Math.max(minAmount, amount());
    const wire: HoldWire = {
      operationId: id('hold'),
      kind: 'hold',
      from: walletOf(from),
      to: walletOf(otherWallet(from)),
      amount: String(held),
      expiresInMs: randomInt(random, lifeMs[0], lifeMs[1]),
    };
    put(position, wire, BigInt(held));
    drain.set(wire.from, (drain.get(wire.from) ?? 0n) + BigInt(held));
    return wire;
  };
  const ending = (h: HoldWire) => drain.set(h.from, (drain.get(h.from) ?? 0n) + BigInt(h.amount));
  const capture = (position: number, h: HoldWire, captured?: number): void => {
    const wire: CaptureWire = { operationId: id('capture'), kind: 'capture', from: h.from, hold: h.operationId };
    if (captured !== undefined) wire.amount = String(captured);
    ending(h);
    put(position, wire);
  };
  const voidOf = (position: number, h: HoldWire): void => {
    const wire: VoidWire = { operationId: id('void'), kind: 'void', from: h.from, hold: h.operationId };
    ending(h);
    put(position, wire);
  };
  const refund = (position: number, from: string, original: string, refunded: bigint | null, limit: bigint) => {
    const wire: RefundWire = { operationId: id('refund'), kind: 'refund', from, original };
    if (refunded !== null) wire.amount = refunded.toString();
    // Unbounded (the negative control), a refund without an amount may move the whole original again.
    put(position, wire, refunded === null || refunded < limit ? limit : refunded);
  };
  /** Refunds of one original (payer `from`, refundable `limit`): up to it, then past it. */
  const refunds = (position: number, from: string, original: string, limit: bigint) => {
    const style = randomInt(random, 0, 3);
    const part = limit > 1n ? BigInt(randomInt(random, 1, Number(limit) - 1)) : 1n;
    if (style === 0) {
      refund(position, from, original, limit, limit);
      refund(after(position, 1_500), from, original, 1n, limit);
    } else if (style === 1) {
      refund(position, from, original, part, limit);
      refund(after(position, 1_000), from, original, null, limit);
      refund(after(position, 2_000), from, original, null, limit);
    } else if (style === 2) {
      refund(position, from, original, limit + 1n, limit);
      refund(after(position, 1_000), from, original, part, limit);
    } else {
      refund(position, from, original, null, limit);
      refund(after(position, 1_500), from, original, part, limit);
    }
  };

  const scenarios = Math.round(o.transfers * PAYMENT_SCENARIOS_PER_TRANSFER);
  const kinds = [
    ['capture-full', 14],
    ['capture-partial', 10],
    ['void', 8],
    ['expire', 10],
    ['race', 8],
    ['late-capture', 8],
    ['exceeds', 3],
    ['split', 12],
    ['split-uncoverable', 3],
    ['refund-transfer', 14],
    ['mismatch', 3],
  ] as const;
  const weightSum = kinds.reduce((s, [, w]) => s + w, 0);
  const pickKind = (r: Random) => {
    let x = r() * weightSum;
    for (const [k, w] of kinds) {
      x -= w;
      if (x < 0) return k;
    }
    return kinds[0][0];
  };
  for (let s = 0; s < scenarios; s++) {
    const kind = pickKind(random);
    // Not before the warm-up's end, so the anchors (placed first) are decided before anything ends a hold.
    const p = randomInt(random, Math.min(validCount, 50), Math.max(Math.min(validCount, 50), validCount - 1));
    if (kind === 'capture-full' || kind === 'capture-partial') {
      const h = hold(p, HOLD_LIFE_MS, kind === 'capture-partial' ? 2 : 1);
      const held = Number(h.amount);
      const captured = kind === 'capture-partial' ? randomInt(random, 1, held - 1) : undefined;
      capture(after(p, 1_500), h, captured);
      const again = random();
      if (again < 0.3) capture(after(p, 3_500), h);
      else if (again < 0.5) voidOf(after(p, 3_500), h);
      if (random() < 0.6) refunds(after(p, 4_500), h.to, h.operationId, BigInt(captured ?? held));
    } else if (kind === 'void') {
      const h = hold(p, HOLD_LIFE_MS);
      voidOf(after(p, 1_500), h);
      if (random() < 0.5) capture(after(p, 3_500), h);
    } else if (kind === 'expire') {
      hold(p, SHORT_HOLD_MS);
    } else if (kind === 'race') {
      const h = hold(p, HOLD_LIFE_MS);
      const q = after(p, 1_500);
      if (random() < 0.5) {
        capture(q, h);
        voidOf(q, h);
      } else {
        voidOf(q, h);
        capture(q, h, randomInt(random, 1, Number(h.amount)));
      }
    } else if (kind === 'late-capture') {
      const h = hold(p, SHORT_HOLD_MS);
      if (random() < 0.7) capture(after(p, 7_000), h);
      else voidOf(after(p, 7_000), h);
    } else if (kind === 'exceeds') {
      const h = hold(p, HOLD_LIFE_MS);
      capture(after(p, 1_500), h, Number(h.amount) + 1);
      voidOf(after(p, 3_000), h);
    } else if (kind === 'split' || kind === 'split-uncoverable') {
      const from = randomInt(random, 1, o.wallets);
      const legCount = randomInt(random, 2, Math.min(16, o.wallets - 1));
      const to = new Set<number>();
      while (to.size < legCount) to.add(otherWallet(from));
      const legTo = [...to].map(walletOf);
      if (kind === 'split-uncoverable') {
        uncoverable.push({ position: p, operationId: id('split'), from: walletOf(from), to: legTo });
        continue;
      }
      const legs: SplitLegWire[] = legTo.map((w) => ({ to: w, amount: String(amount()) }));
      const wire: SplitWire = { operationId: id('split'), kind: 'split', from: walletOf(from), legs };
      put(
        p,
        wire,
        legs.reduce((t, l) => t + BigInt(l.amount), 0n),
      );
      const leg = legs[randomInt(random, 0, legs.length - 1)] as SplitLegWire;
      if (random() < 0.7) refunds(after(p, 2_500), leg.to, wire.operationId, BigInt(leg.amount));
    } else if (kind === 'refund-transfer') {
      if (refundable.length === 0) continue;
      const original = refundable[randomInt(random, 0, refundable.length - 1)] as RefundableTransfer;
      refunds(
        after(original.position, 2_500),
        original.wire.to,
        original.wire.operationId,
        BigInt(original.wire.amount),
      );
    } else {
      // The wrong wallet: a capture by the payee instead of the source, a refund by the source.
      const h = hold(p, SHORT_HOLD_MS);
      put(after(p, 1_500), { operationId: id('capture'), kind: 'capture', from: h.to, hold: h.operationId });
      put(after(p, 1_500), { operationId: id('capture'), kind: 'capture', from: h.from, hold: id('nothing') });
      put(after(p, 1_500), { operationId: id('refund'), kind: 'refund', from: h.from, original: id('nothing') });
    }
  }

  // The anchors: one long hold per wallet that holds, of what its other holds could drain, first.
  const anchors: PlacedPayment[] = [...drain.entries()]
    .sort(([a], [b]) => Number(a.slice(1)) - Number(b.slice(1)))
    .map(([from, total]) => {
      const i = Number(from.slice(1));
      const wire: HoldWire = {
        operationId: `anchor-${o.seed}-${from}`,
        kind: 'hold',
        from,
        to: walletOf(i === 1 ? 2 : 1),
        amount: total.toString(),
        expiresInMs: ANCHOR_EXPIRES_IN_MS,
      };
      return { position: 0, wire, outflow: total };
    });
  return { placed: [...anchors, ...placed], uncoverable };
}

/** The uncoverable splits, each of a total above all the money of the run (`systemMinor`). */
export function uncoverableSplits(plan: PaymentPlan, systemMinor: bigint): PlacedPayment[] {
  return plan.uncoverable.map((u) => {
    const each = systemMinor / BigInt(u.to.length) + 1n;
    const wire: SplitWire = {
      operationId: u.operationId,
      kind: 'split',
      from: u.from,
      legs: u.to.map((to) => ({ to, amount: each.toString() })),
    };
    return { position: u.position, wire, outflow: 0n };
  });
}
