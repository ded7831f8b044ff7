// The docs checker behind test/layout/doc-links.test.ts, kept apart so that it can run on the
// project and on a scratch tree alike: given a root and the files to look at, it reports
// relative links that do not resolve (file, folder or #anchor), docs that README.md does not
// reach by links, path-like tokens (in Markdown and in source comments) naming a file the tree
// lacks, result files a Markdown page cites (a run's stamp, `20261202T122527Z`) that the committed
// results folder lacks, and pages longer than their limit. It reads files under `root` and
// nothing else: no git, no globals.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

// Top-level folders and files whose mention is checked. Generated and run-time folders
// (dist/, .runs/, .data/, bench/results/, node_modules/) are left out on purpose: they are
// absent from a fresh checkout.
const CHECKED_ROOTS = ['src', 'harness', 'test', 'docs', 'lua', 'prisma', 'deploy', '.ci'];
const CHECKED_ROOT_FILES = ['DESIGN.md', 'README.md'];

// A token that contains one of these is a pattern or a placeholder (`prisma/migrations/*_x/`,
// `harness/{chaos,bench}/`, `deploy/<name>.yaml`, `src/…`), not the name of one file.
const PATTERN_MARKS = ['*', '<', '{', '…', '...'];

/** Where a result file that a page cites is committed (bench/results/ is scratch, git-ignored). */
export const RESULTS_DIR = 'docs/verification/results';

/** A run's stamp as the bench names its files (harness/bench/results-file.ts), with what follows. */
const RESULT_STAMP = /(?<![\w])(\d{8}T\d{6}Z)([\w-]*(?:\.(?:json|svg))?)/g;

export interface BrokenLink {
  file: string;
  target: string;
  why: 'missing file' | 'missing anchor';
}

export interface MissingReference {
  file: string;
  token: string;
}

export interface DocCheckInput {
  /** Project root; every path below is relative to it, with '/' separators. */
  root: string;
  /** Markdown files whose links and path tokens are checked. */
  markdownFiles: string[];
  /** Source files whose comments' path tokens are checked. */
  sourceFiles: string[];
  /** Files that must be reachable from `start` by relative links. */
  mustBeReachable: string[];
  start: string;
  /** Most characters a page may hold, by path. */
  pageLimits?: Readonly<Record<string, number>>;
}

export interface OversizePage {
  file: string;
  characters: number;
  limit: number;
}

export interface DocCheckReport {
  brokenLinks: BrokenLink[];
  unreachable: string[];
  missingReferences: MissingReference[];
  /** Result files cited in Markdown and absent from RESULTS_DIR. */
  missingResults: MissingReference[];
  oversizePages: OversizePage[];
}

export function checkDocs(input: DocCheckInput): DocCheckReport {
  const brokenLinks: BrokenLink[] = [];
  const missingReferences: MissingReference[] = [];
  const missingResults: MissingReference[] = [];
  for (const file of input.markdownFiles) {
    const text = readFileSync(join(input.root, file), 'utf8');
    for (const token of missingResultFiles(input.root, text)) missingResults.push({ file, token });
    for (const target of markdownLinks(text)) {
      const why = linkProblem(input.root, file, target);
      if (why !== null) brokenLinks.push({ file, target, why });
    }
    // Link targets are relative to their file and checked above; the tokens are from the root.
    for (const token of pathTokens(text.replace(/\]\([^)]*\)/g, ']'))) {
      if (!existsSync(join(input.root, token))) missingReferences.push({ file, token });
    }
  }
  for (const file of input.sourceFiles) {
    const comments = sourceComments(readFileSync(join(input.root, file), 'utf8'));
    for (const token of pathTokens(comments)) {
      if (!existsSync(join(input.root, token))) missingReferences.push({ file, token });
    }
  }
  const reached = reachableFrom(input.root, input.start);
  const unreachable = input.mustBeReachable.filter((file) => !reached.has(file));
  const oversizePages: OversizePage[] = [];
  for (const [file, limit] of Object.entries(input.pageLimits ?? {})) {
    const characters = [...readFileSync(join(input.root, file), 'utf8')].length;
    if (characters > limit) oversizePages.push({ file, characters, limit });
  }
  return { brokenLinks, unreachable, missingReferences, missingResults, oversizePages };
}

/**
 * The result files `text` cites, by their run's stamp, that RESULTS_DIR lacks: `X.json` or `X.svg`
 * must be there as named; a bare stamp `X` (or `X-ha`) needs some file of that run (`X.json`, `X-ha.json`).
 */
export function missingResultFiles(root: string, text: string): string[] {
  const dir = join(root, RESULTS_DIR);
  const kept = existsSync(dir) ? readdirSync(dir) : [];
  const missing = new Set<string>();
  for (const match of text.matchAll(RESULT_STAMP)) {
    const token = match[0];
    const found = /\.(json|svg)$/.test(token) ? kept.includes(token) : kept.some((name) => name.startsWith(token));
    if (!found) missing.add(token);
  }
  return [...missing];
}

/** Targets of inline links and images, `[text](target)` or `[text](target "title")`, outside code. */
export function markdownLinks(markdown: string): string[] {
  const targets: string[] = [];
  for (const match of withoutCode(markdown).matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    targets.push(match[1] as string);
  }
  for (const match of withoutCode(markdown).matchAll(/^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$/gm)) {
    targets.push(match[1] as string);
  }
  return targets;
}

/** GitHub's heading anchors: lowercase, punctuation but '-' and '_' dropped, spaces to '-', repeats numbered. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFencedCode(markdown).split('\n')) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading === null) continue;
    const text = (heading[1] as string).replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Repository-relative path tokens (under src/, docs/, ... or the root's design document) that name one file or folder. */
export function pathTokens(text: string): string[] {
  const roots = CHECKED_ROOTS.map((r) => r.replace('.', '\\.')).join('|');
  const files = CHECKED_ROOT_FILES.map((f) => f.replace('.', '\\.')).join('|');
  const pattern = new RegExp(`(?<![\\w@/.\\-…])(?:(?:${roots})/[\\w./*<>{}…\\-]*|(?:${files})(?![\\w\\-]))`, 'g');
  const tokens = new Set<string>();
  for (const match of text.matchAll(pattern)) {
    const token = match[0].replace(/[.,:;]+$/, '');
    if (PATTERN_MARKS.some((mark) => token.includes(mark))) continue;
    tokens.add(token);
  }
  return [...tokens];
}

/** The text of `//` and `/* *\/` comments of a TypeScript or JavaScript file, one comment a line. */
export function sourceComments(source: string): string {
  const comments: string[] = [];
  let i = 0;
  while (i < source.length) {
    const two = source.slice(i, i + 2);
    const one = source[i] as string;
    if (two === '//') {
      const end = source.indexOf('\n', i);
      const stop = end === -1 ? source.length : end;
      comments.push(source.slice(i + 2, stop));
      i = stop;
    } else if (two === '/*') {
      const end = source.indexOf('*/', i + 2);
      const stop = end === -1 ? source.length : end;
      comments.push(source.slice(i + 2, stop));
      i = stop + 2;
    } else if (one === "'" || one === '"' || one === '`') {
      i = endOfString(source, i);
    } else {
      i += 1;
    }
  }
  return comments.join('\n');
}

function endOfString(source: string, start: number): number {
  const quote = source[start];
  let i = start + 1;
  while (i < source.length && source[i] !== quote) {
    if (source[i] === '\\') i += 1;
    if (quote !== '`' && source[i] === '\n') break;
    i += 1;
  }
  return i + 1;
}

function linkProblem(root: string, file: string, target: string): BrokenLink['why'] | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // https:, mailto:: not ours to check
  const [pathPart, anchor] = splitAnchor(target);
  const resolved = pathPart === '' ? file : posix.normalize(posix.join(posix.dirname(file), decodeURI(pathPart)));
  const absolute = join(root, resolved);
  if (resolved.startsWith('..') || !existsSync(absolute)) return 'missing file';
  if (anchor === undefined || anchor === '') return null;
  if (!resolved.endsWith('.md') || statSync(absolute).isDirectory()) return 'missing anchor';
  return headingAnchors(readFileSync(absolute, 'utf8')).has(anchor.toLowerCase()) ? null : 'missing anchor';
}

function splitAnchor(target: string): [string, string | undefined] {
  const hash = target.indexOf('#');
  return hash === -1 ? [target, undefined] : [target.slice(0, hash), target.slice(hash + 1)];
}

/** Every file reached from `start` by relative links, through Markdown files (a folder counts as its README.md). */
function reachableFrom(root: string, start: string): Set<string> {
  const reached = new Set<string>();
  const pending = [start];
  while (pending.length > 0) {
    const file = pending.pop() as string;
    if (reached.has(file) || !existsSync(join(root, file))) continue;
    reached.add(file);
    if (!file.endsWith('.md')) continue;
    for (const target of markdownLinks(readFileSync(join(root, file), 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const [pathPart] = splitAnchor(target);
      if (pathPart === '') continue;
      let next = posix.normalize(posix.join(posix.dirname(file), decodeURI(pathPart))).replace(/\/$/, '');
      const absolute = join(root, next);
      if (existsSync(absolute) && statSync(absolute).isDirectory()) {
        reached.add(next);
        next = posix.join(next, 'README.md');
      }
      pending.push(next);
    }
  }
  return reached;
}

function withoutFencedCode(markdown: string): string {
  return markdown.replace(/^\s{0,3}(```|~~~)[^\n]*\n[\s\S]*?^\s{0,3}\1[^\n]*$/gm, '');
}

function withoutCode(markdown: string): string {
  return withoutFencedCode(markdown).replace(/`[^`\n]*`/g, '');
}
