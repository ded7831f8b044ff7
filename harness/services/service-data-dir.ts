// Where the private Redis and PostgreSQL of `npm run services` keep their data, found again by
// the next run for the same project. Redis runs as the invoking user, so its data stays in the
// project's .data/. PostgreSQL refuses to run as root: as root it runs as the `postgres` user,
// which cannot be assumed to reach a folder inside the project (a clone under /root or under
// `mktemp -d` is root-only). As root its cluster therefore lives under a root-owned folder that
// every user may traverse, in a sub-folder named after the project's path.
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, join } from 'node:path';
import { DATA_DIR, PROJECT_ROOT } from '../../src/config/paths.ts';

/** Parent of every project's PostgreSQL clusters when the services are started as root. */
export const ROOT_POSTGRES_BASE_DIR = '/var/lib/fenced-transfers';
/** Hex digits of the project path's SHA-256 in the folder name: enough to tell clones apart. */
const PROJECT_HASH_LENGTH = 12;
/** The folder names a project by the last part of its path, cut to this many characters. */
const PROJECT_LABEL_LENGTH_MAX = 32;
/** A file in the project's folder naming the checkout it belongs to, for whoever cleans up. */
export const PROJECT_ROOT_MARKER = 'project-root';
/** rwxr-xr-x: the postgres user must be able to pass through the folders above its cluster. */
const TRAVERSABLE_MODE = 0o755;

function isRoot(): boolean {
  return userInfo().uid === 0;
}

/** `<folder name>-<hash of the real path>`: stable for one checkout, distinct between clones. */
export function projectId(projectRoot: string = PROJECT_ROOT): string {
  const real = existsSync(projectRoot) ? realpathSync(projectRoot) : projectRoot;
  const label =
    basename(real)
      .replace(/[^A-Za-z0-9._-]/g, '_')
      .slice(0, PROJECT_LABEL_LENGTH_MAX) || 'project';
  const hash = createHash('sha256').update(real).digest('hex').slice(0, PROJECT_HASH_LENGTH);
  return `${label}-${hash}`;
}

export function redisDataDir(port: number): string {
  return join(DATA_DIR, `redis-${port}`);
}

/** The cluster folder for a PostgreSQL on this port: .data/ normally, the shared base as root. */
export function postgresDataDir(port: number, asRoot: boolean = isRoot()): string {
  if (!asRoot) return join(DATA_DIR, `postgres-${port}`);
  return join(ROOT_POSTGRES_BASE_DIR, projectId(), `postgres-${port}`);
}

/**
 * Creates the folders above a cluster folder. As root, the base and the project's folder are
 * made traversable whatever the umask, and the project's folder names its checkout.
 */
export function preparePostgresParent(clusterDir: string, asRoot: boolean = isRoot()): void {
  const projectDir = join(clusterDir, '..');
  if (!asRoot || !clusterDir.startsWith(`${ROOT_POSTGRES_BASE_DIR}/`)) {
    mkdirSync(projectDir, { recursive: true });
    return;
  }
  for (const dir of [ROOT_POSTGRES_BASE_DIR, projectDir]) {
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, TRAVERSABLE_MODE);
  }
  writeFileSync(join(projectDir, PROJECT_ROOT_MARKER), `${PROJECT_ROOT}\n`);
}
