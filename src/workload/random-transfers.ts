// Generates a reproducible transfer workload: random transfers between seeded wallets, some
// operations delivered more than once (duplicates), some reusing an id with another amount
// (conflicts). Used by `npm run enqueue -- --random`, the demo and the chaos harness.
import type { TransferWire } from '../ledger/transfer-request.ts';
import { pick, randomInt, seededRandom } from './prng.ts';

export const RANDOM_TRANSFERS_MAX = 1_000_000;

export interface WorkloadOptions {
  transfers: number;
  wallets: number;
  walletPrefix: string;
  /** Share of extra deliveries of an operation already in the workload, 0..1. */
  duplicateRate: number;
  /** How many extra messages reuse an operation id with a different amount. */
  conflicts: number;
  amountMaxMinor: number;
  seed: number;
  operationPrefix: string;
  /** Share of transfers that leave one hot wallet (`<prefix>1`), 0..1. */
  hotWalletRate?: number;
}

export interface WorkloadMessage {
  wire: TransferWire;
  kind: 'original' | 'duplicate' | 'conflict';
}

export function validateWorkloadOptions(o: WorkloadOptions): void {
  if (!Number.isInteger(o.transfers) || o.transfers < 1 || o.transfers > RANDOM_TRANSFERS_MAX) {
    throw new RangeError(`transfers must be from 1 to ${RANDOM_TRANSFERS_MAX}`);
  }
  if (!Number.isInteger(o.wallets) || o.wallets < 2) throw new RangeError('wallets must be at least 2');
  if (!(o.duplicateRate >= 0 && o.duplicateRate <= 1)) throw new RangeError('duplicate rate must be between 0 and 1');
  if (!Number.isInteger(o.conflicts) || o.conflicts < 0 || o.conflicts > o.transfers) {
    throw new RangeError('conflicts must be between 0 and the number of transfers');
  }
  if (!Number.isInteger(o.amountMaxMinor) || o.amountMaxMinor < 1)
    throw new RangeError('amount maximum must be a positive integer');
  const hot = o.hotWalletRate ?? 0;
  if (!(hot >= 0 && hot <= 1)) throw new RangeError('hot wallet rate must be between 0 and 1');
}

/**
 * `transfers` distinct operations, then `round(transfers * duplicateRate)` re-deliveries of
 * random earlier ones and `conflicts` reused ids with another amount, shuffled together.
 */
export function randomWorkload(o: WorkloadOptions): WorkloadMessage[] {
  validateWorkloadOptions(o);
  const random = seededRandom(o.seed);
  const wallet = (i: number) => `${o.walletPrefix}${i}`;
  const originals: WorkloadMessage[] = [];
  for (let i = 1; i <= o.transfers; i++) {
    const hot = random() < (o.hotWalletRate ?? 0);
    const from = hot ? 1 : randomInt(random, 1, o.wallets);
    let to = randomInt(random, 1, o.wallets - 1);
    if (to >= from) to += 1;
    originals.push({
      kind: 'original',
      wire: {
        operationId: `${o.operationPrefix}${i}`,
        from: wallet(from),
        to: wallet(to),
        amount: String(randomInt(random, 1, o.amountMaxMinor)),
      },
    });
  }
  const extras: WorkloadMessage[] = [];
  const duplicates = Math.round(o.transfers * o.duplicateRate);
  for (let i = 0; i < duplicates; i++) extras.push({ kind: 'duplicate', wire: { ...pick(random, originals).wire } });
  for (let i = 0; i < o.conflicts; i++) {
    const original = pick(random, originals).wire;
    extras.push({ kind: 'conflict', wire: { ...original, amount: String(BigInt(original.amount) + 1n) } });
  }
  const all = [...originals, ...extras];
  for (let i = all.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [all[i], all[j]] = [all[j] as WorkloadMessage, all[i] as WorkloadMessage];
  }
  return all;
}
