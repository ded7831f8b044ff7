// Commit subjects fit one line of `git log --oneline`: at most 72 characters, from the first
// commit that moved the harnesses out of src/ on (older history is left as it landed).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

const SUBJECT_MAX = 72;
/** The first commit held to the rule: "Layout: the harnesses move out of src/ to harness/". */
const FROM_SUBJECT = 'Layout: the harnesses move out of src/ to harness/';

/** Subjects longer than `max`, newest first, among `subjects` (newest first) up to and including `from`. */
function tooLong(subjects: readonly string[], from: string, max = SUBJECT_MAX): string[] {
  const end = subjects.indexOf(from);
  if (end < 0) throw new Error(`no commit "${from}" in the history`);
  return subjects.slice(0, end + 1).filter((subject) => subject.length > max);
}

describe('commit subjects', () => {
  it('flag a subject over the limit', () => {
    expect(tooLong(['x'.repeat(73), 'short', FROM_SUBJECT, 'y'.repeat(100)], FROM_SUBJECT)).toEqual(['x'.repeat(73)]);
  });

  it.skipIf(!existsSync(join(PROJECT_ROOT, '.git')))(`are at most ${SUBJECT_MAX} characters`, () => {
    const subjects = execFileSync('git', ['log', '--format=%s'], { cwd: PROJECT_ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((line) => line !== '');
    expect(tooLong(subjects, FROM_SUBJECT)).toEqual([]);
  });
});
