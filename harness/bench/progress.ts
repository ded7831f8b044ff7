// Progress lines on stderr (stdout carries only the table): which case and run, and done/total
// at most once per interval, so a long run shows it is alive without flooding the terminal.

export const PROGRESS_INTERVAL_MS = 2_000;

export class Progress {
  private lastMs = 0;
  private label = '';

  constructor(
    private readonly write: (line: string) => void,
    private readonly intervalMs = PROGRESS_INTERVAL_MS,
  ) {}

  /** A new case starts: "[run 1/3] e2e: <what>". */
  begin(run: number, runs: number, caseName: string, what: string): void {
    this.label = `[run ${run}/${runs}] ${caseName}`;
    this.lastMs = performance.now();
    this.write(`${this.label}: ${what}`);
  }

  note(what: string): void {
    this.write(`${this.label}: ${what}`);
  }

  /** Throttled done/total line. */
  tick(done: number, total: number, detail = ''): void {
    const now = performance.now();
    if (now - this.lastMs < this.intervalMs) return;
    this.lastMs = now;
    this.write(`${this.label}: ${done}/${total}${detail === '' ? '' : ` ${detail}`}`);
  }
}
