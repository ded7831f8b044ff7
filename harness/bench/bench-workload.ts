// The transfers a bench run sends: distinct operations between seeded wallets, uniform or with
// one hot source wallet, the same for every case of one run (the seed is the run number), and
// wallets funded so that every transfer applies. And the payments of e2e-payments: the same
// run's transfers as holds, the capture of each, and splits from the same payers.
import type { CaptureWire, HoldWire, SplitWire, TransferWire } from '../../src/ledger/transfer-request.ts';
import { randomInt, seededRandom } from '../../src/workload/prng.ts';
import { randomWorkload } from '../../src/workload/random-transfers.ts';
import { PAYMENTS_WALLETS_MIN, SPLIT_LEGS } from './bench-options.ts';
import { BENCH_WALLET_PREFIX } from './sandbox.ts';

/** Largest amount of one transfer, minor units. */
export const BENCH_AMOUNT_MAX_MINOR = 100;
/** Share of transfers leaving `wallet-1` in the hot case. */
export const HOT_WALLET_RATE = 0.9;
const SEED_BASE = 8_000;

/**
 * Opening balance of every wallet: enough for one wallet to send every transfer of the run at
 * the largest amount, so no transfer is rejected for funds whatever the order (hot case too).
 */
export function benchBalanceMinor(transfers: number): bigint {
  return BigInt(transfers) * BigInt(BENCH_AMOUNT_MAX_MINOR);
}

export interface BenchWorkloadSpec {
  readonly transfers: number;
  readonly wallets: number;
  readonly run: number;
  readonly hot: boolean;
  /** Operation ids are `<prefix><n>`; the cases of one run share the ids (each has its own database). */
  readonly operationPrefix: string;
}

export function benchWorkload(spec: BenchWorkloadSpec): TransferWire[] {
  return randomWorkload({
    transfers: spec.transfers,
    wallets: spec.wallets,
    walletPrefix: BENCH_WALLET_PREFIX,
    duplicateRate: 0,
    conflicts: 0,
    amountMaxMinor: BENCH_AMOUNT_MAX_MINOR,
    seed: SEED_BASE + spec.run,
    operationPrefix: spec.operationPrefix,
    hotWalletRate: spec.hot ? HOT_WALLET_RATE : 0,
  }).map((m) => m.wire);
}

/** Largest amount of one split leg: a split's total is at most BENCH_AMOUNT_MAX_MINOR, as a transfer's. */
export const SPLIT_LEG_AMOUNT_MAX_MINOR = Math.floor(BENCH_AMOUNT_MAX_MINOR / SPLIT_LEGS);
/** A day: no hold of a run can expire before its capture (HOLD_EXPIRY_MAX_MS permitting). */
export const BENCH_HOLD_EXPIRES_IN_MS = 86_400_000;
const SPLIT_SEED_BASE = 9_000;

/** The operation ids of the payment parts of a run: `<run prefix>h<n>`, `…c<n>`, `…s<n>`. */
export function paymentPrefixesOf(operationPrefix: string): { hold: string; capture: string; split: string } {
  return { hold: `${operationPrefix}h`, capture: `${operationPrefix}c`, split: `${operationPrefix}s` };
}

export interface BenchPayments {
  /** e2e's transfers of the run, each as a hold of the same amount from the same payer to the same payee. */
  readonly holds: HoldWire[];
  /** One per hold, in the same order: the whole held amount (no `amount`: all of it). */
  readonly captures: CaptureWire[];
  /** From e2e's payers, in e2e's order: SPLIT_LEGS legs to distinct other wallets, 1..SPLIT_LEG_AMOUNT_MAX_MINOR each. */
  readonly splits: SplitWire[];
}

export interface BenchPaymentsSpec extends Omit<BenchWorkloadSpec, 'hot'> {
  /** The holds' expiresInMs; at most HOLD_EXPIRY_MAX_MS. */
  readonly holdExpiresInMs: number;
}

/**
 * e2e-payments' operations: as many holds, captures and splits as e2e has transfers, so that each
 * part is counted as e2e is. The holds are e2e's transfers of the same run (same wallets, same
 * amounts); the splits leave the same payers, and a split's total is at most a transfer's largest
 * amount. So a wallet pays one hold and one split per e2e transfer it sends, and its opening
 * balance (benchBalanceMinor) covers both as long as it sends at most half of them: uniform over
 * at least PAYMENTS_WALLETS_MIN wallets, far fewer (checked before a run: paymentsFunded()).
 */
export function benchPayments(spec: BenchPaymentsSpec): BenchPayments {
  if (spec.wallets < PAYMENTS_WALLETS_MIN) {
    throw new RangeError(`a split of ${SPLIT_LEGS} legs needs ${PAYMENTS_WALLETS_MIN} wallets, got ${spec.wallets}`);
  }
  const transfers = benchWorkload({ ...spec, hot: false });
  const prefixes = paymentPrefixesOf(spec.operationPrefix);
  const numberOf = (wire: TransferWire) => wire.operationId.slice(spec.operationPrefix.length);
  const holds = transfers.map(
    (t): HoldWire => ({
      operationId: `${prefixes.hold}${numberOf(t)}`,
      kind: 'hold',
      from: t.from,
      to: t.to,
      amount: t.amount,
      expiresInMs: spec.holdExpiresInMs,
    }),
  );
  const captures = holds.map(
    (h): CaptureWire => ({
      operationId: `${prefixes.capture}${h.operationId.slice(prefixes.hold.length)}`,
      kind: 'capture',
      from: h.from,
      hold: h.operationId,
    }),
  );
  const random = seededRandom(SPLIT_SEED_BASE + spec.run);
  const splits = transfers.map((t): SplitWire => {
    const taken = new Set([t.from]);
    const legs = [];
    while (legs.length < SPLIT_LEGS) {
      const to = `${BENCH_WALLET_PREFIX}${randomInt(random, 1, spec.wallets)}`;
      if (taken.has(to)) continue;
      taken.add(to);
      legs.push({ to, amount: String(randomInt(random, 1, SPLIT_LEG_AMOUNT_MAX_MINOR)) });
    }
    return { operationId: `${prefixes.split}${numberOf(t)}`, kind: 'split', from: t.from, legs };
  });
  return { holds, captures, splits };
}

/**
 * Whether every payer can pay all its holds and all its splits from its opening balance alone,
 * credits left aside: then every operation applies whatever the order. Checked before a run, so
 * a workload that broke it fails there, not as refusals in the middle of one.
 */
export function paymentsFunded(payments: BenchPayments, balanceMinor: bigint): boolean {
  const debits = new Map<string, bigint>();
  const add = (wallet: string, amount: bigint) => debits.set(wallet, (debits.get(wallet) ?? 0n) + amount);
  for (const h of payments.holds) add(h.from, BigInt(h.amount));
  for (const s of payments.splits) for (const leg of s.legs) add(s.from, BigInt(leg.amount));
  return [...debits.values()].every((d) => d <= balanceMinor);
}
