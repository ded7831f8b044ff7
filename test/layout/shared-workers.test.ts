// Most test files share their Vitest worker process with the files run before them in it
// (isolate: false, vitest.config.ts): what one of them changes for the whole process would reach
// the next. This check reads every such file and refuses the changes that would: an environment
// variable written, a module mocked or a global stubbed, OpenTelemetry's globals set, a listener
// put on `process` that the file never takes off. A file that needs one of them goes to
// OWN_PROCESS_FILES, where each file has a process of its own.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { OWN_PROCESS_FILES } from '../../vitest.config.ts';
import { UNIT_TESTS } from '../../vitest.unit.config.ts';

interface Rule {
  readonly what: string;
  readonly pattern: RegExp;
}

const PROCESS_WIDE: readonly Rule[] = [
  { what: 'writes an environment variable', pattern: /process\.env(\.\w+|\[[^\]]+\])\s*(=(?!=)|\+=|\?\?=)/ },
  { what: 'deletes an environment variable', pattern: /delete\s+process\.env/ },
  { what: 'replaces process.env', pattern: /process\.env\s*=(?!=)/ },
  { what: 'mocks a module or stubs a global', pattern: /vi\.(mock|doMock|stubEnv|stubGlobal)\(/ },
  { what: 'writes a global', pattern: /globalThis\.\w+\s*=(?!=)/ },
  {
    what: 'starts tracing in-process',
    pattern: /startTracing\(|setGlobal(TracerProvider|ContextManager|Propagator)\(/,
  },
  { what: 'changes the working folder or umask', pattern: /process\.(chdir|umask)\(/ },
];

const LISTENER = /process\.(on|once|addListener|prependListener)\(\s*['"]([\w-]+)['"]/g;
const REMOVAL = /process\.(off|removeListener|removeAllListeners)\(\s*['"]([\w-]+)['"]/g;

/** What in `source` would outlive its file in a shared worker process; empty when nothing. */
function processWideChanges(source: string): string[] {
  const found = PROCESS_WIDE.filter((r) => r.pattern.test(source)).map((r) => r.what);
  const removed = new Set([...source.matchAll(REMOVAL)].map((m) => m[2]));
  for (const m of source.matchAll(LISTENER)) {
    if (!removed.has(m[2])) found.push(`leaves a '${m[2]}' listener on process`);
  }
  return found;
}

const SELF = 'test/layout/shared-workers.test.ts';

/** Every test file under test/, by its path from the project's root. */
function testFiles(): string[] {
  return (readdirSync(join(PROJECT_ROOT, 'test'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => join('test', f));
}

describe('test files sharing a worker process', () => {
  it('change nothing for the whole process', () => {
    // The unit tier shares its processes too (its project in vitest.config.ts); this file is left
    // out, its examples below being the patterns themselves.
    const shared = testFiles().filter((f) => !OWN_PROCESS_FILES.includes(f) && f !== SELF);
    expect(shared.length).toBeGreaterThan(100);
    const offenders = shared
      .map((file) => ({ file, changes: processWideChanges(readFileSync(join(PROJECT_ROOT, file), 'utf8')) }))
      .filter((o) => o.changes.length > 0);
    expect(offenders).toEqual([]);
  });

  it('the check sees each kind of change, and a listener taken off again is none', () => {
    expect(processWideChanges("process.env.QUEUE_NAME = 'x';")).toEqual(['writes an environment variable']);
    expect(processWideChanges("process.env['A'] ??= 'x';")).toEqual(['writes an environment variable']);
    expect(processWideChanges('if (process.env.A === "x") {}')).toEqual([]);
    expect(processWideChanges('delete process.env.A;')).toEqual(['deletes an environment variable']);
    expect(processWideChanges("vi.mock('../x.ts');")).toEqual(['mocks a module or stubs a global']);
    expect(processWideChanges('globalThis.fetch = f;')).toEqual(['writes a global']);
    expect(processWideChanges("await startTracing('a', env);")).toEqual(['starts tracing in-process']);
    expect(processWideChanges('process.chdir(dir);')).toEqual(['changes the working folder or umask']);
    expect(processWideChanges("process.on('uncaughtException', f);")).toEqual([
      "leaves a 'uncaughtException' listener on process",
    ]);
    expect(processWideChanges("process.on('uncaughtException', f); process.off('uncaughtException', f);")).toEqual([]);
  });

  it('the files kept apart each exist and are not unit tests', () => {
    for (const file of OWN_PROCESS_FILES) {
      expect(testFiles(), file).toContain(file);
      expect(UNIT_TESTS, file).not.toContain(file);
    }
  });
});
