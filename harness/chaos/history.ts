// The run's history: one NDJSON line per event (enqueue, job start, attempt failure, outcome,
// fault start and end, check), in the order the harness saw them, with the offset from the
// start of the fault phase. Reading it back gives the whole run to whoever doubts the report.
import { createWriteStream, type WriteStream } from 'node:fs';

export type HistoryEvent =
  | { type: 'run_start'; seed: number; options: unknown }
  | {
      type: 'enqueue';
      jobId: string;
      seq: number;
      kind: string;
      operationId: string | null;
      defect?: string | null;
      /** Valid messages: the money movement the operation asks for (applied once, whichever of its messages wins). */
      effect?: { kind?: string; from?: string; to?: string; amount?: string };
    }
  | {
      /** Intake runs: a transfer requested through the intake, committed (jobId: the relay's job of it). */
      type: 'request';
      jobId: string;
      seq: number;
      kind: string;
      operationId: string;
      effect: { kind?: string; from?: string; to?: string; amount?: string };
    }
  | { type: 'request_refused'; seq: number; operationId: string; reason: string }
  | { type: 'job_active'; jobId: string; prev?: string }
  | { type: 'job_failed'; jobId: string; reason: string }
  | { type: 'job_completed'; jobId: string; outcome: string }
  | { type: 'job_stalled'; jobId: string }
  | { type: 'fault_start'; faultId: number; kind: string; worker: number | null; link: string | null; detail: string }
  | { type: 'fault_end'; faultId: number; kind: string; detail?: string }
  | { type: 'fault_error'; faultId: number; kind: string; error: string }
  | { type: 'phase'; phase: string; detail?: unknown }
  | {
      type: 'final';
      jobId: string;
      state: string;
      operationId: string | null;
      outcome?: string;
      reason?: string;
      attemptsMade: number;
      attemptsStarted: number;
      enqueuedAtMs: number;
      finishedAtMs: number | null;
    }
  | { type: 'check'; name: string; ok: boolean; counterexamples: unknown[] }
  | { type: 'run_end'; verdict: string; durationMs: number };

export class History {
  private readonly stream: WriteStream;
  private lines = 0;

  /** `t0Ms` is performance.now() at the start of the fault phase (negative offsets are set-up). */
  constructor(
    readonly path: string,
    private t0Ms: number,
    private t0WallMs: number,
  ) {
    this.stream = createWriteStream(path, { flags: 'w' });
  }

  /** Moves the origin of every later line's offset (to the start of the fault phase). */
  setOrigin(t0Ms: number, t0WallMs: number): void {
    this.t0Ms = t0Ms;
    this.t0WallMs = t0WallMs;
  }

  get origin(): { t0Ms: number; t0WallMs: number } {
    return { t0Ms: this.t0Ms, t0WallMs: this.t0WallMs };
  }

  /** Milliseconds since the origin, by the monotonic clock. */
  nowMs(): number {
    return Math.round(performance.now() - this.t0Ms);
  }

  /** A wall-clock timestamp (BullMQ's Date.now() values) as an offset from the origin. */
  offsetOfWallMs(wallMs: number): number {
    return wallMs - this.t0WallMs;
  }

  write(event: HistoryEvent, atMs: number = this.nowMs()): void {
    this.lines += 1;
    this.stream.write(`${JSON.stringify({ tMs: atMs, ...event })}\n`);
  }

  get lineCount(): number {
    return this.lines;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.stream.end(() => resolve()));
  }
}
