// Releases the holds nobody captured or voided in time, from every worker: every
// HOLD_SWEEP_INTERVAL_MS, calls of holds_expire() (the payments migration) in statements of their
// own, until a call releases fewer than HOLD_SWEEP_BATCH holds. The function locks as the
// decisions do and checks each hold's state under its row lock, so any number of workers sweep at
// once and a hold is released once; a worker killed mid-sweep rolls its call back and the next
// sweep (its own or another worker's) releases the same holds. A hold is so released within about
// one interval of its expiry while any worker runs; a capture or void that comes first finds it
// expired and releases it itself. The timer is PeriodicCall's (src/db/periodic-call.ts).
import { PeriodicCall } from '../db/periodic-call.ts';
import type { PrismaClient } from '../db/prisma.ts';
import type { Logger } from '../log/logger.ts';

/** Holds released per call of holds_expire(); a full call is followed by another at once. */
export const HOLD_SWEEP_BATCH = 1_000;
/** Calls per tick at most, so a backlog is worked through without holding the timer for ever. */
export const HOLD_SWEEP_CALLS_MAX = 20;

/** One call of the sweep: the number of holds it released. */
export async function expireHolds(prisma: PrismaClient, limit = HOLD_SWEEP_BATCH): Promise<number> {
  const rows = await prisma.$queryRaw<{ released: number }[]>`SELECT holds_expire(${limit}::integer) AS released`;
  return Number(rows[0]?.released ?? 0);
}

export class HoldSweeper {
  private readonly periodic: PeriodicCall;

  constructor(
    private readonly prisma: PrismaClient,
    intervalMs: number,
    private readonly logger: Logger,
    private readonly onReleased: (count: number) => void = () => undefined,
  ) {
    this.periodic = new PeriodicCall({
      intervalMs,
      logger,
      failure: { event: 'hold_sweep_failed', message: 'could not release expired holds; retrying' },
      call: () => this.sweep(),
    });
  }

  start(): void {
    this.periodic.start();
  }

  /** Stops the timer and waits for a sweep in flight. */
  stop(): Promise<void> {
    return this.periodic.stop();
  }

  private async sweep(): Promise<void> {
    for (let call = 0; call < HOLD_SWEEP_CALLS_MAX; call += 1) {
      const released = await expireHolds(this.prisma);
      this.onReleased(released);
      if (released > 0) this.logger.info({ event: 'holds_expired', released }, 'expired holds released');
      if (released < HOLD_SWEEP_BATCH) return;
    }
  }
}
