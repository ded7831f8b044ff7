// The TypeScript entries the harnesses and the tests start as processes (a worker, a CLI, the
// chaos command) run from an esbuild bundle of their sources, not through tsx's loader: the same
// sources, turned into JavaScript by the same esbuild tsx uses, but loaded as one file (and its
// lazily imported chunks) instead of through a loader that resolves and transforms every import
// at each start. A worker starts on about 0.9 s of CPU instead of 1.5 s (docs/verification/testing.md,
// "Where the time goes"); a suite or a chaos run starts hundreds. The packages stay external:
// node loads them from node_modules as it does for tsx. A bundle is rebuilt when any file it was
// built from changed size or time (esbuild's own list of its inputs), so an edit to a source is
// in the next process started, as with tsx. `npm run worker` and the other npm scripts still
// run through tsx.
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

/** Where the bundles are kept (git-ignored, with every run's other files). */
export const SOURCE_BUNDLE_DIR = join(PROJECT_ROOT, '.runs', 'source-bundles');

/** How far a file's modification time may lag the clock (the kernel stamps files from a coarse clock). */
const FILE_CLOCK_SLACK_MS = 50;

/** One input of a bundle as it was when the bundle was built: a change to either rebuilds it. */
type InputStamp = readonly [path: string, size: number, mtimeMs: number];

interface BundleStamp {
  readonly version: 1;
  readonly inputs: readonly InputStamp[];
}

/** The part of esbuild's API used here (a development dependency, loaded only when a bundle is built). */
interface Esbuild {
  buildSync(options: Record<string, unknown>): {
    outputFiles: readonly { path: string; text: string }[];
    metafile: { inputs: Record<string, unknown> };
  };
}

function stampOf(path: string): InputStamp | null {
  try {
    const s = statSync(path);
    return [path, s.size, s.mtimeMs];
  } catch {
    return null;
  }
}

function isFresh(stampFile: string): boolean {
  let stamp: BundleStamp;
  try {
    stamp = JSON.parse(readFileSync(stampFile, 'utf8')) as BundleStamp;
  } catch {
    return false;
  }
  if (stamp.version !== 1 || stamp.inputs.length === 0) return false;
  return stamp.inputs.every(([path, size, mtimeMs]) => {
    const now = stampOf(path);
    return now !== null && now[1] === size && now[2] === mtimeMs;
  });
}

/** Writes `content` to `path` through a file of its own and a rename: a reader sees the old file or the new one. */
function writeAtomically(path: string, content: string): void {
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(temp, content);
  try {
    renameSync(temp, path);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}

/**
 * The bundle of a TypeScript entry of this project (`src/cli/worker.ts` → `.runs/source-bundles/src/cli/worker.mjs`),
 * built first when missing or older than one of its sources. Several processes may ask at once:
 * each writes whole files and renames them into place, so none runs a half-written bundle.
 */
export function bundledEntry(entry: string): string {
  const absolute = isAbsolute(entry) ? entry : resolve(PROJECT_ROOT, entry);
  const rel = relative(PROJECT_ROOT, absolute);
  if (!rel.endsWith('.ts') || rel.startsWith('..')) {
    throw new Error(`bundledEntry: ${entry} is not a TypeScript file of this project`);
  }
  const out = join(SOURCE_BUNDLE_DIR, rel.replace(/\.ts$/, '.mjs'));
  const stampFile = `${out}.inputs.json`;
  if (isFresh(stampFile)) return out;

  mkdirSync(dirname(out), { recursive: true });
  const esbuild = createRequire(import.meta.url)('esbuild') as Esbuild;
  const startedMs = Date.now();
  // Split: a module the sources import only when needed (the tracing SDK) stays a chunk of its
  // own, loaded with its packages only then, as it is through tsx and in dist/.
  const result = esbuild.buildSync({
    entryPoints: [absolute],
    absWorkingDir: PROJECT_ROOT,
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    write: false,
    outdir: dirname(out),
    entryNames: '[name]',
    chunkNames: 'chunks/[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    metafile: true,
    logLevel: 'error',
  });
  const entryFile = result.outputFiles.find((f) => f.path === out);
  if (entryFile === undefined) throw new Error(`bundledEntry: esbuild wrote no ${relative(PROJECT_ROOT, out)}`);
  // The chunks first (named by their content), the entry that imports them last.
  for (const file of result.outputFiles) {
    if (file === entryFile) continue;
    mkdirSync(dirname(file.path), { recursive: true });
    writeAtomically(file.path, file.text);
  }
  writeAtomically(out, entryFile.text);
  const inputs = Object.keys(result.metafile.inputs)
    .map((input) => stampOf(resolve(PROJECT_ROOT, input)))
    .filter((s): s is InputStamp => s !== null);
  // A source saved while esbuild read it may be in the bundle as it was before: no stamp then,
  // and the next start builds again. File times come from a clock a few milliseconds coarse.
  if (inputs.every(([, , mtimeMs]) => mtimeMs < startedMs - FILE_CLOCK_SLACK_MS)) {
    writeAtomically(stampFile, JSON.stringify({ version: 1, inputs } satisfies BundleStamp));
  }
  return out;
}
