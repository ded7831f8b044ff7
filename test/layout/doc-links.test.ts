// The docs hold together: every relative link in a Markdown file resolves (file, folder and
// #anchor), every doc is reachable from README.md, README.md fits a few screens, the
// verification pages keep within their limits, no Markdown file or source comment names a file
// the repository lacks, and no page cites a result file that is not committed. The checker
// (test/support/doc-check.ts) is run on a scratch tree first, to show it reports each fault.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { checkDocs, headingAnchors, pathTokens, RESULTS_DIR } from '../support/doc-check.ts';

const README_CHARACTERS_MAX = 12_000;

/**
 * The pages a newcomer reads to understand, run and trust the system; the detail lives in the
 * concepts and reference pages, and the diaries beside the results.
 */
const PAGE_LIMITS: Readonly<Record<string, number>> = {
  'DESIGN.md': 20_000,
  'docs/operating/runbook.md': 20_000,
  'docs/verification/performance.md': 15_000,
  'docs/verification/chaos.md': 25_000,
  'docs/verification/bench.md': 25_000,
};

/** Tracked files and new untracked ones (not ignored) matching `patterns`. */
function projectFiles(...patterns: string[]): string[] {
  const listed = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '--', ...patterns], {
    cwd: PROJECT_ROOT,
    encoding: 'utf8',
  });
  return listed
    .split('\n')
    .filter((file) => file !== '' && !file.split('/').includes('node_modules'))
    .filter((file) => {
      try {
        readFileSync(join(PROJECT_ROOT, file)); // a file deleted in the work tree is still listed as cached
        return true;
      } catch {
        return false;
      }
    });
}

function projectInput() {
  const docs = projectFiles('docs');
  const harnessReadmes = projectFiles('harness').filter((file) => file.endsWith('/README.md'));
  return {
    root: PROJECT_ROOT,
    markdownFiles: projectFiles('*.md'),
    sourceFiles: projectFiles('src', 'harness', 'test', 'examples').filter((file) => /\.(ts|cjs|mjs|js)$/.test(file)),
    mustBeReachable: [
      ...docs,
      ...harnessReadmes,
      ...projectFiles('examples').filter((f) => f.endsWith('/README.md')),
      'DESIGN.md',
    ],
    start: 'README.md',
    pageLimits: PAGE_LIMITS,
  };
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

describe('the docs checker', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ft-doc-links-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('slugs headings as GitHub does', () => {
    const anchors = headingAnchors(
      '# Redis Cluster (`--redis cluster`)\n## What the checker proves\n## Tests\n## Tests\n',
    );
    expect([...anchors]).toEqual(['redis-cluster---redis-cluster', 'what-the-checker-proves', 'tests', 'tests-1']);
  });

  it('takes paths, not patterns or generated folders', () => {
    const tokens = pathTokens(
      'see src/lock/watchdog.ts, `docs/a.md`; prisma/migrations/*_x/migration.sql, deploy/<name>.yaml, ' +
        'dist/cli/worker.js, .runs/x, bench/results/y.json, @prisma/client, dist-harness/src/z.ts and DESIGN.md.',
    );
    expect(tokens).toEqual(['src/lock/watchdog.ts', 'docs/a.md', 'DESIGN.md']);
  });

  it('reports a broken link, an unreachable doc and a missing referenced file (negative control)', () => {
    writeTree(scratch, {
      'README.md': '# Top\n\nSee [the guide](docs/guide.md#setting-up) and [nothing](docs/gone.md).\n',
      'docs/guide.md': '# Guide\n\n## Setting up\n\nRun [back](../README.md#top); the code is in `src/missing.ts`.\n',
      'docs/orphan.md': '# Nobody links here\n',
      'src/main.ts':
        '// The rules are in docs/guide.md and docs/rules.md.\nexport const x = "docs/not-a-comment.md";\n',
    });
    const report = checkDocs({
      root: scratch,
      markdownFiles: ['README.md', 'docs/guide.md', 'docs/orphan.md'],
      sourceFiles: ['src/main.ts'],
      mustBeReachable: ['docs/guide.md', 'docs/orphan.md'],
      start: 'README.md',
    });
    expect(report.brokenLinks).toEqual([{ file: 'README.md', target: 'docs/gone.md', why: 'missing file' }]);
    expect(report.unreachable).toEqual(['docs/orphan.md']);
    expect(report.missingReferences).toEqual([
      { file: 'docs/guide.md', token: 'src/missing.ts' },
      { file: 'src/main.ts', token: 'docs/rules.md' },
    ]);
  });

  it('reports a cited result file that is not committed, and a page over its limit (negative control)', () => {
    writeTree(scratch, {
      'README.md': '# Top\n\nSee [results](docs/results.md).\n',
      'docs/results.md':
        '# Results\n\nRun `20261202T122527Z` ([json](verification/results/20261202T122527Z.json)), ' +
        'run 20261201T182209Z, `20261202T132515Z-ha.json` and 20261130T121238Z.svg.\n',
      [`${RESULTS_DIR}/20261202T122527Z.json`]: '{}\n',
      [`${RESULTS_DIR}/20261202T132515Z-ha.json`]: '{}\n',
    });
    const report = checkDocs({
      root: scratch,
      markdownFiles: ['docs/results.md'],
      sourceFiles: [],
      mustBeReachable: [],
      start: 'README.md',
      pageLimits: { 'README.md': 20, 'docs/results.md': 10_000 },
    });
    expect(report.missingResults).toEqual([
      { file: 'docs/results.md', token: '20261201T182209Z' },
      { file: 'docs/results.md', token: '20261130T121238Z.svg' },
    ]);
    expect(report.oversizePages).toEqual([{ file: 'README.md', characters: 39, limit: 20 }]);
  });

  it('reports an anchor that names no heading of its target', () => {
    writeTree(scratch, { 'README.md': '# Top\n\n[here](docs/guide.md#tearing-down) [self](#top) [x](#nope)\n' });
    const report = checkDocs({
      root: scratch,
      markdownFiles: ['README.md'],
      sourceFiles: [],
      mustBeReachable: [],
      start: 'README.md',
    });
    expect(report.brokenLinks).toEqual([
      { file: 'README.md', target: 'docs/guide.md#tearing-down', why: 'missing anchor' },
      { file: 'README.md', target: '#nope', why: 'missing anchor' },
    ]);
  });
});

describe('the project docs', () => {
  const report = checkDocs(projectInput());

  it('have no broken relative link', () => {
    expect(report.brokenLinks).toEqual([]);
  });

  it('are all reachable from README.md', () => {
    expect(report.unreachable).toEqual([]);
  });

  it('name no file the repository lacks, in Markdown or in source comments', () => {
    expect(report.missingReferences).toEqual([]);
  });

  it('cite only result files that are committed', () => {
    expect(report.missingResults).toEqual([]);
  });

  it('keep the design, the runbook and the verification pages within their limits', () => {
    expect(report.oversizePages).toEqual([]);
  });

  it('name every npm script in README.md (a script added without a word there fails)', () => {
    const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
    const scripts = Object.keys(JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')).scripts);
    const unnamed = (names: string[]) => names.filter((name) => !readme.includes(`\`${name}\``));
    expect(unnamed(['bench:not-a-script'])).toEqual(['bench:not-a-script']);
    expect(scripts.length).toBeGreaterThan(30);
    expect(unnamed(scripts)).toEqual([]);
  });

  it(`keep README.md within ${README_CHARACTERS_MAX} characters`, () => {
    const characters = [...readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8')].length;
    expect(characters).toBeLessThanOrEqual(README_CHARACTERS_MAX);
  });
});
