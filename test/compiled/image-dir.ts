// Where the compiled project assembles the production image's files: the final stage of the
// Dockerfile, replayed on this machine (production dependencies, dist/, lua/, migrations).
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

export const IMAGE_APP_DIR = join(PROJECT_ROOT, '.runs', 'compiled-image', 'app');
/** WORKER_ENTRY of the compiled project, relative to the project root (see vitest.config.ts). */
export const COMPILED_WORKER_ENTRY = '.runs/compiled-image/app/dist/cli/worker.js';
