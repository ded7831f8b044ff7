// The production image's Dockerfile: a build stage that compiles, and a final stage with
// production dependencies only, the compiled code and the runtime files, an unprivileged user,
// a HEALTHCHECK and the compiled worker as its command. (The compiled project replays that final
// stage and runs the pipeline tests on it: test/compiled/.)
import { describe, expect, it } from 'vitest';
import { WORKER_NODE_FLAGS } from '../../src/config/worker-runtime.ts';
import { copyParts, parseDockerfile } from '../support/dockerfile.ts';

const stages = parseDockerfile();
const final = stages.at(-1);
const build = stages.find(
  (s) => s !== final && s.instructions.some((i) => i.op === 'RUN' && /\bnpm run build\b/.test(i.args)),
);

function ops(op: string, stage = final): string[] {
  return (stage?.instructions ?? []).filter((i) => i.op === op).map((i) => i.args);
}

describe('Dockerfile', () => {
  it('has a build stage that installs everything, generates the client and compiles', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build).toBeDefined();
    expect(ops('RUN', build).some((r) => /^npm ci\b/.test(r))).toBe(true);
    expect(ops('COPY', build).some((c) => c.includes('tsconfig.build.json'))).toBe(true);
  });

  it('the final stage installs production dependencies only, without the optional peers and scripts', () => {
    const installs = ops('RUN').filter((r) => r.includes('npm ci'));
    expect(installs).toHaveLength(1);
    expect(installs[0]).toMatch(/npm ci\b.*--omit=dev/);
    expect(installs[0]).toMatch(/--omit=optional/);
    expect(installs[0]).toMatch(/--ignore-scripts/);
    expect(ops('RUN').some((r) => /npm (install|i)\b|npm run build|tsc/.test(r))).toBe(false);
  });

  it('the final stage takes only dist/ from the build stage, and lua/ and the migrations from the context', () => {
    const copies = ops('COPY').map(copyParts);
    const fromBuild = copies.filter((c) => c.from !== null);
    expect(fromBuild.map((c) => [c.from, c.sources])).toEqual([[build?.name, ['/app/dist']]]);
    const fromContext = copies
      .filter((c) => c.from === null)
      .flatMap((c) => c.sources)
      .sort();
    expect(fromContext).toEqual(['lua', 'package-lock.json', 'package.json', 'prisma/migrations']);
    // Never the whole context, node_modules or sources.
    for (const c of copies)
      for (const s of c.sources) expect(s).not.toMatch(/^(\.|src|node_modules|\/app\/node_modules)$/);
  });

  it('runs as an unprivileged numeric user, checks /healthz with node, and starts the compiled worker', () => {
    const user = ops('USER').at(-1) ?? 'root';
    expect(user).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    const health = ops('HEALTHCHECK').at(-1) ?? '';
    expect(health).toMatch(/CMD \["node", "-e",/);
    expect(health).toContain('/healthz');
    expect(health).toContain('METRICS_PORT');
    expect(JSON.parse(ops('CMD').at(-1) ?? '[]')).toEqual(['node', ...WORKER_NODE_FLAGS, 'dist/cli/worker.js']);
    expect(ops('EXPOSE')).toContain('9464');
  });
});
