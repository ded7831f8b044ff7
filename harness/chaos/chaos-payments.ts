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
//
// Each scenario is a function with its weight in SCENARIOS; PaymentPlanner holds what they share.
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

/**
 * What the scenarios share while they plan: the seeded stream, the payment ids, the payments
 * placed so far, and what each holding wallet's holds could drain (its anchor's amount).
 */
class PaymentPlanner {
  readonly random: Random;
  readonly placed: PlacedPayment[] = [];
  readonly uncoverable: PaymentPlan['uncoverable'] = [];
  /** Per holding wallet: what its holds could drain, counting every message that ends one and its expiry. */
  readonly drain = new Map<string, bigint>();
  private readonly msPerMessage: number;
  private n = 0;

  constructor(
    readonly o: PaymentPlanOptions,
    readonly validCount: number,
    readonly refundable: readonly RefundableTransfer[],
  ) {
    this.random = seededRandom((o.seed ^ PAYMENTS_SEED_SALT) >>> 0);
    this.msPerMessage = (o.durationS * 1000) / Math.max(1, validCount);
  }

  /** The place about `ms` of the fault phase after `position` (the end at the latest). */
  after(position: number, ms: number): number {
    return Math.min(this.validCount, position + Math.ceil(ms / this.msPerMessage));
  }

  amount(max = this.o.amountMaxMinor): number {
    return randomInt(this.random, 1, Math.max(1, max));
  }

  otherWallet(from: number): number {
    const to = randomInt(this.random, 1, this.o.wallets - 1);
    return to >= from ? to + 1 : to;
  }

  id(what: string): string {
    return `pay-${this.o.seed}-${++this.n}-${what}`;
  }

  put(position: number, wire: PaymentWire, outflow = 0n): void {
    this.placed.push({ position, wire, outflow });
  }

  hold(position: number, lifeMs: readonly [number, number], minAmount = 1): HoldWire {
    const from = randomInt(this.random, 1, this.o.wallets);
    const held = Math.max(minAmount, this.amount());
    const wire: HoldWire = {
      operationId: this.id('hold'),
      kind: 'hold',
      from: walletOf(from),
      to: walletOf(this.otherWallet(from)),
      amount: String(held),
      expiresInMs: randomInt(this.random, lifeMs[0], lifeMs[1]),
    };
    this.put(position, wire, BigInt(held));
    this.drain.set(wire.from, (this.drain.get(wire.from) ?? 0n) + BigInt(held));
    return wire;
  }

  capture(position: number, h: HoldWire, captured?: number): void {
    const wire: CaptureWire = { operationId: this.id('capture'), kind: 'capture', from: h.from, hold: h.operationId };
    if (captured !== undefined) wire.amount = String(captured);
    this.ending(h);
    this.put(position, wire);
  }

  voidOf(position: number, h: HoldWire): void {
    const wire: VoidWire = { operationId: this.id('void'), kind: 'void', from: h.from, hold: h.operationId };
    this.ending(h);
    this.put(position, wire);
  }

  /** Refunds of one original (payer `from`, refundable `limit`): up to it, then past it. */
  refunds(position: number, from: string, original: string, limit: bigint): void {
    const style = randomInt(this.random, 0, 3);
    const part = limit > 1n ? BigInt(randomInt(this.random, 1, Number(limit) - 1)) : 1n;
    const refund = (at: number, refunded: bigint | null) => this.refund(at, from, original, refunded, limit);
    if (style === 0) {
      refund(position, limit);
      refund(this.after(position, 1_500), 1n);
    } else if (style === 1) {
      refund(position, part);
      refund(this.after(position, 1_000), null);
      refund(this.after(position, 2_000), null);
    } else if (style === 2) {
      refund(position, limit + 1n);
      refund(this.after(position, 1_000), part);
    } else {
      refund(position, null);
      refund(this.after(position, 1_500), part);
    }
  }

  private ending(h: HoldWire): void {
    this.drain.set(h.from, (this.drain.get(h.from) ?? 0n) + BigInt(h.amount));
  }

  private refund(position: number, from: string, original: string, refunded: bigint | null, limit: bigint): void {
    const wire: RefundWire = { operationId: this.id('refund'), kind: 'refund', from, original };
    if (refunded !== null) wire.amount = refunded.toString();
    // Unbounded (the negative control), a refund without an amount may move the whole original again.
    this.put(position, wire, refunded === null || refunded < limit ? limit : refunded);
  }
}

/** One scenario: the payments it places from `p` on. */
type Scenario = (planner: PaymentPlanner, p: number) => void;

/** A hold captured, whole or in part; then maybe captured or voided again, and maybe refunded. */
function captureHold(planner: PaymentPlanner, p: number, partial: boolean): void {
  const h = planner.hold(p, HOLD_LIFE_MS, partial ? 2 : 1);
  const held = Number(h.amount);
  const captured = partial ? randomInt(planner.random, 1, held - 1) : undefined;
  planner.capture(planner.after(p, 1_500), h, captured);
  const again = planner.random();
  if (again < 0.3) planner.capture(planner.after(p, 3_500), h);
  else if (again < 0.5) planner.voidOf(planner.after(p, 3_500), h);
  if (planner.random() < 0.6) planner.refunds(planner.after(p, 4_500), h.to, h.operationId, BigInt(captured ?? held));
}

/** A hold voided, and maybe captured after. */
function voidHold(planner: PaymentPlanner, p: number): void {
  const h = planner.hold(p, HOLD_LIFE_MS);
  planner.voidOf(planner.after(p, 1_500), h);
  if (planner.random() < 0.5) planner.capture(planner.after(p, 3_500), h);
}

/** A capture and a void of one hold at once, in either order. */
function raceOnHold(planner: PaymentPlanner, p: number): void {
  const h = planner.hold(p, HOLD_LIFE_MS);
  const q = planner.after(p, 1_500);
  if (planner.random() < 0.5) {
    planner.capture(q, h);
    planner.voidOf(q, h);
  } else {
    planner.voidOf(q, h);
    planner.capture(q, h, randomInt(planner.random, 1, Number(h.amount)));
  }
}

/** A short hold left to expire. */
function expireHold(planner: PaymentPlanner, p: number): void {
  planner.hold(p, SHORT_HOLD_MS);
}

/** A short hold captured or voided after it expired. */
function lateCapture(planner: PaymentPlanner, p: number): void {
  const h = planner.hold(p, SHORT_HOLD_MS);
  if (planner.random() < 0.7) planner.capture(planner.after(p, 7_000), h);
  else planner.voidOf(planner.after(p, 7_000), h);
}

/** A capture of one more than the hold, then its void. */
function captureExceeding(planner: PaymentPlanner, p: number): void {
  const h = planner.hold(p, HOLD_LIFE_MS);
  planner.capture(planner.after(p, 1_500), h, Number(h.amount) + 1);
  planner.voidOf(planner.after(p, 3_000), h);
}

/** A split of 2 to 16 legs, a leg maybe refunded; or one no wallet can cover, made once the balances are known. */
function split(planner: PaymentPlanner, p: number, uncoverable: boolean): void {
  const from = randomInt(planner.random, 1, planner.o.wallets);
  const legCount = randomInt(planner.random, 2, Math.min(16, planner.o.wallets - 1));
  const to = new Set<number>();
  while (to.size < legCount) to.add(planner.otherWallet(from));
  const legTo = [...to].map(walletOf);
  if (uncoverable) {
    planner.uncoverable.push({ position: p, operationId: planner.id('split'), from: walletOf(from), to: legTo });
    return;
  }
  const legs: SplitLegWire[] = legTo.map((w) => ({ to: w, amount: String(planner.amount()) }));
  const wire: SplitWire = { operationId: planner.id('split'), kind: 'split', from: walletOf(from), legs };
  planner.put(
    p,
    wire,
    legs.reduce((t, l) => t + BigInt(l.amount), 0n),
  );
  const leg = legs[randomInt(planner.random, 0, legs.length - 1)] as SplitLegWire;
  if (planner.random() < 0.7) planner.refunds(planner.after(p, 2_500), leg.to, wire.operationId, BigInt(leg.amount));
}

/** Refunds of an applied transfer, placed after it. */
function refundTransfer(planner: PaymentPlanner): void {
  if (planner.refundable.length === 0) return;
  const original = planner.refundable[
    randomInt(planner.random, 0, planner.refundable.length - 1)
  ] as RefundableTransfer;
  planner.refunds(
    planner.after(original.position, 2_500),
    original.wire.to,
    original.wire.operationId,
    BigInt(original.wire.amount),
  );
}

/** The wrong wallet: a capture by the payee instead of the source, a refund by the source. */
function wrongWallet(planner: PaymentPlanner, p: number): void {
  const h = planner.hold(p, SHORT_HOLD_MS);
  const q = planner.after(p, 1_500);
  planner.put(q, { operationId: planner.id('capture'), kind: 'capture', from: h.to, hold: h.operationId });
  planner.put(q, { operationId: planner.id('capture'), kind: 'capture', from: h.from, hold: planner.id('nothing') });
  planner.put(q, { operationId: planner.id('refund'), kind: 'refund', from: h.from, original: planner.id('nothing') });
}

/**
 * The scenarios and their weights, in the order the seeded pick walks them: a new entry, or a
 * new weight, changes what every seed plans.
 */
const SCENARIOS: readonly { readonly kind: string; readonly weight: number; readonly plan: Scenario }[] = [
  { kind: 'capture-full', weight: 14, plan: (planner, p) => captureHold(planner, p, false) },
  { kind: 'capture-partial', weight: 10, plan: (planner, p) => captureHold(planner, p, true) },
  { kind: 'void', weight: 8, plan: voidHold },
  { kind: 'expire', weight: 10, plan: expireHold },
  { kind: 'race', weight: 8, plan: raceOnHold },
  { kind: 'late-capture', weight: 8, plan: lateCapture },
  { kind: 'exceeds', weight: 3, plan: captureExceeding },
  { kind: 'split', weight: 12, plan: (planner, p) => split(planner, p, false) },
  { kind: 'split-uncoverable', weight: 3, plan: (planner, p) => split(planner, p, true) },
  { kind: 'refund-transfer', weight: 14, plan: refundTransfer },
  { kind: 'mismatch', weight: 3, plan: wrongWallet },
];
const SCENARIO_WEIGHT_SUM = SCENARIOS.reduce((sum, { weight }) => sum + weight, 0);

function pickScenario(random: Random): Scenario {
  let x = random() * SCENARIO_WEIGHT_SUM;
  for (const { weight, plan } of SCENARIOS) {
    x -= weight;
    if (x < 0) return plan;
  }
  return (SCENARIOS[0] as (typeof SCENARIOS)[number]).plan;
}

/** The anchors: one long hold per wallet that holds, of what its other holds could drain. */
function anchorHolds(seed: number, drain: ReadonlyMap<string, bigint>): PlacedPayment[] {
  return [...drain.entries()]
    .sort(([a], [b]) => Number(a.slice(1)) - Number(b.slice(1)))
    .map(([from, total]) => {
      const i = Number(from.slice(1));
      const wire: HoldWire = {
        operationId: `anchor-${seed}-${from}`,
        kind: 'hold',
        from,
        to: walletOf(i === 1 ? 2 : 1),
        amount: total.toString(),
        expiresInMs: ANCHOR_EXPIRES_IN_MS,
      };
      return { position: 0, wire, outflow: total };
    });
}

/** Plans the payments among `validCount` valid messages, sent over the fault phase. */
export function planPayments(
  o: PaymentPlanOptions,
  validCount: number,
  refundable: readonly RefundableTransfer[],
): PaymentPlan {
  const planner = new PaymentPlanner(o, validCount, refundable);
  const scenarios = Math.round(o.transfers * PAYMENT_SCENARIOS_PER_TRANSFER);
  for (let s = 0; s < scenarios; s++) {
    const scenario = pickScenario(planner.random);
    // Not before the warm-up's end, so the anchors (placed first) are decided before anything ends a hold.
    const p = randomInt(planner.random, Math.min(validCount, 50), Math.max(Math.min(validCount, 50), validCount - 1));
    scenario(planner, p);
  }
  // The anchors go first.
  return { placed: [...anchorHolds(o.seed, planner.drain), ...planner.placed], uncoverable: planner.uncoverable };
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
