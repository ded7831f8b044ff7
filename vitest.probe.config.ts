import { defineConfig } from 'vitest/config';
export default defineConfig({
  test: {
    root: '/work/main',
    pool: 'forks',
    include: ['test/**/*.test.ts'],
    exclude: ['test/compiled/**', 'test/harness/chaos/chaos-*.test.ts'],
    testTimeout: 8000,
    hookTimeout: 8000,
    env: { DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none', REDIS_URL: 'redis://127.0.0.1:1', REDIS_HOST: '127.0.0.1', REDIS_PORT: '1', PGPORT: '1' },
  },
});
