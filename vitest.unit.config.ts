// `npm run test:unit`: the fast tier, the tests that need no service, in seconds. Redis and
// PostgreSQL are pointed at hosts that cannot resolve (the .invalid domain), so a test listed here
// that starts to need a server fails here instead of quietly waiting for one. `npm test` runs
// these too, with everything else (vitest.config.ts), and test/layout/unit-tier.test.ts runs this
// tier as a command to keep the list honest.
import { defineConfig } from 'vitest/config';

export const UNIT_TESTS = [
  'test/config/config-view.test.ts',
  'test/config/settings.test.ts',
  'test/deploy/alerts.test.ts',
  'test/deploy/compose.test.ts',
  'test/deploy/dockerfile.test.ts',
  'test/deploy/worker-runtime.test.ts',
  'test/harness/bench/bench-options.test.ts',
  'test/harness/bench/paired-blocks.test.ts',
  'test/harness/bench/ratios.test.ts',
  'test/harness/chaos/balance-checks.test.ts',
  'test/harness/chaos/fault-load.test.ts',
  'test/harness/chaos/fault-proxy.test.ts',
  'test/harness/chaos/intake-invariants.test.ts',
  'test/harness/chaos/operation-checks.test.ts',
  'test/harness/chaos/payment-checks.test.ts',
  'test/harness/chaos/pg-outage.test.ts',
  'test/harness/chaos/queue-checks.test.ts',
  'test/harness/chaos/schedule.test.ts',
  'test/harness/docs/reference-docs.test.ts',
  'test/harness/fleet/source-bundle.test.ts',
  'test/harness/suite/suite-cpu.test.ts',
  'test/layout/commit-subjects.test.ts',
  'test/layout/doc-links.test.ts',
  'test/layout/file-names.test.ts',
  'test/layout/function-lengths.test.ts',
  'test/layout/import-rule.test.ts',
  'test/layout/long-functions.test.ts',
  'test/layout/prerequisites.test.ts',
  'test/layout/shared-workers.test.ts',
  'test/layout/slow-files.test.ts',
  'test/layout/unit-tier.test.ts',
  'test/ledger/decision-batcher.test.ts',
  'test/ledger/operation-request.test.ts',
  'test/ledger/outcomes-reference.test.ts',
  'test/ledger/transfer-request.test.ts',
  'test/ledger/vocabulary.test.ts',
  'test/lock/backoff.test.ts',
  'test/lock/key-slot.test.ts',
  'test/log/redact.test.ts',
  'test/metrics/worker-metrics.test.ts',
  'test/ops/fault-hold.test.ts',
  'test/ops/process-runtime.test.ts',
  'test/queue/attempt-failure.test.ts',
  'test/queue/queue-drain.test.ts',
  'test/queue/queue-shards.test.ts',
];

/** Servers that cannot be reached: a test of this tier that starts to need one fails. */
export const NO_SERVICES = {
  DATABASE_URL: 'postgresql://postgres@no-database.invalid:5432/transfers',
  REDIS_URL: 'redis://no-redis.invalid:6379',
};

export default defineConfig({
  test: {
    pool: 'forks',
    include: UNIT_TESTS,
    testTimeout: 30_000,
    env: NO_SERVICES,
  },
});
