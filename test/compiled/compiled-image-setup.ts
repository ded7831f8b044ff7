// Global setup of the `compiled` vitest project: `npm run build`, then the Dockerfile's final
// stage replayed into .runs/compiled-image/app: its COPY instructions (from the build context,
// and from the build stage's /app, which is this project once built) and its `npm ci` (with
// --prefer-offline). The pipeline tests then run the worker from there with plain node, so
// they see exactly the production dependency set and files of the image. The npm ci is skipped
// when package-lock.json and the command have not changed since the last setup.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { copyParts, parseDockerfile } from '../support/dockerfile.ts';
import { IMAGE_APP_DIR } from './image-dir.ts';

const BUILD_TIMEOUT_MS = 300_000;
const NPM_CI_TIMEOUT_MS = 600_000;
/** The build stage's WORKDIR: `COPY --from=build /app/X` is this project's X after the build. */
const BUILD_STAGE_WORKDIR = '/app/';
const STAMP = '.npm-ci-stamp';

function copyInto(source: string, dest: string): void {
  const target =
    dest.endsWith('/') || dest === '.' || dest === './'
      ? join(IMAGE_APP_DIR, dest, source.split('/').at(-1) as string)
      : join(IMAGE_APP_DIR, dest);
  mkdirSync(dirname(target), { recursive: true });
  cpSync(source.startsWith('/') ? source : join(PROJECT_ROOT, source), target, { recursive: true });
}

export default function setup(): void {
  execFileSync('npm', ['run', 'build'], { cwd: PROJECT_ROOT, stdio: 'inherit', timeout: BUILD_TIMEOUT_MS });
  const stages = parseDockerfile();
  const final = stages.at(-1);
  const build = stages.find(
    (s) => s !== final && s.instructions.some((i) => i.op === 'RUN' && i.args.includes('npm run build')),
  );
  if (final === undefined || build === undefined)
    throw new Error('Dockerfile: expected a build stage and a final stage');

  const lockHash = createHash('sha256')
    .update(readFileSync(join(PROJECT_ROOT, 'package-lock.json')))
    .digest('hex');
  const stampFile = join(IMAGE_APP_DIR, STAMP);
  // node_modules survives between runs when nothing changed; everything else is copied afresh.
  if (existsSync(IMAGE_APP_DIR)) {
    for (const entry of ['dist', 'lua', 'prisma', 'package.json', 'package-lock.json'])
      rmSync(join(IMAGE_APP_DIR, entry), { recursive: true, force: true });
  }
  mkdirSync(IMAGE_APP_DIR, { recursive: true });

  for (const { op, args } of final.instructions) {
    if (op === 'COPY') {
      const { from, sources, dest } = copyParts(args);
      for (const source of sources) {
        if (from === null) copyInto(source, dest);
        else if (from === build.name && source.startsWith(BUILD_STAGE_WORKDIR))
          copyInto(join(PROJECT_ROOT, source.slice(BUILD_STAGE_WORKDIR.length)), dest);
        else throw new Error(`Dockerfile: COPY --from=${from} ${source} is not something this setup can replay`);
      }
    } else if (op === 'RUN') {
      const npmCi = /^npm ci( [^&;|]*)?/.exec(args.trim());
      if (npmCi === null) throw new Error(`Dockerfile: final-stage RUN ${args} is not something this setup can replay`);
      const flags = (npmCi[1] ?? '')
        .trim()
        .split(' ')
        .filter((f) => f !== '');
      const stamp = `${lockHash} ${flags.join(' ')}`;
      if (
        existsSync(join(IMAGE_APP_DIR, 'node_modules')) &&
        existsSync(stampFile) &&
        readFileSync(stampFile, 'utf8') === stamp
      )
        continue;
      rmSync(join(IMAGE_APP_DIR, 'node_modules'), { recursive: true, force: true });
      execFileSync('npm', ['ci', ...flags, '--prefer-offline'], {
        cwd: IMAGE_APP_DIR,
        stdio: 'inherit',
        timeout: NPM_CI_TIMEOUT_MS,
      });
      writeFileSync(stampFile, stamp);
    }
  }
}
