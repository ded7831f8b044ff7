// loadConfig reads the environment once into a typed object: defaults, rejection of malformed
// values with the variable's name, the guard on the unsafe modes, and the way a command
// reports a bad variable (one line on stderr, exit code 1).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CONFIG_DEFAULTS,
  databaseName,
  loadConfig,
  redactUrl,
  redisTargetEnv,
  withDatabase,
} from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { ConfigError } from '../../src/errors.ts';
import { describeRun, runSource } from '../support/cli-process.ts';

const ALLOW_UNSAFE = 'i-understand-this-breaks-guarantees';

/** The ConfigError that loading `env` throws; fails the test when it loads. */
function configErrorOf(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('loadConfig defaults', () => {
  it('DATABASE_POOLER: none or pgbouncer, nothing else', () => {
    expect(loadConfig({ DATABASE_POOLER: 'pgbouncer' }).databasePooler).toBe('pgbouncer');
    expect(() => loadConfig({ DATABASE_POOLER: 'pgpool' })).toThrow(
      'DATABASE_POOLER: expected one of none, pgbouncer, got "pgpool"',
    );
  });

  it('fills every setting from the defaults when the environment is empty', () => {
    const config = loadConfig({});
    expect(config).toEqual({
      databaseUrl: 'postgresql://postgres@127.0.0.1:5432/transfers',
      databasePooler: 'none',
      redisUrl: 'redis://127.0.0.1:6379',
      redisTlsCaFile: null,
      redisCluster: null,
      queueName: 'transfers',
      queueShards: 1,
      queueShardsConsumed: [0],
      lockKeyPrefix: 'ft:',
      lockTtlMs: 10_000,
      lock: { backend: 'redis' },
      workerConcurrency: 64,
      logLevel: 'info',
      transferAmountMax: 1_000_000_000_000_000n,
      holdExpiryMaxMs: 604_800_000,
      creditLimitMax: 1_000_000_000_000_000n,
      dbPoolMax: 8,
      dbStatementTimeoutMs: 5_000,
      dbLockTimeoutMs: 2_000,
      dbIdleInTransactionTimeoutMs: 5_000,
      jobAttemptsMax: 20,
      jobLockDurationMs: 30_000,
      jobStalledIntervalMs: 30_000,
      transferBatchMax: 64,
      transferBatchWaitMs: 2,
      outcomeSequenceIntervalMs: 200,
      holdSweepIntervalMs: 1_000,
      transferBatchesInFlightMax: 4,
      lockRideMsMax: 250,
      unsafe: [],
      dashboardHost: '127.0.0.1',
      dashboardPort: 3000,
      dashboardReadOnly: true,
      workerEntry: join(PROJECT_ROOT, 'src', 'cli', 'worker.ts'),
      metricsPort: 9464,
      metricsHost: '0.0.0.0',
      startupTimeoutMs: 30_000,
      shutdownTimeoutMs: 20_000,
      intakeResendAfterMs: 30_000,
      relayBatchMax: 500,
      relayIdleMs: 200,
      relayMetricsPort: 9465,
      outcomesQueueName: 'transfers-outcomes',
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.unsafe)).toBe(true);
  });

  it('bounds the batch settings, and keeps the batches in flight within the pool', () => {
    expect(loadConfig({ TRANSFER_BATCH_MAX: '1', TRANSFER_BATCH_WAIT_MS: '0', LOCK_RIDE_MS_MAX: '0' })).toMatchObject({
      transferBatchMax: 1,
      transferBatchWaitMs: 0,
      lockRideMsMax: 0,
    });
    expect(() => loadConfig({ TRANSFER_BATCH_MAX: '0' })).toThrow(/^TRANSFER_BATCH_MAX: /);
    expect(() => loadConfig({ TRANSFER_BATCH_MAX: '1001' })).toThrow(/^TRANSFER_BATCH_MAX: .*between 1 and 1000/);
    expect(() => loadConfig({ TRANSFER_BATCH_WAIT_MS: '1001' })).toThrow(/^TRANSFER_BATCH_WAIT_MS: /);
    expect(loadConfig({ DB_POOL_MAX: '2' }).transferBatchesInFlightMax).toBe(2);
    expect(loadConfig({}).transferBatchesInFlightMax).toBe(4);
    expect(loadConfig({ TRANSFER_BATCH_MAX: '1' }).transferBatchesInFlightMax).toBe(8);
    expect(
      loadConfig({ TRANSFER_BATCH_MAX: '1', TRANSFER_BATCHES_IN_FLIGHT_MAX: '3' }).transferBatchesInFlightMax,
    ).toBe(3);
    expect(() => loadConfig({ DB_POOL_MAX: '2', TRANSFER_BATCHES_IN_FLIGHT_MAX: '3' })).toThrow(
      /^TRANSFER_BATCHES_IN_FLIGHT_MAX: must not exceed DB_POOL_MAX \(2\)/,
    );
  });

  it('treats an empty variable like an absent one', () => {
    expect(loadConfig({ LOCK_TTL_MS: '', REDIS_URL: '' })).toMatchObject({
      lockTtlMs: Number(CONFIG_DEFAULTS.LOCK_TTL_MS),
      redisUrl: CONFIG_DEFAULTS.REDIS_URL,
    });
  });

  it('takes given values over the defaults', () => {
    const config = loadConfig({
      DATABASE_URL: 'postgres://u:p@db.example:6543/other',
      REDIS_URL: 'rediss://cache.example:6380',
      LOCK_TTL_MS: '2500',
      WORKER_CONCURRENCY: '3',
      LOG_LEVEL: 'silent',
      TRANSFER_AMOUNT_MAX: '500',
      QUEUE_NAME: 'q-1',
    });
    expect(config).toMatchObject({
      databaseUrl: 'postgres://u:p@db.example:6543/other',
      redisUrl: 'rediss://cache.example:6380',
      lockTtlMs: 2500,
      workerConcurrency: 3,
      logLevel: 'silent',
      transferAmountMax: 500n,
      queueName: 'q-1',
    });
  });

  it('reads process.env when given no argument', () => {
    expect(loadConfig().databaseUrl).toBe(process.env.DATABASE_URL || CONFIG_DEFAULTS.DATABASE_URL);
  });
});

describe('loadConfig rejects malformed values, naming the variable', () => {
  it.each([
    ['not a url', /not a valid URL/],
    ['127.0.0.1:6379', /scheme|not a valid URL/],
    ['http://127.0.0.1:6379', /unsupported scheme "http:"/],
    ['redis://127.0.0.1:99999', /not a valid URL|port out of range/],
    ['redis://', /names no host/],
  ])('REDIS_URL=%j', (value, detail) => {
    const err = configErrorOf({ REDIS_URL: value });
    expect(err.variable).toBe('REDIS_URL');
    expect(err.message).toMatch(/^REDIS_URL: /);
    expect(err.message).toMatch(detail);
  });

  it.each(['abc', '10s', '2500ms', '1.5', '3000.5', '-5', '1e4', ' 100', '0x10'])(
    'LOCK_TTL_MS=%j (not a whole number)',
    (value) => {
      const err = configErrorOf({ LOCK_TTL_MS: value });
      expect(err.variable).toBe('LOCK_TTL_MS');
      expect(err.message).toMatch(/^LOCK_TTL_MS: expected a whole number between 100 and 600000/);
    },
  );

  it.each(['99', '600001', '9'.repeat(400)])('LOCK_TTL_MS=%s (out of range)', (value) => {
    expect(configErrorOf({ LOCK_TTL_MS: value }).variable).toBe('LOCK_TTL_MS');
  });

  it('accepts LOCK_TTL_MS at both ends of its range', () => {
    expect(loadConfig({ LOCK_TTL_MS: '100' }).lockTtlMs).toBe(100);
    expect(loadConfig({ LOCK_TTL_MS: '600000' }).lockTtlMs).toBe(600_000);
  });

  it.each([
    ['DATABASE_URL', 'mysql://127.0.0.1/transfers'],
    ['LOG_LEVEL', 'verbose'],
    ['TRANSFER_AMOUNT_MAX', '0'],
    ['TRANSFER_AMOUNT_MAX', '1000000000000000000'],
    ['QUEUE_NAME', 'has space'],
    ['WORKER_CONCURRENCY', '0'],
    ['DB_POOL_MAX', 'ten'],
    ['JOB_ATTEMPTS_MAX', '1001'],
    ['DASHBOARD_HOST', 'example.com'],
    ['DASHBOARD_HOST', '127.0.0.1:3000'],
    ['DASHBOARD_PORT', '65536'],
    ['DASHBOARD_PORT', '-1'],
    ['DASHBOARD_READ_ONLY', 'yes'],
    ['DASHBOARD_READ_ONLY', 'TRUE'],
    ['METRICS_PORT', '-1'],
    ['METRICS_PORT', '65536'],
    ['METRICS_PORT', '000000'],
    ['METRICS_PORT', 'none'],
    ['METRICS_HOST', 'a host'],
    ['STARTUP_TIMEOUT_MS', '999'],
    ['STARTUP_TIMEOUT_MS', '600001'],
    ['SHUTDOWN_TIMEOUT_MS', '20s'],
    ['INTAKE_RESEND_AFTER_MS', '499'],
    ['INTAKE_RESEND_AFTER_MS', '86400001'],
    ['RELAY_BATCH_MAX', '0'],
    ['RELAY_BATCH_MAX', '1001'],
    ['RELAY_IDLE_MS', '9'],
    ['RELAY_IDLE_MS', '10001'],
    ['RELAY_METRICS_PORT', '65536'],
    ['RELAY_METRICS_PORT', 'none'],
    ['OUTCOMES_QUEUE_NAME', 'a:b'],
  ])('%s=%j', (variable, value) => {
    const err = configErrorOf({ [variable]: value });
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
  });
});

describe('the dashboard settings', () => {
  it('takes an IP address or localhost, a port from 0 (any free one) to 65535, and true or false', () => {
    expect(loadConfig({ DASHBOARD_HOST: '0.0.0.0', DASHBOARD_PORT: '0', DASHBOARD_READ_ONLY: 'false' })).toMatchObject({
      dashboardHost: '0.0.0.0',
      dashboardPort: 0,
      dashboardReadOnly: false,
    });
    expect(loadConfig({ DASHBOARD_HOST: '::1', DASHBOARD_PORT: '65535' })).toMatchObject({
      dashboardHost: '::1',
      dashboardPort: 65_535,
      dashboardReadOnly: true,
    });
    expect(loadConfig({ DASHBOARD_HOST: 'localhost' }).dashboardHost).toBe('localhost');
  });
});

describe("the worker's HTTP server and time limits", () => {
  it('METRICS_PORT=off switches the server off, 0 asks for any free port; a port and the time limits are read as given', () => {
    expect(loadConfig({ METRICS_PORT: 'off' }).metricsPort).toBeNull();
    expect(loadConfig({ METRICS_PORT: '0' }).metricsPort).toBe(0);
    expect(
      loadConfig({
        METRICS_PORT: '19464',
        METRICS_HOST: '127.0.0.1',
        STARTUP_TIMEOUT_MS: '1000',
        SHUTDOWN_TIMEOUT_MS: '600000',
      }),
    ).toMatchObject({
      metricsPort: 19_464,
      metricsHost: '127.0.0.1',
      startupTimeoutMs: 1_000,
      shutdownTimeoutMs: 600_000,
    });
  });
});

describe('the unsafe modes', () => {
  it('refuses TRANSFERS_UNSAFE without TRANSFERS_ALLOW_UNSAFE', () => {
    const err = configErrorOf({ TRANSFERS_UNSAFE: 'no-fencing' });
    expect(err.variable).toBe('TRANSFERS_UNSAFE');
    expect(err.message).toContain(`TRANSFERS_ALLOW_UNSAFE=${ALLOW_UNSAFE}`);
  });

  it('refuses TRANSFERS_UNSAFE when TRANSFERS_ALLOW_UNSAFE has any other value', () => {
    for (const allow of ['1', 'true', 'yes', `${ALLOW_UNSAFE} `]) {
      expect(configErrorOf({ TRANSFERS_UNSAFE: 'no-lock', TRANSFERS_ALLOW_UNSAFE: allow }).variable).toBe(
        'TRANSFERS_UNSAFE',
      );
    }
  });

  it('switches the named layers off when both variables are set', () => {
    const config = loadConfig({ TRANSFERS_UNSAFE: 'no-idempotency, no-lock', TRANSFERS_ALLOW_UNSAFE: ALLOW_UNSAFE });
    expect(config.unsafe).toEqual(['no-idempotency', 'no-lock']);
  });

  it('refuses an unknown mode even when allowed', () => {
    const err = configErrorOf({ TRANSFERS_UNSAFE: 'no-checks', TRANSFERS_ALLOW_UNSAFE: ALLOW_UNSAFE });
    expect(err.variable).toBe('TRANSFERS_UNSAFE');
    expect(err.message).toContain('"no-checks"');
  });

  it('keeps every layer on when only TRANSFERS_ALLOW_UNSAFE is set', () => {
    expect(loadConfig({ TRANSFERS_ALLOW_UNSAFE: ALLOW_UNSAFE }).unsafe).toEqual([]);
  });
});

describe('Redis Cluster and queue shards', () => {
  it('reads the cluster nodes and the NAT map into addresses', () => {
    const config = loadConfig({
      REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b.example:7001,[::1]:7002',
      REDIS_CLUSTER_NAT_MAP: '10.0.0.1:7000=127.0.0.1:17000',
    });
    expect(config.redisCluster).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'redis-b.example', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      natMap: { '10.0.0.1:7000': { host: '127.0.0.1', port: 17000 } },
    });
    expect(Object.isFrozen(config.redisCluster)).toBe(true);
    expect(redisTargetEnv(config)).toEqual({
      REDIS_URL: CONFIG_DEFAULTS.REDIS_URL,
      REDIS_CLUSTER_NODES: '10.0.0.1:7000,redis-b.example:7001,[::1]:7002',
      REDIS_CLUSTER_NAT_MAP: '10.0.0.1:7000=127.0.0.1:17000',
    });
    expect(loadConfig(redisTargetEnv(config)).redisCluster).toEqual(config.redisCluster);
  });

  it.each([
    [{ REDIS_CLUSTER_NODES: '127.0.0.1' }, 'REDIS_CLUSTER_NODES', 'host:port'],
    [{ REDIS_CLUSTER_NODES: '127.0.0.1:0' }, 'REDIS_CLUSTER_NODES', 'port 1-65535'],
    [{ REDIS_CLUSTER_NODES: '127.0.0.1:70000' }, 'REDIS_CLUSTER_NODES', 'port 1-65535'],
    [{ REDIS_CLUSTER_NODES: 'a:1,a:1' }, 'REDIS_CLUSTER_NODES', 'listed twice'],
    [
      { REDIS_CLUSTER_NODES: Array.from({ length: 65 }, (_, i) => `h:${i + 1}`).join(',') },
      'REDIS_CLUSTER_NODES',
      'at most 64',
    ],
    [{ REDIS_CLUSTER_NAT_MAP: 'a:1=b:2' }, 'REDIS_CLUSTER_NAT_MAP', 'only applies with REDIS_CLUSTER_NODES'],
    [
      { REDIS_CLUSTER_NODES: 'a:1', REDIS_CLUSTER_NAT_MAP: 'a:1' },
      'REDIS_CLUSTER_NAT_MAP',
      'announced-host:port=reachable-host:port',
    ],
    [{ QUEUE_SHARDS: '0' }, 'QUEUE_SHARDS', 'between 1 and 64'],
    [{ QUEUE_SHARDS: '65' }, 'QUEUE_SHARDS', 'between 1 and 64'],
    [{ QUEUE_SHARDS: '3', QUEUE_SHARDS_CONSUMED: '3' }, 'QUEUE_SHARDS_CONSUMED', 'from 0 to 2'],
    [{ QUEUE_SHARDS: '3', QUEUE_SHARDS_CONSUMED: '1,1' }, 'QUEUE_SHARDS_CONSUMED', 'listed twice'],
    [{ QUEUE_SHARDS_CONSUMED: 'all' }, 'QUEUE_SHARDS_CONSUMED', 'from 0 to 0'],
  ])('refuses %j naming %s', (env, variable, detail) => {
    const err = configErrorOf(env);
    expect(err.variable).toBe(variable);
    expect(err.message).toContain(detail);
  });

  it('consumes every shard unless a subset is listed', () => {
    expect(loadConfig({ QUEUE_SHARDS: '3' }).queueShardsConsumed).toEqual([0, 1, 2]);
    expect(loadConfig({ QUEUE_SHARDS: '3', QUEUE_SHARDS_CONSUMED: '2, 0' }).queueShardsConsumed).toEqual([0, 2]);
  });
});

describe('URL helpers', () => {
  it('reads and replaces the database name', () => {
    expect(databaseName('postgresql://postgres@127.0.0.1:5432/transfers')).toBe('transfers');
    expect(withDatabase('postgresql://postgres@127.0.0.1:5432/transfers?sslmode=disable', 'other')).toBe(
      'postgresql://postgres@127.0.0.1:5432/other?sslmode=disable',
    );
    expect(() => databaseName('postgresql://127.0.0.1:5432/')).toThrow(ConfigError);
    expect(() => databaseName('postgresql://127.0.0.1:5432/a%22b')).toThrow(/DATABASE_URL/);
  });

  it('masks the password', () => {
    expect(redactUrl('postgresql://user:secret@db:5432/x')).toBe('postgresql://user:***@db:5432/x');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(redactUrl('::nonsense')).toBe('<unparseable url>');
  });
});

describe('a command started with a bad variable', () => {
  // DATABASE_URL points at a port where nothing listens: if validation let the bad variable
  // through, the command would fail on the connection instead, and these tests would see it.
  const UNREACHABLE_DB = 'postgresql://postgres@127.0.0.1:1/ft_never_created';

  it.each([
    ['REDIS_URL', 'not a url'],
    ['LOCK_TTL_MS', 'ten-seconds'],
  ])('%s=%j: one line on stderr naming it, exit code 1', async (variable, value) => {
    const result = await runSource('src/cli/migrate.ts', [], { DATABASE_URL: UNREACHABLE_DB, [variable]: value });
    expect(result.code, describeRun(result)).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(new RegExp(`^configuration error: ${variable}: .+\n$`));
    expect(result.stderr).not.toContain('    at ');
  });
});

describe("the relay's settings", () => {
  it('reads the re-send delay, the batch, the idle wait and the port; the outcomes queue follows QUEUE_NAME unless named', () => {
    expect(
      loadConfig({
        INTAKE_RESEND_AFTER_MS: '500',
        RELAY_BATCH_MAX: '1000',
        RELAY_IDLE_MS: '10',
        RELAY_METRICS_PORT: 'off',
        QUEUE_NAME: 'payments',
      }),
    ).toMatchObject({
      intakeResendAfterMs: 500,
      relayBatchMax: 1000,
      relayIdleMs: 10,
      relayMetricsPort: null,
      outcomesQueueName: 'payments-outcomes',
    });
    expect(loadConfig({ OUTCOMES_QUEUE_NAME: 'answers', RELAY_METRICS_PORT: '0' })).toMatchObject({
      outcomesQueueName: 'answers',
      relayMetricsPort: 0,
    });
  });
});
