// Where the project's own files are, resolved from this module rather than the working directory.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The nearest folder above this module that holds package.json: src/, dist/ and dist-harness/src/ alike. */
function projectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

export const PROJECT_ROOT = projectRoot(dirname(fileURLToPath(import.meta.url)));
export const MIGRATIONS_DIR = join(PROJECT_ROOT, 'prisma', 'migrations');
/** Project-owned data of services started by `npm run services` (git-ignored). */
export const DATA_DIR = join(PROJECT_ROOT, '.data');
