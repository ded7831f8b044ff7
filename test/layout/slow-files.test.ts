// The suite starts its slowest files first (test/support/slow-first-sequencer.ts): each entry of
// that list must be a test file the suite runs, or the order would quietly fall back to Vitest's.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { SLOW_FILES } from '../support/slow-first-sequencer.ts';

describe('the slowest files, started first', () => {
  it('are test files of the project, each named once', () => {
    expect(SLOW_FILES.length).toBeGreaterThan(0);
    expect(new Set(SLOW_FILES).size).toBe(SLOW_FILES.length);
    for (const file of SLOW_FILES) {
      expect(file, file).toMatch(/^test\/.*\.test\.ts$/);
      expect(existsSync(join(PROJECT_ROOT, file)), file).toBe(true);
    }
  });
});
