// `npm run bench:explain` as a user runs it, on a small batch: it prints one line per statement
// of the batched decision with PostgreSQL's own timings, and drops its database afterwards.
import { describe, expect, it } from 'vitest';
import { describeRun, runCommand } from '../../support/cli-process.ts';
import { databaseExists } from '../../support/test-db.ts';

const TIMEOUT_MS = 120_000;

describe('npm run bench:explain', () => {
  it(
    'explains one batch statement by statement and leaves no database behind',
    async () => {
      const result = await runCommand(
        'npm',
        ['run', '--silent', 'bench:explain', '--', '--batch', '4', '--wallets', '50'],
        {},
        TIMEOUT_MS,
      );
      const context = describeRun(result);
      expect(result.code, context).toBe(0);
      expect(result.stdout, context).toMatch(
        /^# apply_transfers\(\) with 4 transfers over 50 wallets: 4 answers, [\d.]+ ms round trip/m,
      );
      expect(result.stdout).toContain('| ms | calls | statement |');
      // The batch's own statements, seen by auto_explain inside the function: the ledger insert among them.
      expect(result.stdout).toMatch(/^\| [\d.]+ \| \d+ \| `INSERT INTO ledger_entries/m);
      const database = /database (bench_explain_\w+)/.exec(result.stderr)?.[1];
      expect(database, context).toBeDefined();
      expect(await databaseExists(database ?? ''), `${database} left behind`).toBe(false);
    },
    TIMEOUT_MS + 10_000,
  );
});
