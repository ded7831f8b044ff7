// The bundles that the harnesses and the tests start instead of tsx (harness/fleet/source-bundle.ts):
// a bundle runs what its sources say, is reused while they are unchanged, and is built again as
// soon as one of them changes, so no process ever runs code older than the sources.
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bundledEntry, SOURCE_BUNDLE_DIR } from '../../../harness/fleet/source-bundle.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';

const dir = join(PROJECT_ROOT, '.runs', `bundle-test-${process.pid}`);
const entry = join(dir, 'entry.ts');
const dependency = join(dir, 'answer.ts');

/** Writes a source dated `ageS` seconds ago: a bundle takes a stamp only of files older than its build. */
function writeSource(path: string, text: string, ageS: number): void {
  writeFileSync(path, text);
  const at = Date.now() / 1000 - ageS;
  utimesSync(path, at, at);
}

function runBundle(bundle: string): string {
  const run = spawnSync(process.execPath, [bundle], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return run.stdout.trim();
}

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(join(SOURCE_BUNDLE_DIR, relative(PROJECT_ROOT, dir)), { recursive: true, force: true });
});

describe('a TypeScript entry run as the bundle of its sources', () => {
  it('runs the sources as they are, reuses an unchanged bundle and rebuilds a stale one', () => {
    mkdirSync(dir, { recursive: true });
    writeSource(dependency, 'export const answer: number = 41;\n', 120);
    writeSource(entry, "import { answer } from './answer.ts';\nconsole.log(String(answer + 1));\n", 120);

    const bundle = bundledEntry(entry);
    expect(bundle).toBe(join(SOURCE_BUNDLE_DIR, relative(PROJECT_ROOT, dir), 'entry.mjs'));
    expect(runBundle(bundle)).toBe('42');

    // Nothing changed: the same file, not written again.
    const builtAt = statSync(bundle).mtimeMs;
    expect(bundledEntry(entry)).toBe(bundle);
    expect(statSync(bundle).mtimeMs).toBe(builtAt);

    // A file the entry imports changed (same size, another time): the next start runs the new code.
    writeSource(dependency, 'export const answer: number = 99;\n', 60);
    expect(runBundle(bundledEntry(entry))).toBe('100');
  });

  it('refuses a file that is not TypeScript of this project', () => {
    expect(() => bundledEntry(join(PROJECT_ROOT, 'package.json'))).toThrow(/not a TypeScript file of this project/);
    expect(() => bundledEntry('/tmp/elsewhere.ts')).toThrow(/not a TypeScript file of this project/);
  });
});
