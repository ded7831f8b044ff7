// The bench's flags: defaults, --quick sizes, the modes list, and clear errors for bad values.
import { describe, expect, it } from 'vitest';
import {
  BENCH_DEFAULTS,
  BENCH_QUICK,
  caseGroupsOf,
  casesOf,
  LOCK_MODES,
  lockedGroupsOf,
  MODES,
  PAYMENT_PARTS,
  parseBenchArgs,
} from '../../../harness/bench/bench-options.ts';
import { UsageError } from '../../../src/errors.ts';

describe('bench options', () => {
  it('defaults to every mode at the issue sizes, batching left to the worker', () => {
    const o = parseBenchArgs([]);
    expect(o).toMatchObject({
      workers: 2,
      concurrency: 64,
      lanes: 32,
      transfers: 20_000,
      wallets: 10_000,
      runs: 3,
      quick: false,
    });
    expect(o).toMatchObject({
      batchMax: null,
      batchWaitMs: null,
      cpuProfDir: null,
      lowRatePerS: BENCH_DEFAULTS.lowRatePerS,
    });
    expect(o.modes).toEqual([...MODES]);
    expect(casesOf(o.modes)).toContain('low-rate-unbatched');
    expect(o).toMatchObject({ relays: 1, relayBatchMax: 500 });
  });

  it('e2e-intake is two cases, producer transactions of 1 and of 100; its relays are set by flags', () => {
    const o = parseBenchArgs(['--modes', 'e2e-intake,e2e', '--relays', '2', '--relay-batch-max', '1000']);
    expect(casesOf(o.modes)).toEqual(['e2e', 'e2e-intake-1', 'e2e-intake-100']);
    expect(o).toMatchObject({ relays: 2, relayBatchMax: 1_000 });
  });

  it('e2e-payments is three cases, holds, captures and splits, in every run by default', () => {
    expect(casesOf(parseBenchArgs([]).modes)).toEqual(expect.arrayContaining([...PAYMENT_PARTS]));
    const o = parseBenchArgs(['--modes', 'e2e-payments,e2e']);
    expect(casesOf(o.modes)).toEqual(['e2e', 'e2e-payments-hold', 'e2e-payments-capture', 'e2e-payments-split']);
  });

  it('refuses too few wallets for a split of four legs, only when e2e-payments runs', () => {
    expect(() => parseBenchArgs(['--wallets', '4'])).toThrow(/--wallets must be at least 5/);
    expect(() => parseBenchArgs(['--modes', 'e2e-payments', '--wallets', '4'])).toThrow(UsageError);
    expect(parseBenchArgs(['--modes', 'e2e-payments', '--wallets', '5']).wallets).toBe(5);
    expect(parseBenchArgs(['--modes', 'e2e', '--wallets', '2']).wallets).toBe(2);
  });

  it('--quick shrinks the sizes and runs once; explicit flags still win', () => {
    const o = parseBenchArgs(['--quick', '--transfers', '500']);
    expect(o).toMatchObject({ quick: true, runs: 1, wallets: BENCH_QUICK.wallets, transfers: 500, workers: 2 });
  });

  it('takes a subset of modes in canonical order, and the profiling folder', () => {
    const o = parseBenchArgs(['--modes', 'e2e,db-ceiling,e2e', '--cpu-prof', '--out', '/tmp/x']);
    expect(o.modes).toEqual(['db-ceiling', 'e2e']);
    expect(o.cpuProfDir).toBe('/tmp/x/profiles');
    expect(parseBenchArgs(['--cpu-prof-dir', '/tmp/p']).cpuProfDir).toBe('/tmp/p');
  });

  it('refuses bad values with a message naming the flag', () => {
    const bad: [string[], RegExp][] = [
      [['--workers', '0'], /--workers must be from 1 to 16/],
      [['--concurrency', 'eight'], /--concurrency must be a whole number/],
      [['--lanes', '257'], /--lanes must be from 1 to 256/],
      [['--transfers', '100001'], /--transfers must be from 1 to 100000/],
      [['--wallets', '1'], /--wallets must be from 2/],
      [['--runs=-1'], /--runs must be a whole number/],
      [['--modes', 'e2e,fast'], /unknown mode "fast" in --modes/],
      [['--modes', ','], /--modes names no mode/],
      [['--batch-max', '0'], /--batch-max must be from 1/],
      [['--relays', '9'], /--relays must be from 1 to 8/],
      [['--relay-batch-max', '1001'], /--relay-batch-max must be from 1 to 1000/],
      [['--frobnicate'], /Unknown option '--frobnicate'/],
      [['extra'], /unexpected argument "extra"/],
    ];
    for (const [argv, message] of bad) {
      expect(() => parseBenchArgs(argv), argv.join(' ')).toThrow(UsageError);
      expect(() => parseBenchArgs(argv), argv.join(' ')).toThrow(message);
    }
  });

  describe('--lock', () => {
    it('defaults to Redis alone, as the bench ran before it', () => {
      expect(parseBenchArgs([]).locks).toEqual(['redis']);
      expect(parseBenchArgs(['--modes', 'db-ceiling']).locks).toEqual(['redis']);
    });

    it('takes the lock services in canonical order, however they were listed', () => {
      expect(parseBenchArgs(['--modes', 'e2e', '--lock', 'postgres, redis,etcd']).locks).toEqual([
        'redis',
        'etcd',
        'postgres',
      ]);
      expect(parseBenchArgs(['--lock', 'etcd']).locks).toEqual(['etcd']);
    });

    it('refuses an unknown service, a repeat, an empty list, and a list with no lock-taking mode to run', () => {
      const bad: [string[], RegExp][] = [
        [['--lock', 'redis,zookeeper'], /unknown lock service "zookeeper" in --lock; expected redis, etcd, postgres/],
        [['--lock', 'redis,etcd,redis'], /--lock names redis twice/],
        [['--lock', ' , '], /--lock names no lock service/],
        [['--modes', 'db-ceiling,queue-ceiling', '--lock', 'redis,etcd'], /--lock applies to e2e, .*none of them/],
        [['--modes', 'e2e-payments', '--lock', 'redis'], /--lock applies to/],
      ];
      for (const [argv, message] of bad) {
        expect(() => parseBenchArgs(argv), argv.join(' ')).toThrow(UsageError);
        expect(() => parseBenchArgs(argv), argv.join(' ')).toThrow(message);
      }
    });

    it('runs each lock-taking case once per service, side by side; every other case once, on Redis', () => {
      const groups = caseGroupsOf(casesOf(['db-ceiling', 'e2e', 'e2e-payments', 'hot']));
      const locked = lockedGroupsOf(groups, ['redis', 'etcd', 'postgres']);
      expect(locked.map((g) => `${g.cases.join('+')}@${g.lock}`)).toEqual([
        'db-ceiling@redis',
        'e2e@redis',
        'e2e@etcd',
        'e2e@postgres',
        `${PAYMENT_PARTS.join('+')}@redis`,
        'hot@redis',
        'hot@etcd',
        'hot@postgres',
      ]);
      // Redis alone: the groups as before.
      expect(lockedGroupsOf(groups, ['redis']).map((g) => g.cases)).toEqual(groups);
      expect(LOCK_MODES).toEqual(['e2e', 'e2e-unbatched', 'e2e-traced', 'hot']);
    });
  });
});
