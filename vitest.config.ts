// Test files run in parallel, each in its own process with its own database and key prefix
// (see test/support). The global setup makes the services reachable first, exactly as
// `npm run services` does for the demo.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    teardownTimeout: 30_000,
  },
});
