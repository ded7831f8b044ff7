// One name, one file: no two source files of the project (src/ and test/, harnesses included)
// share a file name, so a name in a log, a stack trace or a doc points at one place.
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

function sourceFiles(folder: string): string[] {
  return (readdirSync(join(PROJECT_ROOT, folder), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.ts') && !f.startsWith('generated'))
    .map((f) => join(folder, f));
}

describe('file names', () => {
  it('are unique across src/ and test/', () => {
    const byName = new Map<string, string[]>();
    for (const file of [...sourceFiles('src'), ...sourceFiles('test')]) {
      byName.set(basename(file), [...(byName.get(basename(file)) ?? []), file]);
    }
    const shared = [...byName.values()].filter((files) => files.length > 1);
    expect(byName.size).toBeGreaterThan(100);
    expect(shared).toEqual([]);
  });
});
