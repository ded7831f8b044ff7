// Where the project's own files are, resolved from this module rather than the working directory.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MIGRATIONS_DIR = join(PROJECT_ROOT, 'prisma', 'migrations');
/** Project-owned data of services started by `npm run services` (git-ignored). */
export const DATA_DIR = join(PROJECT_ROOT, '.data');
