// .ci/prerequisites, which `npm test` runs first (and so CI, through `npm test`): nothing to do
// when the machine packages are there, and for a user who cannot install them, a stop at once
// with the one command to run. (As root it installs them with apt-get; CI's runs show that.)
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

const NOBODY_UID = 65534;
/** The refusal must come at once, not after an install attempt. */
const REFUSAL_TIME_MAX_MS = 5_000;

interface Run {
  code: number;
  stderr: string;
  elapsedMs: number;
}

function canSudo(): boolean {
  try {
    execFileSync('sudo', ['-n', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Runs a copy of the script (the project folder may be one only root can enter) as a user who cannot install. */
function runUnprivileged(script: string, env: Record<string, string>): Promise<Run> {
  const asNobody = process.getuid?.() === 0;
  const command = asNobody ? 'setpriv' : 'bash';
  const args = asNobody
    ? [`--reuid=${NOBODY_UID}`, `--regid=${NOBODY_UID}`, '--clear-groups', 'bash', script]
    : [script];
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      command,
      args,
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, cwd: tmpdir() },
      (err, _out, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stderr, elapsedMs: Date.now() - started });
      },
    );
  });
}

describe('.ci/prerequisites', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ft-prerequisites-'));
  const script = join(scratch, 'prerequisites');
  copyFileSync(join(PROJECT_ROOT, '.ci', 'prerequisites'), script);
  chmodSync(scratch, 0o755);
  chmodSync(script, 0o755);
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('does nothing when the packages are there', async () => {
    const run = await runUnprivileged(script, {
      PREREQUISITES_CHROMIUM: '/bin/sh',
      PREREQUISITES_DOCKER_COMPOSE: '/bin/sh',
      PREREQUISITES_PGBOUNCER: '/bin/sh',
      PREREQUISITES_PG_AUTOCTL: '/bin/sh',
      PREREQUISITES_PROMTOOL: '/bin/sh',
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
  });

  it.skipIf(process.getuid?.() !== 0 && canSudo())(
    'stops at once with the one command to run when Chromium is missing and cannot be installed',
    async () => {
      const run = await runUnprivileged(script, {
        PREREQUISITES_CHROMIUM: join(scratch, 'no-chromium'),
        PREREQUISITES_DOCKER_COMPOSE: '/bin/sh',
        PREREQUISITES_PGBOUNCER: '/bin/sh',
        PREREQUISITES_PG_AUTOCTL: '/bin/sh',
        PREREQUISITES_PROMTOOL: '/bin/sh',
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('run: sudo apt-get install -y chromium');
      expect(run.elapsedMs).toBeLessThan(REFUSAL_TIME_MAX_MS);
    },
  );

  it.skipIf(process.getuid?.() !== 0 && canSudo())(
    'stops at once with the one command to run when PgBouncer is missing and cannot be installed',
    async () => {
      const run = await runUnprivileged(script, {
        PREREQUISITES_CHROMIUM: '/bin/sh',
        PREREQUISITES_DOCKER_COMPOSE: '/bin/sh',
        PREREQUISITES_PGBOUNCER: join(scratch, 'no-pgbouncer'),
        PREREQUISITES_PG_AUTOCTL: '/bin/sh',
        PREREQUISITES_PROMTOOL: '/bin/sh',
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('run: sudo apt-get install -y pgbouncer');
      expect(run.elapsedMs).toBeLessThan(REFUSAL_TIME_MAX_MS);
    },
  );

  it.skipIf(process.getuid?.() !== 0 && canSudo())(
    'stops at once with the one command to run when pg_auto_failover is missing and cannot be installed',
    async () => {
      const run = await runUnprivileged(script, {
        PREREQUISITES_CHROMIUM: '/bin/sh',
        PREREQUISITES_DOCKER_COMPOSE: '/bin/sh',
        PREREQUISITES_PGBOUNCER: '/bin/sh',
        PREREQUISITES_PG_AUTOCTL: join(scratch, 'no-pg_autoctl'),
        PREREQUISITES_PROMTOOL: '/bin/sh',
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('run: sudo apt-get install -y postgresql-15-auto-failover');
      expect(run.elapsedMs).toBeLessThan(REFUSAL_TIME_MAX_MS);
    },
  );

  it.skipIf(process.getuid?.() !== 0 && canSudo())(
    'stops at once with the one command to run when promtool is missing and cannot be installed',
    async () => {
      const run = await runUnprivileged(script, {
        PREREQUISITES_CHROMIUM: '/bin/sh',
        PREREQUISITES_DOCKER_COMPOSE: '/bin/sh',
        PREREQUISITES_PGBOUNCER: '/bin/sh',
        PREREQUISITES_PG_AUTOCTL: '/bin/sh',
        PREREQUISITES_PROMTOOL: join(scratch, 'no-promtool'),
      });
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('run: sudo apt-get install -y prometheus');
      expect(run.elapsedMs).toBeLessThan(REFUSAL_TIME_MAX_MS);
    },
  );

  it('only warns when docker-compose is missing and cannot be installed', async () => {
    const run = await runUnprivileged(script, {
      PREREQUISITES_CHROMIUM: '/bin/sh',
      PREREQUISITES_DOCKER_COMPOSE: join(scratch, 'no-compose'),
      PREREQUISITES_PGBOUNCER: '/bin/sh',
      PREREQUISITES_PG_AUTOCTL: '/bin/sh',
      PREREQUISITES_PROMTOOL: '/bin/sh',
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain("warning: no docker-compose: the Compose file's own validation is skipped");
  });
});
