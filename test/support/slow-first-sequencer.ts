// The order the suite's files start in, within each group of vitest.config.ts: the files that
// run longest first, then the rest in Vitest's own order. Files run in parallel, so a long file
// started last would leave the suite waiting on it alone at the end; started first, the short
// files fill in beside it. A fresh clone has no timing cache for Vitest to sort by, hence this
// list: the slowest files of measured runs (test/layout/slow-files.test.ts keeps each entry an
// existing file).
import { BaseSequencer, type TestSpecification } from 'vitest/node';

export const SLOW_FILES = [
  'test/harness/chaos/chaos-pg-ha.test.ts',
  'test/harness/services/local-pg-formation.test.ts',
  'test/harness/bench/bench.test.ts',
  'test/harness/chaos/negative-controls.test.ts',
  'test/cli/cli-errors.test.ts',
  'test/ops/worker-endpoints.test.ts',
  'test/harness/chaos/chaos-cluster.test.ts',
  'test/harness/chaos/chaos-run.test.ts',
  'test/queue/transfer-worker.test.ts',
  'test/security/credentials-in-logs.test.ts',
  'test/ops/graceful-shutdown.test.ts',
  'test/queue/pgbouncer.test.ts',
];

function rank(spec: TestSpecification): number {
  const found = SLOW_FILES.findIndex((file) => spec.moduleId.endsWith(`/${file}`));
  return found === -1 ? SLOW_FILES.length : found;
}

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    return sorted
      .map((spec, index) => ({ spec, index, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.index - b.index)
      .map(({ spec }) => spec);
  }
}
