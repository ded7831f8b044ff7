// LOCK_BACKEND and its settings: each lock service gets what it needs, and a setting of another
// service, a missing one or one it cannot honour is refused at start with the variable named.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError } from '../../src/errors.ts';

const ENDPOINTS = 'http://10.0.0.1:2379,http://10.0.0.2:2379';

function refused(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('LOCK_BACKEND', () => {
  it('is redis by default, with nothing else', () => {
    expect(loadConfig({}).lock).toEqual({ backend: 'redis' });
  });

  it('etcd: endpoints in order, TLS and user when given', () => {
    expect(loadConfig({ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: ` ${ENDPOINTS} ` }).lock).toEqual({
      backend: 'etcd',
      endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'],
      tls: null,
      auth: null,
    });
    expect(
      loadConfig({
        LOCK_BACKEND: 'etcd',
        ETCD_ENDPOINTS: 'https://e:2379',
        ETCD_USERNAME: 'locks',
        ETCD_PASSWORD: 'pw',
      }).lock,
    ).toEqual({
      backend: 'etcd',
      endpoints: ['https://e:2379'],
      tls: { caFile: null, certFile: null, keyFile: null },
      auth: { username: 'locks', password: 'pw' },
    });
  });

  it('postgres: its own URL, or DATABASE_URL when none is given and nothing pools in between', () => {
    expect(loadConfig({ LOCK_BACKEND: 'postgres', DATABASE_URL: 'postgresql://w@db:5432/t' }).lock).toEqual({
      backend: 'postgres',
      databaseUrl: 'postgresql://w@db:5432/t',
    });
    expect(
      loadConfig({
        LOCK_BACKEND: 'postgres',
        DATABASE_POOLER: 'pgbouncer',
        LOCK_DATABASE_URL: 'postgresql://w@db-direct:5432/t',
      }).lock,
    ).toEqual({ backend: 'postgres', databaseUrl: 'postgresql://w@db-direct:5432/t' });
  });

  it.each([
    [{ LOCK_BACKEND: 'zookeeper' }, 'LOCK_BACKEND', /expected one of redis, etcd, postgres/],
    [{ ETCD_ENDPOINTS: ENDPOINTS }, 'ETCD_ENDPOINTS', /only applies with LOCK_BACKEND=etcd/],
    [{ LOCK_BACKEND: 'postgres', ETCD_USERNAME: 'u' }, 'ETCD_USERNAME', /only applies with LOCK_BACKEND=etcd/],
    [{ LOCK_DATABASE_URL: 'postgresql://x@y/z' }, 'LOCK_DATABASE_URL', /only applies with LOCK_BACKEND=postgres/],
    [{ LOCK_BACKEND: 'etcd' }, 'ETCD_ENDPOINTS', /is required/],
    [{ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: ENDPOINTS, LOCK_TTL_MS: '1500' }, 'LOCK_TTL_MS', /at least 2000/],
    [{ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: 'http://a:1,http://a:1' }, 'ETCD_ENDPOINTS', /listed twice/],
    [{ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: 'http://a:1,https://b:1' }, 'ETCD_ENDPOINTS', /mixes/],
    [{ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: 'grpc://a:1' }, 'ETCD_ENDPOINTS', /unsupported scheme/],
    [{ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: ENDPOINTS, ETCD_USERNAME: 'u' }, 'ETCD_PASSWORD', /go together/],
    [
      { LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: ENDPOINTS, ETCD_TLS_CA_FILE: '/etc/hostname' },
      'ETCD_TLS_CA_FILE',
      /PEM|not https/,
    ],
    [{ LOCK_BACKEND: 'postgres', DATABASE_POOLER: 'pgbouncer' }, 'LOCK_DATABASE_URL', /PgBouncer in transaction mode/],
    [{ LOCK_BACKEND: 'postgres', LOCK_DATABASE_URL: 'redis://x:1' }, 'LOCK_DATABASE_URL', /unsupported scheme/],
  ])('refuses %j (%s)', (env, variable, message) => {
    const err = refused(env as Record<string, string>);
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(message);
  });
});
