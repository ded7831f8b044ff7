// Drives `count` tasks through `lanes` concurrent loops, each taking the next index as soon as
// its previous task has finished: the closed-loop load of a pool with `lanes` connections.
// Records each task's duration; stops early (and says so) when the signal is aborted.

export interface LaneRun {
  /** Duration of each task that finished, ms, in completion order. */
  readonly taskMs: number[];
  /** performance.now() when the first lane started and when the last task finished. */
  readonly startedMs: number;
  readonly finishedMs: number;
}

export async function driveLanes(
  count: number,
  lanes: number,
  task: (index: number) => Promise<void>,
  onDone: (done: number) => void,
  signal: AbortSignal,
): Promise<LaneRun> {
  if (!Number.isInteger(lanes) || lanes < 1)
    throw new RangeError(`lanes must be a positive whole number, got ${lanes}`);
  let next = 0;
  let done = 0;
  const taskMs: number[] = [];
  const startedMs = performance.now();
  const lane = async () => {
    for (;;) {
      if (signal.aborted) throw new Error('interrupted');
      const index = next;
      if (index >= count) return;
      next += 1;
      const t0 = performance.now();
      await task(index);
      taskMs.push(performance.now() - t0);
      done += 1;
      onDone(done);
    }
  };
  await Promise.all(Array.from({ length: Math.min(lanes, count) }, lane));
  return { taskMs, startedMs, finishedMs: performance.now() };
}
