// The wallets' lifecycle a chaos run exercises, a seeded stream of its own beside the payments and
// the credit limits (so the transfers and the payments are those of a run without it):
// - wallets opened during the fault phase (`ow<i>`, some with a credit limit) through
//   open_wallet, then deposits into them, transfers from and to them and withdrawals from them,
//   frozen (credits allowed or refused) and unfrozen while those are in flight;
// - closing wallets, whose only traffic is one known deposit, its withdrawal in full and a close:
//   a close sent between the two (wallet_not_empty when the deposit applied first), and a deposit
//   after the close (wallet_closed once it is closed);
// - plain wallets (`w<i>`) frozen for their debits only (credits allowed: the credit stream's
//   debits credit them, and must meet their limit alone) and unfrozen while their transfers fly;
// - one open of a plain wallet (wallet_exists).
// Some messages are sent twice under new jobs, with the same body. Faults reorder all of it, so
// nothing here fixes an outcome: wallet-checks.ts judges every decision against the wallets'
// status and balance history as the database decided it.
import type { OperationWire } from '../../src/ledger/transfer-request.ts';
import { randomInt } from '../../src/workload/prng.ts';
import { type PlacedOperation, StreamPlanner, type StreamPlanOptions } from './stream-planner.ts';

const WALLET_SEED_SALT = 0x0a11_e7c5;
export const OPENED_WALLET_PREFIX = 'ow';
/** Opened wallets with traffic of every kind, and closing wallets (numbered after them). */
const BUSY_WALLETS = 4;
const CLOSING_WALLETS = 2;
/** Busy wallets with an odd index open with this credit limit, in largest amounts of the run. */
const OPENED_CREDIT_LIMIT = 3;
/** A busy wallet's traffic: deposits, transfers out, transfers in, withdrawals. */
const BUSY_DEPOSITS = 3;
const BUSY_TRANSFERS_OUT = 4;
const BUSY_TRANSFERS_IN = 3;
const BUSY_WITHDRAWALS = 2;
/** The part of the fault phase a busy wallet's traffic spans, and a closing wallet's steps apart. */
const BUSY_WINDOW_MS = 16_000;
const CLOSING_STEP_MS = 2_500;
/** Plain wallets frozen for their debits for 1-4 s. */
const PLAIN_FREEZES = 3;
/** Share of the stream's messages sent twice (the same body under a new job). */
const REDELIVERED = 0.25;

export interface OpenedWallet {
  readonly id: string;
  readonly currency: string;
  readonly creditLimitMinor: bigint;
}

export interface WalletPlan {
  /** The wallets the stream opens, by id. */
  readonly opened: ReadonlyMap<string, OpenedWallet>;
  /** Every operation id of the stream: judged by wallet-checks.ts, not by the transfers' or payments' checks. */
  readonly operationIds: ReadonlySet<string>;
  /** Wallets whose status the stream changes (opened and plain). */
  readonly watched: ReadonlySet<string>;
}

export interface WalletPlanResult extends WalletPlan {
  readonly placed: readonly PlacedOperation[];
}

export const NO_WALLET_PLAN: WalletPlan = Object.freeze({
  opened: new Map(),
  operationIds: new Set<string>(),
  watched: new Set<string>(),
});

export type WalletPlanOptions = StreamPlanOptions;

class WalletPlanner extends StreamPlanner {
  readonly operationIds = new Set<string>();

  constructor(
    o: WalletPlanOptions,
    validCount: number,
    readonly currency: string,
  ) {
    super(o, validCount, WALLET_SEED_SALT, 'wallet');
  }

  amount(largest = 1): string {
    return String(randomInt(this.random, 1, this.o.amountMaxMinor * largest));
  }

  /**
   * Sends `make(id)`, with metadata naming the stream and the step, at `position`, and again a
   * little later under a new job now and then.
   */
  put(position: number, what: string, make: (operationId: string) => OperationWire): void {
    const wire: OperationWire = { ...make(this.id(what)), metadata: { stream: 'wallets', step: what } };
    this.operationIds.add(wire.operationId);
    this.placed.push({ position, wire });
    if (this.random() < REDELIVERED) {
      this.placed.push({ position: this.after(position, randomInt(this.random, 300, 3_000)), wire });
    }
  }

  open(position: number, w: OpenedWallet): void {
    this.put(position, 'open', (operationId) => ({
      operationId,
      kind: 'open_wallet',
      wallet: w.id,
      currency: w.currency,
      ...(w.creditLimitMinor > 0n ? { creditLimit: w.creditLimitMinor.toString() } : {}),
    }));
  }

  deposit(position: number, to: string, amount: string): void {
    const currency = this.currency;
    this.put(position, 'deposit', (operationId) => ({
      operationId,
      kind: 'deposit',
      to,
      amount,
      currency,
      reference: `bank-${operationId}`,
    }));
  }

  withdrawal(position: number, from: string, amount: string): void {
    const currency = this.currency;
    this.put(position, 'withdrawal', (operationId) => ({
      operationId,
      kind: 'withdrawal',
      from,
      amount,
      currency,
      reference: `bank-${operationId}`,
    }));
  }

  transfer(position: number, from: string, to: string): void {
    const amount = this.amount();
    this.put(position, 'transfer', (operationId) => ({ operationId, from, to, amount }));
  }

  status(position: number, wallet: string, kind: 'unfreeze_wallet' | 'close_wallet'): void {
    this.put(position, kind, (operationId) => ({ operationId, kind, wallet }));
  }

  freeze(position: number, wallet: string, credits: 'allowed' | 'refused'): void {
    this.put(position, 'freeze', (operationId) => ({ operationId, kind: 'freeze_wallet', wallet, credits }));
  }
}

/** A busy wallet: opened, then deposits, transfers both ways and withdrawals over a window, frozen and unfrozen among them. */
function busyWallet(planner: WalletPlanner, w: OpenedWallet, credits: 'allowed' | 'refused'): void {
  const p = planner.start(BUSY_WINDOW_MS);
  const at = (share: number) => planner.after(p, Math.round(share * BUSY_WINDOW_MS));
  planner.open(p, w);
  for (let i = 0; i < BUSY_DEPOSITS; i++) planner.deposit(at(0.05 + 0.9 * planner.random()), w.id, planner.amount(5));
  for (let i = 0; i < BUSY_TRANSFERS_OUT; i++)
    planner.transfer(at(0.1 + 0.9 * planner.random()), w.id, planner.plainWallet());
  for (let i = 0; i < BUSY_TRANSFERS_IN; i++)
    planner.transfer(at(0.05 + 0.95 * planner.random()), planner.plainWallet(), w.id);
  for (let i = 0; i < BUSY_WITHDRAWALS; i++)
    planner.withdrawal(at(0.1 + 0.9 * planner.random()), w.id, planner.amount());
  planner.freeze(at(0.3 + 0.1 * planner.random()), w.id, credits);
  planner.status(at(0.6 + 0.1 * planner.random()), w.id, 'unfreeze_wallet');
}

/** A closing wallet: opened, one deposit, a close too early, the withdrawal of all of it, the close, a deposit too late. */
function closingWallet(planner: WalletPlanner, w: OpenedWallet): void {
  const p = planner.start(CLOSING_STEP_MS * 6);
  const step = (n: number) => planner.after(p, n * CLOSING_STEP_MS);
  const amount = planner.amount(5);
  planner.open(p, w);
  planner.deposit(step(1), w.id, amount);
  planner.status(step(2), w.id, 'close_wallet');
  planner.withdrawal(step(3), w.id, amount);
  planner.status(step(4), w.id, 'close_wallet');
  planner.deposit(step(5), w.id, planner.amount());
}

/** Plans the opened wallets, their traffic, the freezes and the closes among `validCount` transfers. */
export function planWallets(o: WalletPlanOptions, validCount: number, currency: string): WalletPlanResult {
  const planner = new WalletPlanner(o, validCount, currency);
  const amountMax = BigInt(o.amountMaxMinor);
  const opened = new Map<string, OpenedWallet>();
  for (let i = 1; i <= BUSY_WALLETS + CLOSING_WALLETS; i++) {
    const creditLimitMinor = i <= BUSY_WALLETS && i % 2 === 1 ? amountMax * BigInt(OPENED_CREDIT_LIMIT) : 0n;
    opened.set(`${OPENED_WALLET_PREFIX}${i}`, { id: `${OPENED_WALLET_PREFIX}${i}`, currency, creditLimitMinor });
  }
  const list = [...opened.values()];
  for (const [i, w] of list.slice(0, BUSY_WALLETS).entries()) busyWallet(planner, w, i < 2 ? 'refused' : 'allowed');
  for (const w of list.slice(BUSY_WALLETS)) closingWallet(planner, w);
  const watched = new Set(opened.keys());
  for (let i = 0; i < PLAIN_FREEZES; i++) {
    let w = planner.plainWallet();
    while (watched.has(w)) w = planner.plainWallet();
    watched.add(w);
    const p = planner.start(5_000);
    planner.freeze(p, w, 'allowed');
    planner.status(planner.after(p, randomInt(planner.random, 1_000, 4_000)), w, 'unfreeze_wallet');
  }
  const existing = planner.plainWallet();
  planner.put(planner.start(1_000), 'open', (operationId) => ({
    operationId,
    kind: 'open_wallet',
    wallet: existing,
    currency,
  }));
  return { opened, operationIds: planner.operationIds, watched, placed: planner.placed };
}
