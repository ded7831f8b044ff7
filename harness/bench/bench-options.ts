// The benchmark's options: what `npm run bench -- [flags]` accepts, its defaults, `--quick`
// sizes and limits, parsed once into a frozen object that every other bench file takes.
import { isAbsolute, join, resolve } from 'node:path';
import { integerFlag, parseFlags } from '../../src/cli/args.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { LOCK_BACKENDS, SETTINGS } from '../../src/config/settings.ts';
import { UsageError } from '../../src/errors.ts';
import { SEED_WALLETS_MAX } from '../../src/ledger/seed-wallets.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
import { COMPLETED_JOBS_KEPT_MAX } from '../../src/queue/job-options.ts';

/**
 * What the bench can measure; `low-rate` measures two cases (batching on and off), `e2e-intake`
 * two (producer transactions of 1 and of 100 requests), `e2e-payments` three (holds, their
 * captures and splits, in one database).
 */
export const MODES = [
  'db-ceiling',
  'db-ceiling-first',
  'db-ceiling-paired',
  'seed-design',
  'queue-ceiling',
  'e2e',
  'e2e-payments',
  'e2e-intake',
  'e2e-unbatched',
  'e2e-traced',
  'peer-graphile-worker',
  'hot',
  'low-rate',
] as const;
export type Mode = (typeof MODES)[number];

/**
 * The modes `--lock` runs once per lock service listed: the real workers on a queue filled
 * first, one case each. The other modes whose workers take locks (e2e-payments, e2e-intake,
 * low-rate) run on the default, Redis, and their ratios read e2e on Redis.
 */
export const LOCK_MODES = ['e2e', 'e2e-unbatched', 'e2e-traced', 'hot'] as const satisfies readonly Mode[];
export type LockMode = (typeof LOCK_MODES)[number];
/** `--lock`'s default: the worker's own default, LOCK_BACKEND=redis. */
export const DEFAULT_LOCKS: readonly LockBackendName[] = Object.freeze(['redis']);

/**
 * One measured thing in the results: every mode is one case, except low-rate and e2e-intake, two
 * each, and e2e-payments, three.
 */
export const CASES = [
  'db-ceiling',
  'db-ceiling-first',
  'db-ceiling-paired',
  'seed-design',
  'queue-ceiling',
  'e2e',
  'e2e-payments-hold',
  'e2e-payments-capture',
  'e2e-payments-split',
  'e2e-intake-1',
  'e2e-intake-100',
  'e2e-unbatched',
  'e2e-traced',
  'peer-graphile-worker',
  'hot',
  'low-rate',
  'low-rate-unbatched',
] as const;
export type CaseName = (typeof CASES)[number];

/**
 * The parts of e2e-payments, measured in this order in one database by one call of its runner:
 * the holds, then the capture of each (a capture needs its hold decided), then the splits.
 */
export const PAYMENT_PARTS = ['e2e-payments-hold', 'e2e-payments-capture', 'e2e-payments-split'] as const;
export type PaymentPart = (typeof PAYMENT_PARTS)[number];
/** The operation kind each part sends. */
export const PAYMENT_PART_KINDS: Readonly<Record<PaymentPart, 'hold' | 'capture' | 'split'>> = {
  'e2e-payments-hold': 'hold',
  'e2e-payments-capture': 'capture',
  'e2e-payments-split': 'split',
};
/** Legs of every split of e2e-payments: each credits another wallet than the payer. */
export const SPLIT_LEGS = 4;
/** Wallets e2e-payments needs: a payer and the split's legs, all distinct. */
export const PAYMENTS_WALLETS_MIN = SPLIT_LEGS + 1;

export const WORKERS_MAX = 16;
/**
 * Both reach a process as its WORKER_CONCURRENCY (--lanes as Graphile Worker's, through the same
 * configuration), so both take that setting's bound.
 */
export const CONCURRENCY_MAX = SETTINGS.WORKER_CONCURRENCY.max;
export const LANES_MAX = SETTINGS.WORKER_CONCURRENCY.max;
/** Every job must still be in BullMQ's completed set when the run is checked. */
export const TRANSFERS_MAX = COMPLETED_JOBS_KEPT_MAX;
export const RUNS_MAX = 20;
export const LOW_RATE_PER_S_MAX = 2_000;
export const LOW_RATE_S_MAX = 120;
export const BATCH_MAX_LIMIT = 10_000;
export const BATCH_WAIT_MS_MAX = 1_000;
export const DRAIN_TIMEOUT_S_MAX = 3_600;
export const RELAYS_MAX = 8;
/** The relay's own bound on RELAY_BATCH_MAX (src/config/settings.ts). */
export const RELAY_BATCH_MAX_LIMIT = 1_000;

export const BENCH_DEFAULTS = Object.freeze({
  workers: 2,
  // The worker's own default: the bench measures what a deployment gets unless told otherwise.
  concurrency: Number(SETTINGS.WORKER_CONCURRENCY.default),
  // The anchors' lanes: 32 per process, as since the anchors were fixed (issue 20). Each lane is a
  // PostgreSQL connection, so 2 × 64 Graphile Worker connections would not fit in 100.
  lanes: 32,
  transfers: 20_000,
  wallets: 10_000,
  runs: 3,
  lowRatePerS: 100,
  lowRateS: 5,
  drainTimeoutS: 1_800,
  relays: 1,
  relayBatchMax: 500,
});

/** `--quick`: every mode once on small sizes, to check that the bench works (CI). */
export const BENCH_QUICK = Object.freeze({
  transfers: 300,
  wallets: 200,
  runs: 1,
  lowRatePerS: 50,
  lowRateS: 2,
  drainTimeoutS: 180,
});

export const BENCH_USAGE =
  'npm run bench -- [--workers N] [--concurrency C] [--lanes L] [--transfers T] [--wallets W] [--runs R] ' +
  `[--modes ${MODES.join(',')}] [--quick] [--out DIR] [--low-rate-per-s N] [--low-rate-s S] ` +
  '[--batch-max N] [--batch-wait-ms MS] [--cpu-prof] [--cpu-prof-dir DIR] [--drain-timeout-s S] ' +
  `[--relays N] [--relay-batch-max N] [--lock ${LOCK_BACKENDS.join(',')}]`;

export interface BenchOptions {
  readonly workers: number;
  /**
   * Jobs in flight per BullMQ worker process (WORKER_CONCURRENCY): the project's workers and
   * queue-ceiling's no-op workers; workers × concurrency is the total.
   */
  readonly concurrency: number;
  /**
   * Per process, the lanes of the one-commit-per-transfer anchors: connections of db-ceiling,
   * db-ceiling-first, db-ceiling-paired and seed-design, and Graphile Worker's concurrency.
   */
  readonly lanes: number;
  readonly transfers: number;
  readonly wallets: number;
  readonly runs: number;
  readonly modes: readonly Mode[];
  readonly quick: boolean;
  /** Folder of the results JSON and SVG. */
  readonly out: string;
  readonly lowRatePerS: number;
  readonly lowRateS: number;
  /** TRANSFER_BATCH_MAX for the batched cases; null leaves the worker's default. */
  readonly batchMax: number | null;
  /** TRANSFER_BATCH_WAIT_MS for the batched cases; null leaves the worker's default. */
  readonly batchWaitMs: number | null;
  /** Folder for `--cpu-prof` profiles of the real worker processes; null: no profiling. */
  readonly cpuProfDir: string | null;
  readonly drainTimeoutS: number;
  /** Relay processes of the intake cases. */
  readonly relays: number;
  /** RELAY_BATCH_MAX of those relays. */
  readonly relayBatchMax: number;
  /** The lock services each case of LOCK_MODES runs on, one case each, in LOCK_BACKENDS order. */
  readonly locks: readonly LockBackendName[];
}

export const DEFAULT_OUT_DIR = join(PROJECT_ROOT, 'bench', 'results');

export function bounded(raw: string | undefined, flag: string, min: number, max: number, fallback: number): number {
  return raw === undefined ? fallback : integerFlag(raw, flag, min, max);
}

export function parseModes(raw: string | undefined): Mode[] {
  if (raw === undefined || raw === 'all') return [...MODES];
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0) throw new UsageError(`--modes names no mode; expected some of ${MODES.join(', ')}`);
  for (const name of names) {
    if (!(MODES as readonly string[]).includes(name)) {
      throw new UsageError(`unknown mode ${JSON.stringify(name)} in --modes; expected ${MODES.join(', ')} or all`);
    }
  }
  // Canonical order, no repeats: the runs interleave modes the same way however they were listed.
  return MODES.filter((m) => names.includes(m));
}

/**
 * `--lock a,b`: the lock services, in LOCK_BACKENDS order (so every run interleaves them alike).
 * Refused: an unknown name, a repeat, an empty list, and `--lock` when no mode of LOCK_MODES runs.
 */
export function parseLocks(raw: string | undefined, modes: readonly Mode[]): LockBackendName[] {
  if (raw === undefined) return [...DEFAULT_LOCKS];
  const names = raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (names.length === 0)
    throw new UsageError(`--lock names no lock service; expected some of ${LOCK_BACKENDS.join(', ')}`);
  for (const [index, name] of names.entries()) {
    if (!(LOCK_BACKENDS as readonly string[]).includes(name))
      throw new UsageError(
        `unknown lock service ${JSON.stringify(name)} in --lock; expected ${LOCK_BACKENDS.join(', ')}`,
      );
    if (names.indexOf(name) !== index) throw new UsageError(`--lock names ${name} twice`);
  }
  if (!modes.some((m) => (LOCK_MODES as readonly Mode[]).includes(m)))
    throw new UsageError(
      `--lock applies to ${LOCK_MODES.join(', ')}, and --modes has none of them (${modes.join(', ')})`,
    );
  return LOCK_BACKENDS.filter((b) => names.includes(b));
}

/** The flags of BENCH_USAGE, as node:util's parseArgs takes them. */
const BENCH_FLAGS = {
  workers: { type: 'string' },
  concurrency: { type: 'string' },
  lanes: { type: 'string' },
  transfers: { type: 'string' },
  wallets: { type: 'string' },
  runs: { type: 'string' },
  modes: { type: 'string' },
  quick: { type: 'boolean' },
  out: { type: 'string' },
  'low-rate-per-s': { type: 'string' },
  'low-rate-s': { type: 'string' },
  'batch-max': { type: 'string' },
  'batch-wait-ms': { type: 'string' },
  'cpu-prof': { type: 'boolean' },
  'cpu-prof-dir': { type: 'string' },
  'drain-timeout-s': { type: 'string' },
  relays: { type: 'string' },
  'relay-batch-max': { type: 'string' },
  lock: { type: 'string' },
} as const;

/** Where CPU profiles go: --cpu-prof-dir, else `profiles/` in the output folder with --cpu-prof, else nowhere. */
function cpuProfDirOf(dir: string | undefined, profile: boolean | undefined, out: string): string | null {
  if (dir !== undefined) return isAbsolute(dir) ? dir : resolve(dir);
  return profile === true ? join(out, 'profiles') : null;
}

export function parseBenchArgs(argv: string[]): BenchOptions {
  const { values } = parseFlags(argv, BENCH_FLAGS, BENCH_USAGE);
  const quick = values.quick === true;
  const sizes = quick ? { ...BENCH_DEFAULTS, ...BENCH_QUICK } : BENCH_DEFAULTS;
  const out = values.out === undefined ? DEFAULT_OUT_DIR : resolve(values.out);
  const cpuProfDir = cpuProfDirOf(values['cpu-prof-dir'], values['cpu-prof'], out);
  const modes = parseModes(values.modes);

  const options: BenchOptions = {
    workers: bounded(values.workers, '--workers', 1, WORKERS_MAX, sizes.workers),
    concurrency: bounded(values.concurrency, '--concurrency', 1, CONCURRENCY_MAX, sizes.concurrency),
    lanes: bounded(values.lanes, '--lanes', 1, LANES_MAX, sizes.lanes),
    transfers: bounded(values.transfers, '--transfers', 1, TRANSFERS_MAX, sizes.transfers),
    wallets: bounded(values.wallets, '--wallets', 2, SEED_WALLETS_MAX, sizes.wallets),
    runs: bounded(values.runs, '--runs', 1, RUNS_MAX, sizes.runs),
    modes,
    quick,
    out,
    lowRatePerS: bounded(values['low-rate-per-s'], '--low-rate-per-s', 1, LOW_RATE_PER_S_MAX, sizes.lowRatePerS),
    lowRateS: bounded(values['low-rate-s'], '--low-rate-s', 1, LOW_RATE_S_MAX, sizes.lowRateS),
    batchMax:
      values['batch-max'] === undefined ? null : bounded(values['batch-max'], '--batch-max', 1, BATCH_MAX_LIMIT, 1),
    batchWaitMs:
      values['batch-wait-ms'] === undefined
        ? null
        : bounded(values['batch-wait-ms'], '--batch-wait-ms', 0, BATCH_WAIT_MS_MAX, 0),
    cpuProfDir,
    drainTimeoutS: bounded(
      values['drain-timeout-s'],
      '--drain-timeout-s',
      10,
      DRAIN_TIMEOUT_S_MAX,
      sizes.drainTimeoutS,
    ),
    relays: bounded(values.relays, '--relays', 1, RELAYS_MAX, BENCH_DEFAULTS.relays),
    relayBatchMax: bounded(
      values['relay-batch-max'],
      '--relay-batch-max',
      1,
      RELAY_BATCH_MAX_LIMIT,
      BENCH_DEFAULTS.relayBatchMax,
    ),
    locks: parseLocks(values.lock, modes),
  };
  if (options.modes.includes('e2e-payments') && options.wallets < PAYMENTS_WALLETS_MIN) {
    throw new UsageError(
      `e2e-payments splits to ${SPLIT_LEGS} wallets besides the payer: --wallets must be at least ` +
        `${PAYMENTS_WALLETS_MIN}, or leave e2e-payments out of --modes`,
    );
  }
  return Object.freeze(options);
}

/** The cases a list of modes measures, in order. */
export function casesOf(modes: readonly Mode[]): CaseName[] {
  return modes.flatMap((m): CaseName[] => {
    if (m === 'low-rate') return ['low-rate', 'low-rate-unbatched'];
    if (m === 'e2e-intake') return ['e2e-intake-1', 'e2e-intake-100'];
    if (m === 'e2e-payments') return [...PAYMENT_PARTS];
    return [m];
  });
}

export function isPaymentPart(caseName: CaseName): caseName is PaymentPart {
  return (PAYMENT_PARTS as readonly string[]).includes(caseName);
}

/**
 * The cases in the groups that one runner call measures, in order: one case each, except the
 * parts of e2e-payments, one group (they share a database, and a capture needs its hold). A run
 * reverses the groups, never the parts inside one.
 */
export function caseGroupsOf(cases: readonly CaseName[]): CaseName[][] {
  const groups: CaseName[][] = [];
  let payments: CaseName[] | null = null;
  for (const c of cases) {
    if (!isPaymentPart(c)) {
      groups.push([c]);
      continue;
    }
    if (payments === null) {
      payments = [];
      groups.push(payments);
    }
    payments.push(c);
  }
  return groups;
}

export function isLockCase(caseName: CaseName): caseName is LockMode {
  return (LOCK_MODES as readonly string[]).includes(caseName);
}

/** What one runner call measures: its cases (a group of caseGroupsOf) on one lock service. */
export interface LockedGroup {
  readonly cases: readonly CaseName[];
  readonly lock: LockBackendName;
}

/**
 * The groups of a run with their lock service: a case of LOCK_MODES once per service of
 * `locks`, side by side (so the runs' alternating order interleaves them alike); every other
 * group once, on Redis.
 */
export function lockedGroupsOf(groups: readonly CaseName[][], locks: readonly LockBackendName[]): LockedGroup[] {
  return groups.flatMap((cases): LockedGroup[] => {
    const first = cases[0];
    if (first === undefined || !isLockCase(first)) return [{ cases, lock: 'redis' }];
    return locks.map((lock) => ({ cases, lock }));
  });
}
