// Test files run in parallel, each in its own process with its own database and key prefix
// (see test/support). The global setup makes the services reachable first, exactly as
// `npm run services` does for the demo.
//
// Two projects:
// - `sources`: every test, workers from the TypeScript sources;
// - `compiled`: `npm run build`, the Dockerfile's final stage replayed into
//   .runs/compiled-image/app (test/compiled/compiled-image-setup.ts), then the pipeline tests again with
//   every worker process started from that compiled dist/cli/worker.js with plain node, plus the
//   checks of that production install. `npx vitest run --project sources` skips it.
import { defineConfig } from 'vitest/config';
import { COMPILED_WORKER_ENTRY } from './test/compiled/image-dir.ts';

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'sources',
          include: ['test/**/*.test.ts'],
          exclude: ['test/compiled/**'],
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
