// A BullMQ job as the chaos run reads it back after the drain, and the answer a completed one
// returned: what the checks, the figures and the charts read of the queue.

/** The final state of one BullMQ job, as read after the drain. */
export interface FinalJob {
  readonly jobId: string;
  readonly name: string;
  readonly state: string;
  readonly returnvalue: unknown;
  readonly failedReason: string | null;
  readonly attemptsMade: number;
  readonly attemptsStarted: number;
  /** Date.now() values. */
  readonly timestamp: number;
  readonly processedOn: number | null;
  readonly finishedOn: number | null;
  readonly data: unknown;
}

/** What a completed job answered: its outcome, the stored record of a duplicate, a rejection's reason. */
export interface JobAnswer {
  readonly outcome: string;
  readonly stored?: { status?: string };
  readonly reason?: string;
  readonly fence?: string;
}

/** The answer a completed job returned, or null. */
export function outcomeOf(value: unknown): JobAnswer | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  return typeof v.outcome === 'string' ? (v as unknown as JobAnswer) : null;
}
