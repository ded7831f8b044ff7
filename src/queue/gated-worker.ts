// A BullMQ Worker that takes jobs only while an admission check passes.
//
// BullMQ's own pause() stops the fetch loop, but a fetch already blocked in Redis when pause()
// is called still takes the next job that arrives (and moveToCompleted may hand over the next
// job in the same call). So the gate is checked once more when a job reaches the processor: a
// job taken while the gate is closed goes back to the wait list untouched (no attempt spent).
//
// run() never rejects here: BullMQ's resume() calls run() without a catch, and a rejected main
// loop would surface as an unhandled rejection, which ends the process. The error is emitted as
// 'error' instead (as BullMQ does for autorun), and the worker's owner restarts the loop.
import { type Job, type Processor, WaitingError, Worker, type WorkerOptions } from 'bullmq';

export interface Admission {
  /** True while the worker may start new jobs. */
  admit(): boolean;
}

export class GatedWorker extends Worker {
  /** With an admission, the worker starts with autorun off: its owner calls run() once ready. */
  constructor(name: string, processor: Processor, opts: WorkerOptions, admission?: Admission) {
    const gated: Processor =
      admission === undefined
        ? processor
        : async (job: Job, token?: string) => {
            if (admission.admit()) return processor(job, token);
            await job.moveToWait(token);
            throw new WaitingError();
          };
    super(name, gated, { ...opts, autorun: admission === undefined });
  }

  override async run(): Promise<void> {
    try {
      await super.run();
    } catch (err) {
      this.emit('error', err instanceof Error ? err : new Error(String(err)));
    }
  }
}
