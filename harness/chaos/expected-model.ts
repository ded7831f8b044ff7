// The facts every check of the chaos checker reads, built once after the drain: what the harness
// sent and read back of the queue, the database as it was left (database-state.ts), and the model
// of what should have happened — each operation's deliveries, and the payments replayed by the
// rules (payment-model.ts), which give the expected balances and holds. A check declares the part
// it reads as its input type (Pick<CheckFacts, ...>), so its unit test builds just that part.
import type { ChaosMessage, ChaosWorkload } from './chaos-workload.ts';
import type { DatabaseState } from './database-state.ts';
import type { FinalJob } from './final-job.ts';
import { buildPaymentModel, type PaymentModel } from './payment-model.ts';

/** What the chaos run hands the checker. */
export interface CheckInput {
  readonly workload: ChaosWorkload;
  /** jobId → the message sent under it. */
  readonly sent: ReadonlyMap<string, ChaosMessage>;
  readonly jobs: readonly FinalJob[];
  readonly drained: { ok: boolean; detail: string };
  /**
   * An intake run: a lossy failover may lose a valid transfer's job, so a missing job or a missing
   * record of a valid transfer is judged by the intake checks (intake-checks.ts), not here.
   */
  readonly intakeRun?: boolean;
}

/** What the harness sent, and every job as read back after the drain. */
export interface QueueRecord {
  readonly workload: ChaosWorkload;
  readonly sent: ReadonlyMap<string, ChaosMessage>;
  readonly jobById: ReadonlyMap<string, FinalJob>;
  readonly drained: { ok: boolean; detail: string };
  readonly intakeRun: boolean;
}

/** One delivery of a valid message: the job and what was sent under it. */
export interface Delivery {
  readonly job: FinalJob;
  readonly message: ChaosMessage;
}

/** What should have happened. */
export interface ExpectedModel {
  /** Operation id → its valid messages that have a job. */
  readonly deliveries: ReadonlyMap<string, readonly Delivery[]>;
  /** The payment rules replayed: expected balances (`$held:<wallet>` too) and holds. */
  readonly payments: PaymentModel;
}

export type CheckFacts = QueueRecord & DatabaseState & ExpectedModel;

/** Each operation's deliveries: its valid messages that have a job, in the order sent. */
export function deliveriesByOperation(
  sent: ReadonlyMap<string, ChaosMessage>,
  jobById: ReadonlyMap<string, FinalJob>,
): Map<string, Delivery[]> {
  const out = new Map<string, Delivery[]>();
  for (const [jobId, message] of sent) {
    if (message.kind === 'invalid' || message.operationId === null) continue;
    const job = jobById.get(jobId);
    if (job === undefined) continue;
    out.set(message.operationId, [...(out.get(message.operationId) ?? []), { job, message }]);
  }
  return out;
}

/** The facts of a run, the model built once from what was sent and the database read after the drain. */
export function buildCheckFacts(input: CheckInput, db: DatabaseState): CheckFacts {
  const jobById = new Map(input.jobs.map((j) => [j.jobId, j]));
  const queue: QueueRecord = {
    workload: input.workload,
    sent: input.sent,
    jobById,
    drained: input.drained,
    intakeRun: input.intakeRun === true,
  };
  const model: ExpectedModel = {
    deliveries: deliveriesByOperation(input.sent, jobById),
    payments: buildPaymentModel({ workload: input.workload, ...db }),
  };
  return { ...queue, ...db, ...model };
}
