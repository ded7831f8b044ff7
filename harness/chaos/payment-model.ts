// The checker's own model of the payment rules: what the balances, the credit limits and the holds
// should be. It starts from each wallet's opening balance and limit and replays the decided records
// (every kind) in commit order (the first ledger entry of each operation, and of each expiry
// release: used for the order only, never for amounts), taking every amount from the request the
// harness sent under the record's hash and from its own state (what a hold holds, what is left of
// an original, the limit in force), never from the database's. Every debit may take its wallet's
// balance down to minus the limit in force then. A decision that leaves no entry (a credit limit
// change, a refused debit of a wallet opened at 0) is replayed just before the next decision of its
// wallet that left entries, in the outcome feed's order, which per wallet is the decision order
// (one wallet's decisions commit one after the other, each appending its events). A record it
// cannot apply by the rules given its state then is an anomaly, kept with the check it breaks;
// payment-checks.ts and credit-checks.ts compare the rest (refusals, holds, balances) with it.
import type { OperationKind } from '../../src/ledger/transfer-request.ts';
import type { ChaosWorkload } from './chaos-workload.ts';
import type { Counterexample } from './check-result.ts';
import type { HoldRow, RecordRow } from './database-state.ts';

export const HELD = '$held:';
export const EXPIRY = '$expiry:';
export const SETTLEMENT = '$settlement:';

/** A request as the harness sent it (its wire form). */
export type Wire = Record<string, unknown> & { operationId: string; from: string };

export interface ModelHold {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly amount: bigint;
  state: 'active' | 'captured' | 'voided' | 'expired';
  captured: bigint;
  released: bigint;
  endedBy: string | null;
}

export interface AppliedOperation {
  readonly kind: OperationKind;
  readonly wire: Wire;
  readonly amount: bigint;
}

/** Which check a record the replay could not apply breaks. */
export type AnomalyKind = 'payment-rules' | 'hold-ended-twice' | 'over-refund' | 'credit-limit';

export interface ReplayAnomaly {
  readonly kind: AnomalyKind;
  readonly example: Counterexample;
}

export interface PaymentModel {
  /** Every account's expected balance: wallets, and `$held:<wallet>` for what each holds. */
  readonly balance: ReadonlyMap<string, bigint>;
  /** Every wallet's credit limit in force at the end. */
  readonly limit: ReadonlyMap<string, bigint>;
  readonly holds: ReadonlyMap<string, ModelHold>;
  readonly applied: ReadonlyMap<string, AppliedOperation>;
  /** `<original>\n<payer>` → refunded so far. */
  readonly refunded: ReadonlyMap<string, bigint>;
  /** In commit order. */
  readonly anomalies: readonly ReplayAnomaly[];
}

/** What the replay reads: the workload sent, and the database's decisions, holds and commit order. */
export interface PaymentReplayInput {
  readonly workload: ChaosWorkload;
  readonly recordList: readonly RecordRow[];
  readonly holds: ReadonlyMap<string, HoldRow>;
  readonly firstEntry: ReadonlyMap<string, bigint>;
  /** Operation id → its outcome event's place in the feed: per wallet, the decision order. */
  readonly feedOrder: ReadonlyMap<string, bigint>;
}

type ReplayEvent = { at: bigint; record: RecordRow | null; expiredHold: string | null };

type Leg = { to: string; amount: string };

/** The request sent under the record's hash, or null (judged by "every stored outcome is one of the requests sent"). */
export function wireOf(workload: ChaosWorkload, r: Pick<RecordRow, 'operation_id' | 'request_hash'>): Wire | null {
  const wire = workload.operations.get(r.operation_id)?.wires.get(r.request_hash);
  return (wire as Wire | undefined) ?? null;
}

export function kindOf(workload: ChaosWorkload, operationId: string): OperationKind {
  return workload.operations.get(operationId)?.kind ?? 'transfer';
}

/** How much the payer may be refunded of the original in all, or why it may not be refunded. */
export function refundLimit(
  model: Pick<PaymentModel, 'applied' | 'holds'>,
  original: string,
  payer: string,
): bigint | string {
  const o = model.applied.get(original);
  if (o === undefined) return 'original not applied before it';
  if (o.kind === 'transfer') return o.wire.to === payer ? o.amount : 'payer is not the transfer destination';
  if (o.kind === 'hold') {
    const h = model.holds.get(original);
    if (h === undefined || h.state !== 'captured') return 'hold not captured before it';
    return h.to === payer ? h.captured : 'payer is not the hold payee';
  }
  if (o.kind === 'split') {
    const leg = (o.wire.legs as Leg[]).find((l) => l.to === payer);
    return leg === undefined ? 'payer is no leg of the split' : BigInt(leg.amount);
  }
  return `original is a ${o.kind}`;
}

export const refundKey = (original: string, payer: string) => `${original}\n${payer}`;

/** A ledger position in the replay's order; room below each for the decisions without entries placed before it. */
const SLOTS = 1_000_000n;
const END = BigInt(Number.MAX_SAFE_INTEGER) * SLOTS;

/**
 * Whether the replay judges this record although it left no entry: a credit limit change, or a
 * refused debit of a wallet opened at 0 with a limit (the only refusals of a debit the workload
 * means to provoke, by the limit).
 */
export function replayedWithoutEntries(
  workload: ChaosWorkload,
  r: Pick<RecordRow, 'operation_id' | 'from_wallet' | 'status'>,
): boolean {
  const kind = kindOf(workload, r.operation_id);
  if (kind === 'credit_limit') return true;
  return (
    r.status === 'rejected' &&
    (kind === 'transfer' || kind === 'split') &&
    workload.credit.openingLimits.has(r.from_wallet)
  );
}

/** Each decision without entries: placed just before the next decision of its wallet, in feed order, that has entries. */
function placesWithoutEntries(input: PaymentReplayInput, records: readonly RecordRow[]): Map<string, bigint> {
  const { firstEntry, feedOrder } = input;
  const placed = new Map<string, bigint>();
  const wallets = new Set(records.map((r) => r.from_wallet));
  const byWallet = new Map<string, RecordRow[]>();
  for (const r of input.recordList) {
    if (!wallets.has(r.from_wallet)) continue;
    byWallet.set(r.from_wallet, [...(byWallet.get(r.from_wallet) ?? []), r]);
  }
  const toPlace = new Set(records.map((r) => r.operation_id));
  const feedAt = (r: RecordRow) => feedOrder.get(r.operation_id) ?? END;
  for (const list of byWallet.values()) {
    list.sort((a, b) => (feedAt(a) < feedAt(b) ? -1 : feedAt(a) > feedAt(b) ? 1 : 0));
    let next = END;
    let before = 0n;
    for (let i = list.length - 1; i >= 0; i--) {
      const r = list[i] as RecordRow;
      const entry = r.status === 'applied' ? firstEntry.get(r.operation_id) : undefined;
      if (entry !== undefined) {
        next = entry * SLOTS;
        before = 0n;
      } else if (toPlace.has(r.operation_id)) {
        before += 1n;
        placed.set(r.operation_id, next - before);
      }
    }
  }
  return placed;
}

/** The applied records, the decisions without entries and the expiries, in commit order (unknown positions last). */
function replayEvents(input: PaymentReplayInput): ReplayEvent[] {
  const { workload, firstEntry } = input;
  const events: ReplayEvent[] = [];
  const withoutEntries = input.recordList.filter(
    (r) => workload.operations.has(r.operation_id) && replayedWithoutEntries(workload, r),
  );
  const placed = placesWithoutEntries(input, withoutEntries);
  for (const r of input.recordList) {
    if (!workload.operations.has(r.operation_id)) continue;
    const at = placed.get(r.operation_id);
    if (at !== undefined) events.push({ at, record: r, expiredHold: null });
    else if (r.status === 'applied') {
      const entry = firstEntry.get(r.operation_id);
      events.push({ at: entry === undefined ? END : entry * SLOTS, record: r, expiredHold: null });
    }
  }
  for (const h of input.holds.values()) {
    if (h.state === 'expired' || firstEntry.has(EXPIRY + h.hold_id)) {
      const entry = firstEntry.get(EXPIRY + h.hold_id);
      events.push({ at: entry === undefined ? END : entry * SLOTS, record: null, expiredHold: h.hold_id });
    }
  }
  return events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
}

/** The model's state while it replays. */
class Replay implements PaymentModel {
  readonly balance = new Map<string, bigint>();
  readonly limit = new Map<string, bigint>();
  readonly holds = new Map<string, ModelHold>();
  readonly applied = new Map<string, AppliedOperation>();
  readonly refunded = new Map<string, bigint>();
  readonly anomalies: ReplayAnomaly[] = [];

  constructor(workload: ChaosWorkload) {
    for (const w of workload.wallets) this.balance.set(w, workload.openingBalanceMinor);
    for (const [w, limit] of workload.credit.openingLimits) {
      this.balance.set(w, 0n);
      this.limit.set(w, limit);
    }
  }

  available(wallet: string): bigint {
    return this.balance.get(wallet) ?? 0n;
  }

  /** What a debit may take: the available balance and the credit limit in force. */
  spendable(wallet: string): bigint {
    return this.available(wallet) + (this.limit.get(wallet) ?? 0n);
  }

  /** The state a limit is judged by, for a counterexample. */
  state(wallet: string): string {
    return `balance ${this.available(wallet)}, limit ${this.limit.get(wallet) ?? 0n}`;
  }

  add(wallet: string, delta: bigint): void {
    this.balance.set(wallet, this.available(wallet) + delta);
  }

  note(kind: AnomalyKind, example: Counterexample): void {
    this.anomalies.push({ kind, example });
  }
}

function expire(m: Replay, holdId: string): void {
  const h = m.holds.get(holdId);
  if (h === undefined) {
    m.note('payment-rules', { hold: holdId, problem: 'expiry of a hold the model never saw applied' });
  } else if (h.state !== 'active') {
    m.note('hold-ended-twice', { hold: h.id, problem: `expired after it was ${h.state}`, endedBy: h.endedBy });
  } else {
    m.add(HELD + h.from, -h.amount);
    m.add(h.from, h.amount);
    h.state = 'expired';
    h.released = h.amount;
  }
}

/** A transfer or a split: the payer's available balance covers every leg. */
function move(m: Replay, id: string, kind: 'transfer' | 'split', wire: Wire): void {
  const legs: Leg[] =
    kind === 'transfer' ? [{ to: wire.to as string, amount: wire.amount as string }] : (wire.legs as Leg[]);
  const total = legs.reduce((t, l) => t + BigInt(l.amount), 0n);
  if (m.spendable(wire.from) < total) {
    m.note('payment-rules', { operationId: id, kind, problem: `applied ${total} with ${m.state(wire.from)}` });
    return;
  }
  m.add(wire.from, -total);
  for (const l of legs) m.add(l.to, BigInt(l.amount));
  m.applied.set(id, { kind, wire, amount: total });
}

function hold(m: Replay, id: string, wire: Wire): void {
  const amount = BigInt(wire.amount as string);
  if (m.spendable(wire.from) < amount) {
    const problem = `hold of ${amount} applied with ${m.state(wire.from)}`;
    m.note('payment-rules', { operationId: id, kind: 'hold', problem });
    return;
  }
  m.add(wire.from, -amount);
  m.add(HELD + wire.from, amount);
  const to = wire.to as string;
  m.holds.set(id, { id, from: wire.from, to, amount, state: 'active', captured: 0n, released: 0n, endedBy: null });
  m.applied.set(id, { kind: 'hold', wire, amount });
}

/** A capture or a void: ends an active hold of the same source, capturing at most its amount. */
function endHold(m: Replay, id: string, kind: 'capture' | 'void', wire: Wire): void {
  const refuse = (problem: string) => m.note('payment-rules', { operationId: id, kind, problem });
  const h = m.holds.get(wire.hold as string);
  if (h === undefined) {
    refuse('applied before its hold was');
    return;
  }
  if (h.state !== 'active') {
    const problem = `applied to a hold already ${h.state}`;
    m.note('hold-ended-twice', { operationId: id, kind, hold: h.id, problem, endedBy: h.endedBy });
    return;
  }
  if (h.from !== wire.from) {
    refuse('applied from another wallet than the hold source');
    return;
  }
  const captured = kind === 'capture' ? (wire.amount === undefined ? h.amount : BigInt(wire.amount as string)) : 0n;
  if (captured > h.amount) {
    refuse(`captured ${captured} of a hold of ${h.amount}`);
    return;
  }
  m.add(HELD + h.from, -h.amount);
  m.add(h.to, captured);
  m.add(h.from, h.amount - captured);
  h.state = kind === 'capture' ? 'captured' : 'voided';
  h.captured = captured;
  h.released = h.amount - captured;
  h.endedBy = id;
  m.applied.set(id, { kind, wire, amount: captured });
}

/** A refund: within what is left of its original for this payer, and covered by the payer's balance. */
function refund(m: Replay, id: string, wire: Wire): void {
  const original = wire.original as string;
  const limit = refundLimit(m, original, wire.from);
  if (typeof limit === 'string') {
    m.note('payment-rules', { operationId: id, kind: 'refund', problem: `refund applied: ${limit}` });
    return;
  }
  const key = refundKey(original, wire.from);
  const left = limit - (m.refunded.get(key) ?? 0n);
  const amount = wire.amount === undefined ? left : BigInt(wire.amount as string);
  if (amount > left || amount <= 0n) {
    m.note('over-refund', {
      operationId: id,
      original,
      asked: String(wire.amount ?? 'the rest'),
      left: left.toString(),
    });
    return;
  }
  if (m.spendable(wire.from) < amount) {
    const problem = `refund of ${amount} applied with ${m.state(wire.from)}`;
    m.note('payment-rules', { operationId: id, kind: 'refund', problem });
    return;
  }
  const source = m.applied.get(original)?.wire.from as string;
  m.add(wire.from, -amount);
  m.add(source, amount);
  m.refunded.set(key, (m.refunded.get(key) ?? 0n) + amount);
  m.applied.set(id, { kind: 'refund', wire, amount });
}

/** A credit limit change: applied only within what the wallet uses, refused limit_below_used only below it. */
function limitChange(m: Replay, r: RecordRow, wire: Wire): void {
  const asked = BigInt(wire.limit as string);
  const used = m.available(wire.from) < 0n ? -m.available(wire.from) : 0n;
  const fail = (problem: string) =>
    m.note('credit-limit', { operationId: r.operation_id, kind: 'credit_limit', limit: asked.toString(), problem });
  if (r.status === 'applied') {
    if (asked < used) fail(`applied with ${used} used (${m.state(wire.from)})`);
    else {
      m.limit.set(wire.from, asked);
      m.applied.set(r.operation_id, { kind: 'credit_limit', wire, amount: asked });
    }
  } else if (r.reason !== 'limit_below_used') fail(`refused ${r.reason}`);
  else if (asked >= used) fail(`refused limit_below_used with ${used} used (${m.state(wire.from)})`);
}

/** A refused debit of a wallet opened at 0: insufficient_funds, and only when the limit in force does not cover it. */
function refusedDebit(m: Replay, r: RecordRow, kind: OperationKind, wire: Wire): void {
  const legs: Leg[] =
    kind === 'split' ? (wire.legs as Leg[]) : [{ to: wire.to as string, amount: wire.amount as string }];
  const total = legs.reduce((t, l) => t + BigInt(l.amount), 0n);
  if (r.reason !== 'insufficient_funds' || m.spendable(wire.from) >= total) {
    const problem = `refused ${r.reason} for ${total} with ${m.state(wire.from)}`;
    m.note('credit-limit', { operationId: r.operation_id, kind, problem });
  }
}

/** A deposit credits its wallet from its currency's settlement account; a withdrawal, covered, the other way. */
function settle(m: Replay, id: string, kind: 'deposit' | 'withdrawal', wire: Wire): void {
  const amount = BigInt(wire.amount as string);
  const settlement = `${SETTLEMENT}${wire.currency as string}`;
  if (kind === 'deposit') {
    m.add(wire.to as string, amount);
    m.add(settlement, -amount);
  } else if (m.spendable(wire.from) < amount) {
    m.note('payment-rules', { operationId: id, kind, problem: `applied ${amount} with ${m.state(wire.from)}` });
    return;
  } else {
    m.add(wire.from, -amount);
    m.add(settlement, amount);
  }
  m.applied.set(id, { kind, wire, amount });
}

/**
 * The wallets an applied open_wallet opened: a balance of 0 and the limit it asked, from the start
 * (nothing can post to a wallet before its open; the wallet checks judge what happened in between).
 */
function opened(m: Replay, input: PaymentReplayInput): void {
  for (const r of input.recordList) {
    if (r.status !== 'applied' || kindOf(input.workload, r.operation_id) !== 'open_wallet') continue;
    const wire = wireOf(input.workload, r);
    if (wire === null || m.balance.has(wire.wallet as string)) continue;
    m.balance.set(wire.wallet as string, 0n);
    m.limit.set(wire.wallet as string, BigInt((wire.creditLimit as string | undefined) ?? '0'));
  }
}

function applyRecord(m: Replay, workload: ChaosWorkload, r: RecordRow): void {
  const wire = wireOf(workload, r);
  if (wire === null) return; // judged by "every stored outcome is one of the requests sent"
  const kind = kindOf(workload, r.operation_id);
  const id = r.operation_id;
  if (kind === 'credit_limit') limitChange(m, r, wire);
  else if (r.status !== 'applied') refusedDebit(m, r, kind, wire);
  else if (kind === 'transfer' || kind === 'split') move(m, id, kind, wire);
  else if (kind === 'hold') hold(m, id, wire);
  else if (kind === 'capture' || kind === 'void') endHold(m, id, kind, wire);
  else if (kind === 'refund') refund(m, id, wire);
  else if (kind === 'deposit' || kind === 'withdrawal') settle(m, id, kind, wire);
}

/** Replays every applied record, every decision without entries and every expiry, in commit order, from the opening state. */
export function buildPaymentModel(input: PaymentReplayInput): PaymentModel {
  const m = new Replay(input.workload);
  opened(m, input);
  for (const e of replayEvents(input)) {
    if (e.expiredHold !== null) expire(m, e.expiredHold);
    else if (e.record !== null) applyRecord(m, input.workload, e.record);
  }
  return m;
}
