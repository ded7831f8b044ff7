// The worker's node flags (src/config/worker-runtime.ts): node accepts them and they bound the
// young generation, every launcher passes exactly them, and the fleet starts processes with them
// unless told otherwise. (Compose, the Dockerfile and the Kubernetes Deployment are held to the
// same list in their own tests in this folder.)
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WorkerProcess } from '../../harness/fleet/worker-processes.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';

const MIB = 1024 * 1024;

/**
 * Allocates about 3 million short-lived objects with a share surviving for a while (as jobs in
 * hand do) and prints the largest new-space size seen: V8 grows the young generation under
 * such a load up to its limit.
 */
const YOUNG_GENERATION_PROBE = `
  const v8 = require('node:v8');
  let keep = [];
  let max = 0;
  for (let i = 0; i < 3e6; i++) {
    keep.push({ i, s: 'x' + i });
    if (keep.length > 200000) keep = [];
    if (i % 10000 === 0) {
      const space = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      max = Math.max(max, space ? space.space_size : 0);
    }
  }
  process.stdout.write(String(max));
`;

function newSpaceMaxMiB(flags: readonly string[]): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', YOUNG_GENERATION_PROBE], { encoding: 'utf8' })) / MIB;
}

function semiSpaceMiB(): number {
  const flag = WORKER_NODE_FLAGS.find((f) => f.startsWith('--max-semi-space-size='));
  if (flag === undefined) throw new Error('WORKER_NODE_FLAGS sets no --max-semi-space-size');
  return Number(flag.split('=')[1]);
}

describe("the worker's node flags", () => {
  it('are accepted by this node and bound the young generation, which grows past that bound without them', () => {
    const bound = 2 * semiSpaceMiB(); // both semi-spaces
    const withFlags = newSpaceMaxMiB(WORKER_NODE_FLAGS);
    const withDefaults = newSpaceMaxMiB([]);
    expect(withFlags).toBeGreaterThan(0);
    expect(withFlags).toBeLessThanOrEqual(bound);
    // The control: the same load under node's defaults goes beyond the bound, so the check above can fail.
    expect(withDefaults).toBeGreaterThan(bound);
  });

  it('npm run worker passes exactly these flags', () => {
    const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(manifest.scripts.worker).toBe(`exec node ${WORKER_NODE_FLAGS.join(' ')} --import tsx src/cli/worker.ts`);
  });

  it('the fleet starts processes with them by default, and with none when told so', async () => {
    const root = join(PROJECT_ROOT, '.runs', 'test-workers');
    mkdirSync(root, { recursive: true });
    const dir = mkdtempSync(join(root, 'runtime-flags-'));
    const entry = join(dir, 'print-flags.js');
    writeFileSync(entry, 'process.stdout.write(JSON.stringify(process.execArgv) + "\\n");\n');
    const run = async (index: number, runtimeFlags?: readonly string[]): Promise<string[]> => {
      const w = new WorkerProcess(index, {
        entry,
        env: {},
        logDir: dir,
        ...(runtimeFlags === undefined ? {} : { runtimeFlags }),
      });
      w.start();
      for (let i = 0; i < 100 && w.running; i++) await new Promise((r) => setTimeout(r, 50));
      await w.stop();
      return JSON.parse(readFileSync(w.logFile, 'utf8').trim()) as string[];
    };
    expect(await run(1)).toEqual([...WORKER_NODE_FLAGS]);
    expect(await run(2, [])).toEqual([]);
  });
});
