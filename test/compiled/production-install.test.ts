// The production install of the image (the Dockerfile's final stage, replayed by this project's
// global setup): no package that only development needs, and the compiled commands the
// migration Job runs work from it with plain node. The worker itself is exercised by the
// pipeline tests of this project.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, sep } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { dropWorkerRole } from '../../src/db/worker-role-grants.ts';
import { describeRun, lastJsonLine, runCommand } from '../support/cli-process.ts';
import { uniqueName } from '../support/test-db.ts';
import { IMAGE_APP_DIR } from './image-dir.ts';

interface LsNode {
  dependencies?: Record<string, LsNode>;
}
const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** Every package in the install's node_modules (scoped and nested included): what the image holds. */
function installedNames(dir = join(IMAGE_APP_DIR, 'node_modules'), names = new Set<string>()): Set<string> {
  if (!existsSync(dir)) return names;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
    const packages = entry.name.startsWith('@')
      ? readdirSync(join(dir, entry.name), { withFileTypes: true })
          .filter((d) => d.isDirectory())
          .map((d) => `${entry.name}/${d.name}`)
      : [entry.name];
    for (const name of packages) {
      names.add(name);
      installedNames(join(dir, name, 'node_modules'), names);
    }
  }
  return names;
}

/** Installed packages whose package.json lists `name` under plain `dependencies`. */
function requiredBy(name: string, installed: Set<string>): string[] {
  return [...installed].filter((other) => {
    const file = join(IMAGE_APP_DIR, 'node_modules', other, 'package.json');
    if (other === name || !existsSync(file)) return false;
    const deps =
      (JSON.parse(readFileSync(file, 'utf8')) as { dependencies?: Record<string, string> }).dependencies ?? {};
    return name in deps;
  });
}

describe("the image's production install", () => {
  it('holds the production dependencies and no package only development needs', () => {
    const installed = installedNames();
    for (const name of Object.keys(pkg.dependencies)) expect(installed.has(name), name).toBe(true);
    const devPresent = Object.keys(pkg.devDependencies).filter((name) => installed.has(name));
    // A devDependency may be there only because a production package depends on it
    // (@prisma/adapter-pg needs @types/pg); the build tools never are.
    for (const name of devPresent)
      expect(requiredBy(name, installed), `${name} is in the image without a production dependent`).not.toEqual([]);
    for (const tool of ['typescript', 'tsx', 'prisma', 'vitest', 'vite', 'esbuild', 'vega', 'yaml'])
      expect(installed.has(tool), tool).toBe(false);
  });

  it('carries the product only: no harness file in dist/', () => {
    const files = (readdirSync(join(IMAGE_APP_DIR, 'dist'), { recursive: true }) as string[]).filter((f) =>
      f.endsWith('.js'),
    );
    expect(files).toContain(join('cli', 'worker.js'));
    expect(files.filter((f) => f.startsWith(`harness${sep}`))).toEqual([]);
    // Every compiled file has its source in the product (src/).
    for (const file of files.filter((f) => !f.startsWith(`generated${sep}`))) {
      expect(existsSync(join(PROJECT_ROOT, 'src', file.replace(/\.js$/, '.ts'))), file).toBe(true);
    }
  });

  it('`npm ls --omit=dev` in the project lists exactly the production dependencies', () => {
    const top = JSON.parse(
      execFileSync('npm', ['ls', '--omit=dev', '--json'], { cwd: PROJECT_ROOT, encoding: 'utf8' }),
    ) as LsNode;
    expect(Object.keys(top.dependencies ?? {}).sort()).toEqual(Object.keys(pkg.dependencies).sort());
  });

  describe("the migration Job's commands run from it with plain node", () => {
    const base = loadConfig();
    const database = uniqueName('ft_image');
    const ownerUrl = withDatabase(base.databaseUrl, database);
    const role = uniqueName('ft_w');
    afterAll(async () => {
      await dropDatabase(ownerUrl);
      await dropWorkerRole(ownerUrl, role);
    });

    it('migrate.js applies every migration; worker-role.js creates the role', async () => {
      const env = { DATABASE_URL: ownerUrl, WORKER_DB_PASSWORD: 'image-test-password-0123456789', LOG_LEVEL: 'warn' };
      const migrated = await runCommand(process.execPath, [join(IMAGE_APP_DIR, 'dist', 'cli', 'migrate.js')], env);
      expect(migrated.code, describeRun(migrated)).toBe(0);
      expect((lastJsonLine(migrated) as { applied: string[] }).applied).toEqual(
        execFileSync('ls', [join(PROJECT_ROOT, 'prisma', 'migrations')], { encoding: 'utf8' })
          .split('\n')
          .filter((n) => /^\d/.test(n)),
      );
      const granted = await runCommand(
        process.execPath,
        [join(IMAGE_APP_DIR, 'dist', 'cli', 'worker-role.js'), '--role', role],
        env,
      );
      expect(granted.code, describeRun(granted)).toBe(0);
      expect(lastJsonLine(granted)).toMatchObject({ role, created: true });
    });
  });
});
