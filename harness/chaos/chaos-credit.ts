// The credit limits a chaos run exercises, a seeded stream of its own beside the payments (so the
// transfers and the payments are those of a run without it). Two groups of wallets opened at a
// balance of 0 with a credit limit, each debited by nothing but its own stream and credited by
// nothing at all:
// - credit wallets (`cw<i>`, limit CREDIT_WALLET_LIMIT): each sends `debits` transfers or
//   two-leg splits of one amount `a`, more than its limit covers, so exactly ⌊limit / a⌋ apply
//   and the rest are refused insufficient_funds, whatever the faults, the order and the
//   re-deliveries (credit-checks.ts counts them);
// - limit wallets (`lw<i>`, opening limit LIMIT_WALLET_LIMIT): debits of random amounts over a
//   window of the fault phase, and credit_limit operations among them that raise the limit, lower
//   it to 0 (refused limit_below_used once a debit has applied), lower it part way, and end at the
//   sum of every debit sent (always within what is used). The checker's model replays them in
//   decision order (payment-model.ts).
// The plain wallets (`w<i>`, limit 0, never below zero) get limits raised and lowered back to 0
// while their transfers are in flight: every change applies.
import type { CreditLimitWire, OperationWire, SplitWire } from '../../src/ledger/transfer-request.ts';
import { randomInt } from '../../src/workload/prng.ts';
import { type PlacedOperation, StreamPlanner, type StreamPlanOptions } from './stream-planner.ts';

export type { PlacedOperation } from './stream-planner.ts';

const CREDIT_SEED_SALT = 0x0c4e_d171;
export const CREDIT_WALLET_PREFIX = 'cw';
export const LIMIT_WALLET_PREFIX = 'lw';
/** Credit wallets and limit wallets per run. */
const CREDIT_WALLETS = 4;
const LIMIT_WALLETS = 3;
/** Limits, in largest amounts of the run (--amount-max). */
const CREDIT_WALLET_LIMIT = 10;
const LIMIT_WALLET_LIMIT = 5;
/** A credit wallet's debits apply 5 to 40 times, and this many more are sent than its limit covers. */
const CREDIT_APPLIES: readonly [number, number] = [5, 40];
const CREDIT_DEBITS_OVER: readonly [number, number] = [3, 8];
/** Share of a credit wallet's transfers sent twice (a re-delivery under a new job); splits go once. */
const CREDIT_REDELIVERED = 0.2;
/** A limit wallet's debits, and the part of the fault phase they and its limit changes span. */
const LIMIT_WALLET_DEBITS: readonly [number, number] = [10, 20];
const LIMIT_WINDOW_MS = 20_000;
/** Plain wallets whose limit is raised, then lowered back to 0. */
const PLAIN_LIMIT_CHANGES = 6;

/** Wallets opened at a balance of 0 with a credit limit, seeded together (one limit per group). */
export interface ZeroWalletGroup {
  readonly prefix: string;
  readonly count: number;
  readonly creditLimitMinor: bigint;
}

/** A credit wallet: every debit asks `debitMinor`; exactly ⌊limit / debitMinor⌋ of `debits` must apply. */
export interface CreditWallet {
  readonly id: string;
  readonly creditLimitMinor: bigint;
  readonly debitMinor: bigint;
  readonly debits: number;
}

export interface CreditPlan {
  readonly groups: readonly ZeroWalletGroup[];
  /** Each wallet of the groups, by id: its opening credit limit (its opening balance is 0). */
  readonly openingLimits: ReadonlyMap<string, bigint>;
  readonly creditWallets: readonly CreditWallet[];
  readonly placed: readonly PlacedOperation[];
}

export const NO_CREDIT_PLAN: CreditPlan = Object.freeze({
  groups: [],
  openingLimits: new Map(),
  creditWallets: [],
  placed: [],
});

export type CreditPlanOptions = StreamPlanOptions;

class CreditPlanner extends StreamPlanner {
  constructor(o: CreditPlanOptions, validCount: number) {
    super(o, validCount, CREDIT_SEED_SALT, 'credit');
  }

  put(position: number, wire: OperationWire): void {
    this.placed.push({ position, wire });
  }

  /** A debit of `amount` from `from`: a transfer, or a split of two legs when `split` and the amount allows. */
  debit(from: string, amount: bigint, split: boolean): OperationWire {
    if (!split || amount < 2n) {
      return { operationId: this.id('transfer'), from, to: this.plainWallet(), amount: amount.toString() };
    }
    const first = BigInt(randomInt(this.random, 1, Number(amount) - 1));
    const to = this.plainWallet();
    let other = this.plainWallet();
    while (other === to) other = this.plainWallet();
    const wire: SplitWire = {
      operationId: this.id('split'),
      kind: 'split',
      from,
      legs: [
        { to, amount: first.toString() },
        { to: other, amount: (amount - first).toString() },
      ],
    };
    return wire;
  }

  limit(position: number, from: string, limit: bigint): void {
    const wire: CreditLimitWire = {
      operationId: this.id('limit'),
      kind: 'credit_limit',
      from,
      limit: limit.toString(),
    };
    this.put(position, wire);
  }
}

/** One credit wallet: M debits of one amount, more than its limit covers, some delivered twice. */
function creditWallet(planner: CreditPlanner, id: string, limit: bigint): CreditWallet {
  const applies = randomInt(planner.random, CREDIT_APPLIES[0], CREDIT_APPLIES[1]);
  const debitMinor = limit / BigInt(applies);
  const debits = Number(limit / debitMinor) + randomInt(planner.random, CREDIT_DEBITS_OVER[0], CREDIT_DEBITS_OVER[1]);
  for (let i = 0; i < debits; i++) {
    const p = planner.start();
    const wire = planner.debit(id, debitMinor, planner.random() < 1 / 3);
    planner.put(p, wire);
    // A split is sent once: under the no-idempotency control a second delivery that applies again
    // writes its legs' keys twice and fails its batch at every retry, so the queue never drains.
    // The draws are made either way, so a seed's plan is otherwise unchanged.
    const again = planner.random() < CREDIT_REDELIVERED;
    const delay = again ? randomInt(planner.random, 500, 5_000) : 0;
    if (again && wire.kind !== 'split') planner.put(planner.after(p, delay), wire);
  }
  return { id, creditLimitMinor: limit, debitMinor, debits };
}

/** One limit wallet: debits over a window, and limit changes among them. */
function limitWallet(planner: CreditPlanner, id: string, opening: bigint): void {
  const amountMax = planner.o.amountMaxMinor;
  const p = planner.start(LIMIT_WINDOW_MS);
  const at = (share: number) => planner.after(p, Math.round(share * LIMIT_WINDOW_MS));
  const count = randomInt(planner.random, LIMIT_WALLET_DEBITS[0], LIMIT_WALLET_DEBITS[1]);
  let total = 0n;
  for (let i = 0; i < count; i++) {
    const amount = BigInt(randomInt(planner.random, 1, amountMax));
    total += amount;
    const q = at(planner.random());
    planner.put(q, planner.debit(id, amount, planner.random() < 0.25));
  }
  planner.limit(at(0.2), id, opening + BigInt(randomInt(planner.random, 1, 3) * amountMax));
  planner.limit(at(0.45), id, 0n);
  planner.limit(at(0.6), id, opening / 2n);
  planner.limit(at(0.75), id, opening + BigInt(randomInt(planner.random, 2, 6) * amountMax));
  // The sum of every debit sent: at least what the wallet can ever use, so it applies.
  planner.limit(at(1), id, total);
}

/** Plans the credit wallets, the limit wallets and the plain wallets' limit changes among `validCount` transfers. */
export function planCredit(o: CreditPlanOptions, validCount: number): CreditPlan {
  const planner = new CreditPlanner(o, validCount);
  const amountMax = BigInt(o.amountMaxMinor);
  const groups: ZeroWalletGroup[] = [
    { prefix: CREDIT_WALLET_PREFIX, count: CREDIT_WALLETS, creditLimitMinor: amountMax * BigInt(CREDIT_WALLET_LIMIT) },
    { prefix: LIMIT_WALLET_PREFIX, count: LIMIT_WALLETS, creditLimitMinor: amountMax * BigInt(LIMIT_WALLET_LIMIT) },
  ];
  const [credit, limits] = groups as [ZeroWalletGroup, ZeroWalletGroup];
  const creditWallets = Array.from({ length: credit.count }, (_, i) =>
    creditWallet(planner, `${credit.prefix}${i + 1}`, credit.creditLimitMinor),
  );
  for (let i = 1; i <= limits.count; i++) limitWallet(planner, `${limits.prefix}${i}`, limits.creditLimitMinor);
  for (let i = 0; i < PLAIN_LIMIT_CHANGES; i++) {
    const w = planner.plainWallet();
    const p = planner.start(5_000);
    planner.limit(p, w, BigInt(randomInt(planner.random, 1, 10) * o.amountMaxMinor));
    planner.limit(planner.after(p, randomInt(planner.random, 1_000, 5_000)), w, 0n);
  }
  const openingLimits = new Map<string, bigint>();
  for (const g of groups) for (let i = 1; i <= g.count; i++) openingLimits.set(`${g.prefix}${i}`, g.creditLimitMinor);
  return { groups, openingLimits, creditWallets, placed: planner.placed };
}
