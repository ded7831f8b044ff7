// Test files run in parallel, each with its own database and key prefix (see test/support), in
// Vitest worker processes that most files share one after the other (OWN_PROCESS_FILES below).
// The global setup makes the services reachable first, exactly as `npm run services` does for the
// demo.
//
// Five projects, in two groups. First, alone:
// - `harness`: the runs of whole fleets (HARNESS_RUNS below), one at a time.
// Then, together:
// - `unit`: the fast tier (vitest.unit.config.ts), with Redis and PostgreSQL out of reach, as
//   `npm run test:unit` runs it: so a test of that tier that starts to need a server fails here;
// - `sources`: every other test, workers from the TypeScript sources, several files one after
//   the other in each Vitest worker process (isolate: false);
// - `traced`: the files that start the tracing SDK in their own process, one process each;
// - `compiled`: `npm run build`, the Dockerfile's final stage replayed into
//   .runs/compiled-image/app (test/compiled/compiled-image-setup.ts), then the pipeline tests again with
//   every worker process started from that compiled dist/cli/worker.js with plain node, plus the
//   checks of that production install. `npx vitest run --project sources` skips it.
import { defineConfig } from 'vitest/config';
import { COMPILED_WORKER_ENTRY } from './test/compiled/image-dir.ts';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer.ts';
import { NO_SERVICES, UNIT_TESTS } from './vitest.unit.config.ts';

/**
 * The harness runs: each drives whole fleets (workers, private servers, a chaos run or the
 * bench) and keeps a core busy or more. Two at once on 2 cores took each several times as long
 * as alone and made the HA run miss its bounds, so they run one after the other, first, in a
 * group of their own.
 */
export const HARNESS_RUNS = [
  'test/harness/chaos/chaos-pg-ha.test.ts',
  'test/harness/bench/bench.test.ts',
  'test/harness/chaos/negative-controls.test.ts',
  'test/cli/cli-errors.test.ts',
  'test/harness/chaos/chaos-cluster.test.ts',
  'test/harness/chaos/chaos-run.test.ts',
];
const HARNESS_RUNS_AT_ONCE = 1;

/**
 * Then every other file, more at once than there are cores: some of their time is spent waiting
 * (on a worker process, a server, a fault's timer), though on 2 cores the suite is mostly bound by
 * CPU (`npm run test:cpu`). Two at once was measured slower than four, in a fresh clone.
 * TEST_FILES_AT_ONCE overrides.
 */
const FILES_AT_ONCE = Number(process.env.TEST_FILES_AT_ONCE ?? 4);

/**
 * The files that start OpenTelemetry in their own process: its global tracer provider, context
 * manager and propagator outlive the file, so each of these gets a fresh process (isolate: true).
 * Every other file of `sources` and `compiled` runs in a Vitest worker that ran other files before
 * it, with their modules already loaded (isolate: false): loading Prisma's client, BullMQ,
 * ioredis, pino and the product once per worker instead of once per file halved the CPU of the
 * short database files (docs/verification/testing.md, "Where the time goes"). What such a file
 * changes for the whole process (an environment variable, a global, a listener left on
 * `process`) would reach the files after it: test/layout/shared-workers.test.ts refuses it.
 */
export const OWN_PROCESS_FILES = [
  'test/tracing/transfer-trace.test.ts',
  'test/tracing/tracing-env.test.ts',
  'test/ledger/decision-batcher-trace.test.ts',
  'test/intake/intake-trace-context.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: FILES_AT_ONCE,
    sequence: { sequencer: SlowFirstSequencer, groupOrder: 2 },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'harness',
          include: HARNESS_RUNS,
          globalSetup: ['test/global-setup.ts'],
          maxWorkers: HARNESS_RUNS_AT_ONCE,
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        // Pure tests: one module graph per worker, not one per file.
        test: { name: 'unit', include: UNIT_TESTS, env: NO_SERVICES, isolate: false },
      },
      {
        extends: true,
        test: {
          name: 'sources',
          include: ['test/**/*.test.ts'],
          exclude: ['test/compiled/**', ...UNIT_TESTS, ...HARNESS_RUNS, ...OWN_PROCESS_FILES],
          globalSetup: ['test/global-setup.ts'],
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'traced',
          include: OWN_PROCESS_FILES,
          globalSetup: ['test/global-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'compiled',
          include: [
            'test/queue/transfer-worker.test.ts',
            'test/queue/hostile-messages.test.ts',
            'test/compiled/**/*.test.ts',
          ],
          globalSetup: ['test/global-setup.ts', 'test/compiled/compiled-image-setup.ts'],
          env: { WORKER_ENTRY: COMPILED_WORKER_ENTRY },
          isolate: false,
        },
      },
    ],
  },
});
