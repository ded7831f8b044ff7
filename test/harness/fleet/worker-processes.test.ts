// The waits on worker processes from outside: a wait for the workers to connect whose count
// never answers (a queue connection that retries for ever while Redis is gone) fails within its
// bound, saying so, instead of hanging; and a worker that exits while that count is awaited
// fails the wait at once, with how it ended and the end of its log. The "worker" here is a
// stand-in script: the waits look at the process and at the count, not at what runs.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WorkerProcess, waitForWorkersConnected } from '../../../harness/fleet/worker-processes.ts';

const WAIT_MS = 500;
/** Far above WAIT_MS and a poll interval, far below the long wait of the exit case. */
const NOTICED_WITHIN_MS = 5_000;
const LONG_WAIT_MS = 60_000;
const EXIT_CODE = 3;

const dir = mkdtempSync(join(tmpdir(), 'worker-processes-test-'));
const workers: WorkerProcess[] = [];

afterAll(async () => {
  for (const w of workers) await w.stop(1_000);
  rmSync(dir, { recursive: true, force: true });
});

function standIn(name: string, source: string): WorkerProcess {
  const entry = join(dir, `${name}.js`);
  writeFileSync(entry, source);
  const w = new WorkerProcess(workers.length + 1, { env: {}, entry, logDir: join(dir, 'logs'), runtimeFlags: [] });
  workers.push(w);
  w.start();
  return w;
}

const neverAnswers = () => new Promise<number>(() => undefined);

describe('waitForWorkersConnected', () => {
  it('fails within its bound when the count never answers', async () => {
    const w = standIn('idle', 'setInterval(() => undefined, 1000);\n');
    const t0 = performance.now();
    await expect(waitForWorkersConnected([w], neverAnswers, WAIT_MS)).rejects.toThrow(
      new RegExp(`^only 0 of 1 workers connected within ${WAIT_MS} ms\\n[^]*the last check: a probe did not answer`),
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });

  it('fails at once when a worker exits while the count is awaited', async () => {
    const w = standIn('exits', `console.log('stand-in going'); setTimeout(() => process.exit(${EXIT_CODE}), 300);\n`);
    const t0 = performance.now();
    await expect(waitForWorkersConnected([w], neverAnswers, LONG_WAIT_MS)).rejects.toThrow(
      new RegExp(`^worker ${w.index} exited with code ${EXIT_CODE}; the end of [^\\n]+:\\nstand-in going`),
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });
});
