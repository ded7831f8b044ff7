// Gathers the lock calls of one event-loop turn into one call to the server (Redis: one script
// call; PostgreSQL: one statement), so a turn's acquisitions, however many wallets, cost one
// round trip. Each caller gets its own entry of the reply.
/** Wallets in one acquire or release call at most; more in one turn go out in several calls. */
export const LOCK_CALL_WALLETS_MAX = 256;

/** One wallet's part of a call that gathers the wallets of an event-loop turn. */
interface Gathered<T, R> {
  readonly item: T;
  resolve(reply: R): void;
  reject(err: unknown): void;
}

/**
 * Gathers the calls made in one event-loop turn, to be sent as one (at most
 * LOCK_CALL_WALLETS_MAX each) when the turn's flush runs, handing every caller its own entry of
 * the reply. A call that fails fails all of its callers with the same error, as one call each
 * would have. Without `gather` (a cluster, where the wallets of a turn live in different slots
 * and nodes) every call goes out at once, alone.
 */
export class TurnGatherer<T, R> {
  private waiting: Gathered<T, R>[] = [];

  constructor(
    private readonly send: (items: readonly T[]) => Promise<R[]>,
    private readonly schedule: () => void,
    private readonly gather: boolean,
    /** Items in one call at most (etcd takes 128 operations in a transaction). */
    private readonly itemsMax: number = LOCK_CALL_WALLETS_MAX,
  ) {}

  call(item: T): Promise<R> {
    if (!this.gather) return this.send([item]).then((replies) => replies[0] as R);
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.schedule();
    });
  }

  flush(): void {
    const all = this.waiting;
    this.waiting = [];
    for (let start = 0; start < all.length; start += this.itemsMax) {
      const part = all.slice(start, start + this.itemsMax);
      this.send(part.map((g) => g.item)).then(
        (replies) => {
          for (let i = 0; i < part.length; i++) (part[i] as Gathered<T, R>).resolve(replies[i] as R);
        },
        (err: unknown) => {
          for (const g of part) g.reject(err);
        },
      );
    }
  }
}

/**
 * A `schedule` for the gatherers of one connection: the first call of a turn arranges one
 * `flush` (every gatherer's, in the caller's order) once the turn is over, the others do nothing.
 */
export function flushEachTurn(flush: () => void): () => void {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      flush();
    });
  };
}
