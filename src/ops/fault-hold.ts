// Keeps a worker out of work after a permanent failure (a lost grant, a contract or protocol
// error, a bug: PERMANENT_KINDS in the vocabulary): not ready, taking no job, for a hold that
// starts at FAULT_HOLD_MIN_MS and doubles with each fault that follows without a decision in
// between, up to FAULT_HOLD_MAX_MS. A worker that stays broken so meets one batch of jobs per
// hold (each put back without spending an attempt), never a hot loop; one whose fault is fixed (a GRANT, a migration) is back after the
// shortest hold, and the readiness probes keep it out meanwhile where they can see the fault.
import type { PermanentKind } from '../ledger/vocabulary.ts';

export const FAULT_HOLD_MIN_MS = 5_000;
export const FAULT_HOLD_MAX_MS = 5 * 60_000;

export interface PermanentFault {
  readonly kind: PermanentKind;
  /** The failed attempt's message: the kind's prefix, what happened and the fix. */
  readonly reason: string;
  readonly holdMs: number;
  /** By the monotonic clock (performance.now()). */
  readonly untilMs: number;
}

export class FaultHold {
  private fault: PermanentFault | null = null;
  /** Faults since the last decision: the hold doubles with each. */
  private streak = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * A permanent failure. Returns the new fault, or null when one is held already (the riders of
   * one failed batch report the same fault once each: that is one fault, not many).
   */
  report(kind: PermanentKind, reason: string): PermanentFault | null {
    if (this.current() !== null) return null;
    this.streak += 1;
    const holdMs = Math.min(FAULT_HOLD_MAX_MS, FAULT_HOLD_MIN_MS * 2 ** Math.min(this.streak - 1, 30));
    this.fault = { kind, reason, holdMs, untilMs: this.now() + holdMs };
    return this.fault;
  }

  /** A transfer was decided: the worker works, so the next fault starts from the shortest hold. */
  decided(): void {
    this.streak = 0;
  }

  /** The fault held now, or null once its hold has passed. */
  current(): PermanentFault | null {
    if (this.fault !== null && this.now() >= this.fault.untilMs) this.fault = null;
    return this.fault;
  }

  /** What /readyz says while a fault is held. */
  describe(): string | null {
    const fault = this.current();
    if (fault === null) return null;
    const leftS = Math.ceil((fault.untilMs - this.now()) / 1000);
    return `${fault.reason} (not taking jobs for another ${leftS} s)`;
  }
}
