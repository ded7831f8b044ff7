// Test files run in parallel, each in its own process with its own database and key prefix
// (see test/support). The global setup makes the services reachable first, exactly as
// `npm run services` does for the demo.
//
// Three projects:
// - `unit`: the fast tier (vitest.unit.config.ts), with Redis and PostgreSQL out of reach, as
//   `npm run test:unit` runs it: so a test of that tier that starts to need a server fails here;
// - `sources`: every other test, workers from the TypeScript sources;
// - `compiled`: `npm run build`, the Dockerfile's final stage replayed into
//   .runs/compiled-image/app (test/compiled/compiled-image-setup.ts), then the pipeline tests again with
//   every worker process started from that compiled dist/cli/worker.js with plain node, plus the
//   checks of that production install. `npx vitest run --project sources` skips it.
import { defineConfig } from 'vitest/config';
import { COMPILED_WORKER_ENTRY } from './test/compiled/image-dir.ts';
import { SlowFirstSequencer } from './test/support/slow-first-sequencer.ts';
import { NO_SERVICES, UNIT_TESTS } from './vitest.unit.config.ts';

/**
 * Files at once. Most of a file's time is spent waiting (on child processes, on servers, on the
 * timers of a fault), so more files than cores keep both cores busy; TEST_FILES_AT_ONCE overrides.
 */
const FILES_AT_ONCE = Number(process.env.TEST_FILES_AT_ONCE ?? 3);

export default defineConfig({
  test: {
    pool: 'forks',
    maxWorkers: FILES_AT_ONCE,
    sequence: { sequencer: SlowFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: UNIT_TESTS, env: NO_SERVICES },
      },
      {
        extends: true,
        test: {
          name: 'sources',
          include: ['test/**/*.test.ts'],
          exclude: ['test/compiled/**', ...UNIT_TESTS],
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
        },
      },
    ],
  },
});
