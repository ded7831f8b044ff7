// What the chaos workload's side streams share (the credit limits, chaos-credit.ts; the wallets,
// chaos-wallets.ts): each is a seeded stream of operations of its own, placed among the run's valid
// transfers by index, with its places and delays measured in the run's pace.
import type { OperationWire } from '../../src/ledger/transfer-request.ts';
import { type Random, randomInt, seededRandom } from '../../src/workload/prng.ts';

/** One message of a stream, sent before the valid transfer of index `position`. */
export interface PlacedOperation {
  readonly position: number;
  readonly wire: OperationWire;
}

/** What a stream is planned from: the run's seed, plain wallets, largest amount and length. */
export interface StreamPlanOptions {
  readonly seed: number;
  readonly wallets: number;
  readonly amountMaxMinor: number;
  readonly durationS: number;
}

/** A stream's random source, its places and its operation ids. */
export class StreamPlanner {
  readonly random: Random;
  readonly placed: PlacedOperation[] = [];
  private readonly msPerMessage: number;
  private n = 0;

  /** `salt` keeps the stream's random draws apart from the run's; `idPrefix` starts its operation ids. */
  constructor(
    readonly o: StreamPlanOptions,
    readonly validCount: number,
    salt: number,
    private readonly idPrefix: string,
  ) {
    this.random = seededRandom((o.seed ^ salt) >>> 0);
    this.msPerMessage = (o.durationS * 1000) / Math.max(1, validCount);
  }

  /** A place after the warm-up, `withinMs` of the fault phase before the end at the latest. */
  start(withinMs = 0): number {
    const first = Math.min(this.validCount, 50);
    const last = Math.max(first, this.validCount - 1 - Math.ceil(withinMs / this.msPerMessage));
    return randomInt(this.random, first, last);
  }

  /** The place about `ms` after `position`, at the end at the latest. */
  after(position: number, ms: number): number {
    return Math.min(this.validCount, position + Math.ceil(ms / this.msPerMessage));
  }

  plainWallet(): string {
    return `w${randomInt(this.random, 1, this.o.wallets)}`;
  }

  id(what: string): string {
    return `${this.idPrefix}-${this.o.seed}-${++this.n}-${what}`;
  }
}
