// `npm run bench:call-cost` as a user runs it, on small sizes: it measures the three variants,
// prints one row each, refuses bad flags with a clear message, and drops its database. No figure
// is asserted beyond being measured (positive): a timed test on a shared machine means nothing.
import { describe, expect, it } from 'vitest';
import { describeRun, runCommand } from '../../support/cli-process.ts';
import { databaseExists } from '../../support/test-db.ts';

const TIMEOUT_MS = 120_000;

describe('npm run bench:call-cost', () => {
  it(
    'prints the client CPU per transfer of each variant and leaves no database behind',
    async () => {
      const result = await runCommand(
        'npm',
        ['run', '--silent', 'bench:call-cost', '--', '--calls', '200', '--rounds', '1'],
        {},
        TIMEOUT_MS,
      );
      const context = describeRun(result);
      expect(result.code, context).toBe(0);
      for (const variant of ['prisma-1', 'pg-1', 'prisma-64']) {
        const row = new RegExp(`^\\| ${variant} \\| (\\d+) \\| (\\d+) \\|$`, 'm').exec(result.stdout);
        expect(row, `${variant}\n${context}`).not.toBeNull();
        expect(Number(row?.[1]), variant).toBeGreaterThan(0);
        expect(Number(row?.[2]), variant).toBeGreaterThan(0);
      }
      const database = /database (bench_callcost_\w+)/.exec(result.stderr)?.[1];
      expect(database, context).toBeDefined();
      expect(await databaseExists(database ?? ''), `${database} left behind`).toBe(false);
    },
    TIMEOUT_MS + 10_000,
  );

  it('refuses an out-of-range flag with the allowed range, before touching the database', async () => {
    const result = await runCommand(
      'npm',
      ['run', '--silent', 'bench:call-cost', '--', '--calls', '5'],
      {},
      TIMEOUT_MS,
    );
    expect(result.code, describeRun(result)).not.toBe(0);
    expect(result.stderr).toContain('--calls must be from 100 to 100000');
    expect(result.stderr).not.toContain('database bench_callcost_');
  });
});
