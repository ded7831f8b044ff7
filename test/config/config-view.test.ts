// `npm run config`: every variable with its resolved value and where it came from, and no secret
// in the output, whether it sits in a URL or in a password variable.
import { describe, expect, it } from 'vitest';
import { configView, formatConfigView } from '../../src/config/config-view.ts';
import { SETTINGS } from '../../src/config/settings.ts';
import { ConfigError } from '../../src/errors.ts';
import { runCommand } from '../support/cli-process.ts';

const SECRET = 'sekrit-Pa55word-xyz';

function row(rows: ReturnType<typeof configView>, name: string) {
  const found = rows.find((r) => r.name === name);
  if (found === undefined) throw new Error(`no row ${name}`);
  return found;
}

describe('the configuration view', () => {
  it('lists every variable once, each with its source', () => {
    const rows = configView({ LOCK_TTL_MS: '12000' });
    expect(rows.map((r) => r.name)).toEqual(Object.keys(SETTINGS));
    expect(row(rows, 'LOCK_TTL_MS')).toEqual({ name: 'LOCK_TTL_MS', value: '12000', source: 'environment' });
    expect(row(rows, 'JOB_ATTEMPTS_MAX')).toEqual({ name: 'JOB_ATTEMPTS_MAX', value: '20', source: 'default' });
    // An empty variable is unset, as the service reads it.
    expect(row(configView({ LOCK_TTL_MS: '' }), 'LOCK_TTL_MS').source).toBe('default');
  });

  it('shows what the service resolves, not only what was typed', () => {
    // Unset, the batches in flight follow a smaller pool down (src/config/config.ts).
    const rows = configView({ DB_POOL_MAX: '2' });
    expect(row(rows, 'TRANSFER_BATCHES_IN_FLIGHT_MAX')).toMatchObject({ value: '2', source: 'default' });
    expect(row(configView({ METRICS_PORT: 'off' }), 'METRICS_PORT').value).toBe('off');
  });

  it('never shows a password, in a URL or in a password variable', () => {
    const env = {
      DATABASE_URL: `postgresql://worker:${SECRET}@db.internal:5432/transfers?sslpassword=${SECRET}`,
      REDIS_URL: `redis://default:${SECRET}@redis.internal:6379`,
      WORKER_DB_PASSWORD: SECRET,
    };
    const rows = configView(env);
    const printed = formatConfigView(rows) + JSON.stringify(rows);
    expect(printed).not.toContain(SECRET);
    expect(row(rows, 'DATABASE_URL').value).toContain('worker:***@db.internal:5432/transfers');
    expect(row(rows, 'WORKER_DB_PASSWORD')).toMatchObject({ value: '[redacted]', source: 'environment' });
    expect(row(rows, 'PRODUCER_DB_PASSWORD')).toMatchObject({ value: '(unset)', source: 'default' });
  });

  it("never shows the lock services' passwords: etcd's, and one in LOCK_DATABASE_URL", () => {
    const etcd = configView({
      LOCK_BACKEND: 'etcd',
      ETCD_ENDPOINTS: 'https://etcd-1:2379',
      ETCD_USERNAME: 'locks',
      ETCD_PASSWORD: SECRET,
    });
    expect(formatConfigView(etcd) + JSON.stringify(etcd)).not.toContain(SECRET);
    expect(row(etcd, 'ETCD_ENDPOINTS')).toMatchObject({ value: 'https://etcd-1:2379', source: 'environment' });
    expect(row(etcd, 'ETCD_PASSWORD')).toMatchObject({ value: '[redacted]', source: 'environment' });
    const postgres = configView({
      LOCK_BACKEND: 'postgres',
      LOCK_DATABASE_URL: `postgresql://worker:${SECRET}@db-direct:5432/transfers`,
    });
    expect(formatConfigView(postgres) + JSON.stringify(postgres)).not.toContain(SECRET);
  });

  it('refuses an invalid environment as the worker would', () => {
    expect(() => configView({ LOCK_TTL_MS: 'ten' })).toThrow(ConfigError);
  });

  it('prints as a command, as text and as JSON, and fails with one line on a bad value', async () => {
    const text = await runCommand('npm', ['run', '-s', 'config'], { DATABASE_URL: `postgresql://u:${SECRET}@h/x` });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^DATABASE_URL +postgresql:\/\/u:\*\*\*@h\/x +environment$/m);
    expect(text.stdout + text.stderr).not.toContain(SECRET);
    const json = await runCommand('npm', ['run', '-s', 'config', '--', '--json'], {});
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toHaveLength(Object.keys(SETTINGS).length);
    const bad = await runCommand('npm', ['run', '-s', 'config'], { LOCK_TTL_MS: 'ten' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^configuration error: LOCK_TTL_MS/m);
  });
});
