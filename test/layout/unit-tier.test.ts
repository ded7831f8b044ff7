// The fast tier (`npm run test:unit`, vitest.unit.config.ts) runs as a command with Redis and
// PostgreSQL out of reach and passes: a test listed there that needs a service fails this test.
// Every listed file exists and is one the full suite runs too.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { UNIT_TESTS } from '../../vitest.unit.config.ts';
import { runCommand } from '../support/cli-process.ts';

describe('the fast tier', () => {
  it('lists files that exist', () => {
    expect(UNIT_TESTS.length).toBeGreaterThan(0);
    for (const file of UNIT_TESTS) expect(existsSync(join(PROJECT_ROOT, file)), file).toBe(true);
  });

  it('passes with no service reachable', async () => {
    const run = await runCommand('npm', ['run', '-s', 'test:unit'], {}, 240_000);
    expect(run.code, `${run.stdout.slice(-3000)}\n${run.stderr.slice(-2000)}`).toBe(0);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the colours of vitest's summary
    const plain = run.stdout.replace(/\u001b\[[0-9;]*m/g, '');
    expect(plain).toMatch(new RegExp(`Test Files +${UNIT_TESTS.length} passed`));
  }, 300_000);
});
