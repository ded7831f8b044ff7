// The project's one whole-number parser (src/config/bounds.ts) and the callers that word its
// faults their own way: the configuration (ConfigError), the command-line flags of the commands
// and the harnesses (UsageError), and the options of components (RangeError). Every caller
// refuses what the strictest of the parsers it replaced refused: signs, points, exponents,
// spaces, hex and (now everywhere) leading zeros.
import { describe, expect, it } from 'vitest';
import { parseBenchArgs } from '../../harness/bench/bench-options.ts';
import { CHAOS_QUEUE_SHARDS_MAX, parseChaosArgs } from '../../harness/chaos/chaos-options.ts';
import { LocalRedisCluster } from '../../harness/services/local-redis-cluster.ts';
import { integerFlag } from '../../src/cli/args.ts';
import { parseWholeNumber, type WholeNumberFault, wholeNumberIn } from '../../src/config/bounds.ts';
import { loadConfig } from '../../src/config/config.ts';
import { ConfigError, UsageError } from '../../src/errors.ts';

/** Texts that are not a whole number written the one way, whatever the range. */
const NOT_WHOLE = [
  '',
  ' ',
  'abc',
  ' 5',
  '5 ',
  '5\n',
  '+5',
  '-5',
  '-0',
  '5.0',
  '1.5',
  '.5',
  '1e3',
  '0x10',
  '0b1',
  '05',
  '00',
  '1_000',
  '1,000',
  'Infinity',
  'NaN',
  '５',
];

function faultOf(run: () => unknown): WholeNumberFault {
  let fault: WholeNumberFault | undefined;
  try {
    run();
  } catch (err) {
    fault = (err as { fault?: WholeNumberFault }).fault;
  }
  if (fault === undefined) throw new Error('no fault was raised');
  return fault;
}

class Refused extends Error {
  constructor(readonly fault: WholeNumberFault) {
    super(fault.problem);
  }
}
const refused = (fault: WholeNumberFault) => new Refused(fault);

describe('parseWholeNumber', () => {
  it('reads canonical decimal digits within the range, both ends included', () => {
    expect(parseWholeNumber('0', 'x', 0, 10)).toBe(0);
    expect(parseWholeNumber('7', 'x', 0, 10)).toBe(7);
    expect(parseWholeNumber('10', 'x', 0, 10)).toBe(10);
    expect(parseWholeNumber('100', 'x', 100, 600_000)).toBe(100);
    expect(parseWholeNumber('600000', 'x', 100, 600_000)).toBe(600_000);
    expect(parseWholeNumber(String(Number.MAX_SAFE_INTEGER), 'x', 0, Number.MAX_SAFE_INTEGER)).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });

  it.each(NOT_WHOLE)('refuses %j as not a whole number', (text) => {
    expect(faultOf(() => parseWholeNumber(text, 'x', 0, 1_000, refused))).toEqual({
      name: 'x',
      min: 0,
      max: 1_000,
      given: text,
      problem: 'not-whole',
    });
  });

  it.each([
    ['99', 100, 200],
    ['201', 100, 200],
    ['0', 1, 64],
    ['9'.repeat(400), 0, 600_000],
    ['9007199254740993', 0, Number.MAX_SAFE_INTEGER],
  ])('refuses %s as out of %d..%d', (text, min, max) => {
    expect(faultOf(() => parseWholeNumber(text, 'x', min, max, refused)).problem).toBe('out-of-range');
  });

  it('throws a RangeError naming the value and its range by default', () => {
    expect(() => parseWholeNumber('65', 'shards', 1, 64)).toThrow(
      new RangeError('shards must be a whole number between 1 and 64, got 65'),
    );
  });
});

describe('wholeNumberIn', () => {
  it('passes a whole number in range through', () => {
    expect(wholeNumberIn('batchMax', 1, 1, 1_000)).toBe(1);
    expect(wholeNumberIn('batchMax', 1_000, 1, 1_000)).toBe(1_000);
  });

  it.each([1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53])('refuses %d as not whole', (value) => {
    expect(faultOf(() => wholeNumberIn('n', value, 0, Number.MAX_SAFE_INTEGER, refused)).problem).toBe('not-whole');
  });

  it('refuses a number outside the range with a RangeError that names it', () => {
    expect(() => wholeNumberIn('batchMax', 0, 1, 1_000)).toThrow(
      new RangeError('batchMax must be a whole number between 1 and 1000, got 0'),
    );
    expect(() => wholeNumberIn('batchMax', -1, 1, 1_000)).toThrow(RangeError);
  });
});

describe('the callers keep their own errors', () => {
  it('configuration: a ConfigError naming the variable and its range', () => {
    // An empty variable reads as its default; every other text is refused.
    for (const text of NOT_WHOLE.filter((t) => t !== '')) {
      expect(() => loadConfig({ QUEUE_SHARDS: text }), text).toThrow(ConfigError);
      expect(() => loadConfig({ QUEUE_SHARDS: text }), text).toThrow(
        `QUEUE_SHARDS: expected a whole number between 1 and 64, got ${JSON.stringify(text)}`,
      );
    }
    expect(() => loadConfig({ QUEUE_SHARDS: '65' })).toThrow(
      'QUEUE_SHARDS: expected a whole number between 1 and 64, got 65',
    );
    expect(() => loadConfig({ METRICS_PORT: '09464' })).toThrow(/^METRICS_PORT: expected a port between 0/);
    expect(() => loadConfig({ QUEUE_SHARDS: '4', QUEUE_SHARDS_CONSUMED: '01' })).toThrow(
      'QUEUE_SHARDS_CONSUMED: expected shard indexes from 0 to 3 (QUEUE_SHARDS=4), got "01"',
    );
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'a:+1' })).toThrow(/^REDIS_CLUSTER_NODES: expected host:port/);
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'a:01' })).toThrow(/^REDIS_CLUSTER_NODES: expected host:port/);
  });

  it('command-line flags: a UsageError naming the flag, with its range when it has one', () => {
    expect(integerFlag('12', '--seed')).toBe(12);
    expect(() => integerFlag('1.5', '--seed')).toThrow(new UsageError('--seed must be a whole number, got "1.5"'));
    expect(() => integerFlag('07', '--seed')).toThrow(UsageError);
    expect(() => integerFlag('x', '--workers', 1, 16)).toThrow(
      '--workers must be a whole number from 1 to 16, got "x"',
    );
    expect(() => integerFlag('17', '--workers', 1, 16)).toThrow('--workers must be from 1 to 16, got 17');
  });

  it('the bench and the chaos harness read their numeric flags with it', () => {
    for (const text of NOT_WHOLE) {
      expect(() => parseBenchArgs(['--runs', text]), text).toThrow(UsageError);
      expect(() => parseChaosArgs(['--workers', text]), text).toThrow(UsageError);
    }
    expect(() => parseChaosArgs(['--workers', '17'])).toThrow('--workers must be from 1 to 16, got 17');
  });

  it("the chaos harness takes QUEUE_SHARDS' own bound for --queue-shards", () => {
    expect(CHAOS_QUEUE_SHARDS_MAX).toBe(64);
    expect(parseChaosArgs(['--queue-shards', '64']).options.queueShards).toBe(64);
    expect(() => parseChaosArgs(['--queue-shards', '65'])).toThrow('--queue-shards must be from 1 to 64, got 65');
  });

  it("components' options: a RangeError (the private cluster refuses before it starts anything)", async () => {
    await expect(LocalRedisCluster.start({ dir: '/nonexistent', masters: 0 })).rejects.toThrow(
      new RangeError('masters must be a whole number between 1 and 16, got 0'),
    );
    await expect(LocalRedisCluster.start({ dir: '/nonexistent', masters: 1.5 })).rejects.toThrow(RangeError);
  });
});
