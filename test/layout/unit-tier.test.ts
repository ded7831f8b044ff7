// The fast tier (`npm run test:unit`, vitest.unit.config.ts) runs with Redis and PostgreSQL out
// of reach. `npm test` runs those files once, in its `unit` project, with the same unreachable
// servers, so a test listed there that needs a service fails the suite itself; this test keeps
// the two configurations saying the same thing. Every listed file exists and no file runs twice.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import suite from '../../vitest.config.ts';
import unitTier, { NO_SERVICES, UNIT_TESTS } from '../../vitest.unit.config.ts';

interface ProjectTest {
  name?: string;
  include?: string[];
  exclude?: string[];
  env?: Record<string, string>;
}

function project(name: string): ProjectTest {
  const projects = (suite.test?.projects ?? []) as { test?: ProjectTest }[];
  const found = projects.find((p) => p.test?.name === name)?.test;
  if (found === undefined) throw new Error(`vitest.config.ts has no project ${name}`);
  return found;
}

describe('the fast tier', () => {
  it('lists files that exist', () => {
    expect(UNIT_TESTS.length).toBeGreaterThan(0);
    for (const file of UNIT_TESTS) expect(existsSync(join(PROJECT_ROOT, file)), file).toBe(true);
  });

  it('runs in npm test exactly as npm run test:unit runs it: those files, no service reachable', () => {
    const unit = project('unit');
    expect(unit.include).toEqual(UNIT_TESTS);
    expect(unit.env).toEqual(NO_SERVICES);
    expect(unitTier.test?.include).toEqual(UNIT_TESTS);
    expect(unitTier.test?.env).toEqual(NO_SERVICES);
    for (const url of Object.values(NO_SERVICES)) expect(new URL(url).hostname).toMatch(/\.invalid$/);
    // The other project leaves them to it: each runs once, and never with the servers in reach.
    expect(project('sources').exclude).toEqual(expect.arrayContaining(UNIT_TESTS));
  });
});
