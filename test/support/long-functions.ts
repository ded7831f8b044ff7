// The project's side of the length ratchet: the functions of src/ and harness/ (src/generated/ left
// out: Prisma writes it), and the committed list of today's exceptions beside the test that reads
// it. The arithmetic is test/support/function-lengths.ts.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { type FunctionLength, type LengthList, measureSource, tightenList } from './function-lengths.ts';

export const MEASURED_FOLDERS = ['src', 'harness'] as const;
/** Relative to the project, as the test's messages name it. */
export const LONG_FUNCTIONS_LIST = 'test/layout/long-functions.json';

const ABOUT =
  'Functions over 70 lines today, each at most as long as written here. The list only shrinks: ' +
  'test/layout/long-functions.test.ts fails on a function missing from it, one that grew, and an entry the code has outgrown.';

interface ListFile {
  about: string;
  functions: LengthList;
}

/** The .ts files of `folders` under `root`, as paths relative to `root` with forward slashes, sorted. */
export function measuredFiles(root = PROJECT_ROOT, folders: readonly string[] = MEASURED_FOLDERS): string[] {
  return folders
    .flatMap((folder) =>
      (readdirSync(join(root, folder), { recursive: true }) as string[]).map(
        (f) => `${folder}/${f.replaceAll('\\', '/')}`,
      ),
    )
    .filter((path) => path.endsWith('.ts') && !path.startsWith('src/generated/'))
    .sort();
}

export function measureProject(root = PROJECT_ROOT, folders: readonly string[] = MEASURED_FOLDERS): FunctionLength[] {
  return measuredFiles(root, folders).flatMap((path) => measureSource(path, readFileSync(join(root, path), 'utf8')));
}

export function readList(root = PROJECT_ROOT): LengthList {
  return (JSON.parse(readFileSync(join(root, LONG_FUNCTIONS_LIST), 'utf8')) as ListFile).functions;
}

/**
 * The regeneration: rewrites the list on disk as tightenList makes it from the code, so an entry
 * can only leave or be lowered. There is no way here to add or raise one; the first list was
 * written once by hand from the measurements.
 */
export function tightenListFile(measured: readonly FunctionLength[], root = PROJECT_ROOT): LengthList {
  // Sorted by identity, one entry a line, so a change reads as a diff of lines.
  const tightened: ListFile = { about: ABOUT, functions: tightenList(measured, readList(root)) };
  writeFileSync(join(root, LONG_FUNCTIONS_LIST), `${JSON.stringify(tightened, null, 2)}\n`);
  return tightened.functions;
}
