// The transfers a bench run sends: distinct operations between seeded wallets, uniform or with
// one hot source wallet, the same for every case of one run (the seed is the run number), and
// wallets funded so that every transfer applies.
import type { TransferWire } from '../../ledger/transfer-request.ts';
import { randomWorkload } from '../../workload/random-transfers.ts';
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
