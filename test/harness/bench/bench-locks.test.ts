// The bench's lock services (harness/bench/bench-locks.ts): every lock variable set for a case, so
// the bench's own environment cannot leak another service's; what the configuration must allow;
// the names a case on another service than Redis gets. The bench run with `--lock` is in
// bench.test.ts, with the other runs of the whole bench.
import { describe, expect, it } from 'vitest';
import { BenchLocks, lockedCaseLabel, lockProblem } from '../../../harness/bench/bench-locks.ts';
import { sandboxNames } from '../../../harness/bench/sandbox.ts';
import { type Config, loadConfig } from '../../../src/config/config.ts';

const URL = 'postgresql://postgres@127.0.0.1:5432/bench_x_e2e_postgres_r1';

describe('BenchLocks', () => {
  it('gives the workers every lock variable, empty but those of their service', () => {
    const locks = BenchLocks.none();
    expect(locks.env('redis', URL)).toEqual({
      LOCK_BACKEND: 'redis',
      ETCD_ENDPOINTS: '',
      ETCD_TLS_CA_FILE: '',
      ETCD_TLS_CERT_FILE: '',
      ETCD_TLS_KEY_FILE: '',
      ETCD_USERNAME: '',
      ETCD_PASSWORD: '',
      LOCK_DATABASE_URL: '',
    });
    // PostgreSQL's locks on the case's own database, directly.
    expect(locks.env('postgres', URL)).toMatchObject({ LOCK_BACKEND: 'postgres', LOCK_DATABASE_URL: URL });
    expect(locks.etcdPids('postgres')()).toEqual([]);
    expect(() => locks.env('etcd', URL)).toThrow(/no etcd cluster was started/);
    expect(locks.describe()).toEqual({ etcd: null });
  });

  it('refuses what the configuration cannot run: a short lease with etcd, PgBouncer with postgres', () => {
    const config = loadConfig({});
    expect(lockProblem(['redis', 'etcd', 'postgres'], config)).toBeNull();
    const short: Config = { ...config, lockTtlMs: 1_000 };
    expect(lockProblem(['redis', 'etcd'], short)).toMatch(/--lock etcd needs LOCK_TTL_MS of at least 2000/);
    expect(lockProblem(['redis', 'postgres'], short)).toBeNull();
    const pooled: Config = { ...config, databasePooler: 'pgbouncer' };
    expect(lockProblem(['postgres'], pooled)).toMatch(/not PgBouncer/);
  });

  it('names a case on another service than Redis after it, and a Redis case as before', () => {
    expect(lockedCaseLabel('e2e', 'redis')).toBe('e2e');
    expect(lockedCaseLabel('hot', 'etcd')).toBe('hot-etcd');
    expect(sandboxNames('x', 'e2e', 1)).toEqual({
      database: 'bench_x_e2e_r1',
      queue: 'bench-x-e2e-r1',
      keyPrefix: 'bench:x:e2e:r1:',
    });
    expect(sandboxNames('x', 'e2e', 1, 'postgres').database).toBe('bench_x_e2e_postgres_r1');
  });
});
