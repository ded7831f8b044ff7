// The figures of a run and their two renderings: report.json (for scripts and the 10-seed
// table) and report.md (for people). Also the verdict: every invariant holds, or — for a
// negative control — the violation it exists to provoke was detected.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SETTINGS } from '../../src/config/settings.ts';
import type { IntakeProducerFigures } from './chaos-intake.ts';
import { type LockMeasures, lockBackendLines } from './chaos-lock.ts';
import type { ChaosOptions, FaultKind } from './chaos-options.ts';
import { ASYNC_STANDBY, DIRECT_ENQUEUE, faultKindsOf } from './chaos-options.ts';
import type { ChaosWorkload } from './chaos-workload.ts';
import type { CheckResult } from './check-result.ts';
import { FAULT_AFTERMATH_MS, RECOVERY_WINDOW_MS } from './fault-load.ts';
import type { FaultRecord } from './faults.ts';
import type { FeedReaderFigures } from './feed-readers.ts';
import type { FinalJob } from './final-job.ts';
import type { IntakeFigures } from './intake-figures.ts';
import { TERMINAL_OUTCOME_CHECK } from './operation-checks.ts';
import type { PaymentFigures } from './payment-figures.ts';
import { BLACKHOLE_POLL_MS, type BlackholeFigures } from './pg-blackhole.ts';

export type Expectation = 'all-hold' | 'violation-detected' | 'money-holds';

export interface Verdict {
  readonly expectation: Expectation;
  readonly expectationText: string;
  readonly pass: boolean;
  readonly detail: string;
}

export interface RunFigures {
  readonly seed: number;
  readonly startedAt: string;
  readonly command: string;
  readonly mode: {
    readonly unsafe: string | null;
    readonly apply: string;
    readonly redis?: string;
    readonly queueShards?: number;
    /** The workers reached PostgreSQL through a PgBouncer in transaction mode (--pgbouncer). */
    readonly pgbouncer?: boolean;
    /** `ha`: the database was a pg_auto_failover formation behind one endpoint (--postgres ha). */
    readonly postgres?: string;
  };
  readonly options: Record<string, unknown>;
  readonly verdict: Verdict;
  readonly durationMs: { total: number; setup: number; faultPhase: number; drain: number; check: number };
  readonly messages: {
    sent: number;
    operations: number;
    originals: number;
    duplicates: number;
    conflicts: number;
    invalid: number;
    /** Messages of both-doors pairs (two per operation; intake runs). */
    bothDoors: number;
  };
  readonly jobs: {
    completed: number;
    failed: number;
    failedValid: number;
    otherState: number;
    /** Jobs in the queue that the harness has no record of sending (a producer command resent after a Redis restart). */
    unrecorded: number;
    /** Times a job was started by a worker (attemptsStarted summed). */
    deliveries: number;
    /** Attempts that failed and were retried (attemptsMade - 1, summed). */
    retries: number;
    /** Starts that did not end an attempt: busy-lock deferrals and stalled jobs re-run. */
    deferralsAndStalls: number;
    /** The most attempts one job made: against the product's JOB_ATTEMPTS_MAX (the harness gives its jobs more). */
    attemptsMadeMax?: number;
  };
  /** From reconcile(): what the ledger holds at the end. */
  readonly ledger: {
    wallets: number;
    balanceSum: string;
    openingSum: string;
    transfersApplied: number;
    transfersRejected: number;
    ledgerEntries: number;
  };
  /** What the completed jobs answered (a delivery whose answer was lost and re-run answers `duplicate`). */
  readonly answers: Record<string, number>;
  /** The workers' counters summed over the run (src/metrics/counter-aggregate.ts), under their short names. */
  readonly metrics: Record<string, number>;
  /** Enqueue calls the harness's producer repeated after an error (a master failing over). */
  readonly producerRetries?: number;
  /** Events counted in the workers' logs: what the counters do not split (a lease lost while the decision was in flight). */
  readonly workerLogEvents: Record<string, number>;
  readonly faults: {
    scheduled: number;
    injected: number;
    errors: number;
    byKind: Record<string, number>;
    /** Injected faults whose window met no transfer in flight (they tested nothing). */
    idle: number;
    list: readonly FaultRecord[];
  };
  readonly latencyMs: { p50: number; p95: number; p99: number; max: number };
  readonly appliedPerSecond: { mean: number; peak: number };
  /** The lock service's own measures (runs before `--lock` have none: their backend was Redis). */
  readonly lockBackend?: LockMeasures;
  readonly checks: readonly CheckResult[];
  readonly proxies: Record<string, { connections: number; resets: number; refused: number }>;
  /** Intake runs only. */
  readonly intake?: RunIntakeFigures;
  /** Payments runs: decided records per kind and outcome, holds expired and left active. */
  readonly payments?: PaymentFigures;
}

export interface RunIntakeFigures extends IntakeFigures {
  /** The intake producer's transactions (null with direct-enqueue). */
  readonly producerFigures: IntakeProducerFigures | null;
  readonly relayKills: number;
  readonly relays: number;
  readonly resendAfterMs: number;
  /** The relays' DB_POOL_MAX (null: their default). */
  readonly relayPoolMax: number | null;
  /** What the outcome feed's readers did during the run (feed-readers.ts). */
  readonly feedReaders: FeedReaderFigures | null;
}

/** What the negative controls of a payment rule must show, by mode. */
const PAYMENT_CONTROLS: Partial<Record<string, string>> = {
  'double-capture':
    "negative control: the hold's state check is off, so captures and voids of ended holds apply; " +
    'the checker must detect a hold ended twice (a money or exactly-once violation)',
  'no-credit-limit':
    'negative control: debits are not held to their credit limit (and the CHECK is dropped); ' +
    'the checker must detect a balance below minus its limit or a credit wallet applying too many debits',
  'no-wallet-status':
    "negative control: wallets' statuses refuse nothing (and the closed wallets' CHECK is dropped); " +
    'the checker must detect a frozen or closed wallet debited or credited',
  'refund-unbounded': 'negative control: the refund bound is off; the checker must detect refunds above their original',
};

export function expectationOf(options: Pick<ChaosOptions, 'unsafe' | 'apply'>): {
  expectation: Expectation;
  text: string;
} {
  if (options.unsafe === DIRECT_ENQUEUE) {
    return {
      expectation: 'violation-detected',
      text:
        'negative control: producers add to BullMQ straight, lossy failovers hit the queue masters; ' +
        'the checker must report acknowledged transfers lost (never decided)',
    };
  }
  if (options.unsafe === ASYNC_STANDBY) {
    return {
      expectation: 'violation-detected',
      text:
        'negative control: the formation commits without waiting for a standby and its WAL senders are frozen ' +
        'before each pg-failover; the checker must report acknowledged decisions lost, by operation id',
    };
  }
  if (options.unsafe === 'no-idempotency') {
    return {
      expectation: 'violation-detected',
      text: 'negative control: duplicates re-apply; the checker must detect an exactly-once or money violation',
    };
  }
  const payment = options.unsafe === null ? undefined : PAYMENT_CONTROLS[options.unsafe];
  if (payment !== undefined) return { expectation: 'violation-detected', text: payment };
  if (options.apply === 'naive' && options.unsafe === 'no-fencing') {
    return {
      expectation: 'violation-detected',
      text: 'negative control: a frozen lock holder writes a stale balance; the checker must detect a money violation',
    };
  }
  if (options.unsafe === 'no-fencing') {
    return {
      expectation: 'money-holds',
      text: 'control: without the fence the one-statement decision still keeps money and exactly-once (the fence-order checks may break)',
    };
  }
  if (options.unsafe === 'no-lock') {
    return {
      expectation: 'all-hold',
      text: 'control: without mutual exclusion the fenced, idempotent decision keeps every invariant',
    };
  }
  return { expectation: 'all-hold', text: 'every invariant holds' };
}

export function judge(options: Pick<ChaosOptions, 'unsafe' | 'apply'>, checks: readonly CheckResult[]): Verdict {
  const { expectation, text } = expectationOf(options);
  const failed = checks.filter((c) => !c.ok);
  const names = (list: readonly CheckResult[]) =>
    list.map((c) => `${c.name} (${c.violations}${c.capped ? '+' : ''})`).join('; ');
  // In the async-standby control a lost commit leaves its completed job without a record: the
  // terminal-outcome check fails on exactly the lost operations, part of what is detected.
  const liveness = failed.filter(
    (c) =>
      (c.group === 'queue' || c.group === 'input') &&
      !(options.unsafe === ASYNC_STANDBY && c.name === TERMINAL_OUTCOME_CHECK),
  );
  if (expectation === 'violation-detected') {
    const detected = failed.filter((c) => c.group === 'money' || c.group === 'exactly-once');
    if (detected.length === 0)
      return {
        expectation,
        expectationText: text,
        pass: false,
        detail: 'NOT DETECTED: every money and exactly-once check passed',
      };
    if (liveness.length > 0)
      return {
        expectation,
        expectationText: text,
        pass: false,
        detail: `detected, but the run was also broken: ${names(liveness)}`,
      };
    return {
      expectation,
      expectationText: text,
      pass: true,
      detail: `detected by ${detected.length} check(s): ${names(detected)}`,
    };
  }
  const relevant = expectation === 'money-holds' ? failed.filter((c) => c.group !== 'fence') : failed;
  if (relevant.length > 0)
    return { expectation, expectationText: text, pass: false, detail: `violated: ${names(relevant)}` };
  const fence = failed.filter((c) => c.group === 'fence');
  return {
    expectation,
    expectationText: text,
    pass: true,
    detail:
      fence.length > 0
        ? `money and exactly-once hold; fence checks broke as allowed: ${names(fence)}`
        : 'every invariant holds',
  };
}

/** The payments' section: decided records per kind and outcome, and the holds' ends. */
export function paymentLines(p: PaymentFigures): string[] {
  const lines = ['## Payments', '', '| kind | outcome | operations |', '| --- | --- | ---: |'];
  for (const [kind, outcomes] of Object.entries(p.byKind).sort(([a], [b]) => a.localeCompare(b))) {
    for (const [outcome, n] of Object.entries(outcomes).sort(([a], [b]) => a.localeCompare(b)))
      lines.push(`| ${kind} | ${outcome} | ${n} |`);
  }
  lines.push(
    '',
    `Holds expired (released by the sweep or by a late capture or void): ${p.holdsExpired}; ` +
      `active at the check: ${p.holdsActive} (anchors: ${p.anchorsActive}).`,
    '',
  );
  if (p.creditWallets.length > 0) {
    lines.push(
      '| credit wallet | limit | debit amount | debits sent | applied | expected ⌊limit / amount⌋ | refused |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...p.creditWallets.map(
        (c) =>
          `| ${c.wallet} | ${c.limit} | ${c.amount} | ${c.debits} | ${c.applied} | ${c.expected} | ${c.rejected} |`,
      ),
      '',
    );
  }
  return lines;
}

/** One line of counts per kind, for the console: `hold 40/3r capture 20/15r ...`. */
export function paymentSummary(p: PaymentFigures): string {
  return `${Object.entries(p.byKind)
    .map(([kind, o]) => {
      const applied = o.applied ?? 0;
      const rejected = Object.entries(o)
        .filter(([k]) => k !== 'applied')
        .reduce((t, [, n]) => t + n, 0);
      return `${kind} ${applied}a/${rejected}r`;
    })
    .join(' ')} expired ${p.holdsExpired}${creditSummary(p)}`;
}

/** Each credit wallet's debits applied of those expected, and each credit_limit outcome: ` credit cw1 12/12 ...`. */
function creditSummary(p: PaymentFigures): string {
  const wallets = p.creditWallets.map((c) => ` ${c.wallet} ${c.applied}/${c.expected}`).join('');
  const limits = Object.entries(p.byKind.credit_limit ?? {})
    .map(([outcome, n]) => ` ${outcome} ${n}`)
    .join('');
  return wallets === '' && limits === ''
    ? ''
    : ` | credit wallets applied/expected:${wallets} | credit_limit:${limits}`;
}

/** Counts the structured events of interest in the workers' pino logs. */
export function countWorkerLogEvents(logDir: string): Record<string, number> {
  const counts: Record<string, number> = {};
  if (!existsSync(logDir)) return counts;
  for (const file of readdirSync(logDir).filter((f) => f.endsWith('.log'))) {
    for (const line of readFileSync(join(logDir, file), 'utf8').split('\n')) {
      if (!line.startsWith('{')) continue;
      let entry: { event?: unknown; reason?: unknown };
      try {
        entry = JSON.parse(line) as { event?: unknown; reason?: unknown };
      } catch {
        continue;
      }
      if (typeof entry.event !== 'string') continue;
      const key = entry.event === 'lock_lost' ? `lock_lost:${String(entry.reason)}` : entry.event;
      if (!WORKER_LOG_EVENTS.some((e) => key.startsWith(e))) continue;
      counts[key] = (counts[key] ?? 0) + 1;
    }
  }
  return counts;
}

const WORKER_LOG_EVENTS = [
  'lock_lost',
  'lock_release_not_owner',
  'lock_renew_failed',
  'transfer_stale_fence',
  'transfer_lock_lost',
  'transfer_transient_error',
  'transfer_permanent_error',
  'lock_fence_advanced',
  'lock_release_timed_out',
  'lock_release_failed',
  'lock_acquire_given_back',
  'lock_acquire_give_back_failed',
  'lease_given_up',
];

export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** --postgres ha: each failover's and switchover's outage, as the endpoint and the decisions saw it. */
/** The product's default JOB_ATTEMPTS_MAX, which a failover must not exhaust. */
const JOB_ATTEMPTS_DEFAULT = SETTINGS.JOB_ATTEMPTS_MAX.default;

function renderPgFaults(lines: string[], list: readonly FaultRecord[], attemptsMadeMax: number | undefined): void {
  const pg = list.filter((r) => r.pg !== undefined);
  if (pg.length === 0) return;
  lines.push(
    '## PostgreSQL failovers',
    '',
    'The write outage is the longest gap between two decisions around the fault (`transfers.created_at`); ' +
      'throughput is back at the first second after it with at least 80 % of the decisions per second before the fault. ' +
      `The most attempts one job made in the run: ${attemptsMadeMax ?? '?'} (the product's JOB_ATTEMPTS_MAX defaults to ${JOB_ATTEMPTS_DEFAULT}). ` +
      'Not ready: the workers whose `/readyz` said 503 during the fault, of those that answered, and the longest run of 503s; ' +
      "ready again: from the fault's start until every answering worker said 200; longest lease: the longest any wallet lock was seen held during the fault.",
    '',
    '| # | kind | primary → new primary | endpoint without a primary (ms) | writes stopped (s) | resumed (s) | write outage (ms) | throughput back after (ms) | healthy after (ms) | not ready (workers, longest ms) | ready again after (ms) | longest lease (ms, bound) |',
    '| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |',
  );
  const s = (ms: number | null | undefined) => (ms === null || ms === undefined ? '' : (ms / 1000).toFixed(2));
  for (const r of pg) {
    const p = r.pg;
    if (p === undefined) continue;
    lines.push(
      `| ${r.id} | ${r.kind} | ${p.primaryBefore ?? '?'} → ${p.primaryAfter ?? '?'} | ${p.noPrimaryMs} | ${s(p.writesStoppedAtMs)} | ` +
        `${s(p.writesResumedAtMs)} | ${p.writeOutageMs ?? ''} | ${p.throughputBackAfterMs ?? ''} | ${p.recoveredAfterMs ?? ''} | ` +
        (p.fleet === undefined
          ? ' | | |'
          : `${p.fleet.workersNotReady} of ${p.fleet.workersAnswering}, ${p.fleet.notReadyMsMax} | ${p.fleet.readyAgainAfterMs ?? 'never'} | ` +
            `${p.fleet.leases.longestHoldMs} (${p.fleet.leases.boundMs}) |`),
    );
  }
  lines.push('');
}

export function answerOf(job: FinalJob): string {
  if (job.state === 'failed') return 'failed';
  const v = job.returnvalue as { outcome?: unknown } | null;
  return typeof v === 'object' && v !== null && typeof v.outcome === 'string' ? v.outcome : job.state;
}

export function jobFigures(
  jobs: readonly FinalJob[],
  sentIds: ReadonlySet<string>,
  invalidIds: ReadonlySet<string>,
): RunFigures['jobs'] {
  let completed = 0,
    failed = 0,
    failedValid = 0,
    otherState = 0,
    unrecorded = 0,
    deliveries = 0,
    retries = 0,
    deferrals = 0,
    attemptsMadeMax = 0;
  for (const j of jobs) {
    attemptsMadeMax = Math.max(attemptsMadeMax, j.attemptsMade);
    if (j.state === 'completed') completed += 1;
    else if (j.state === 'failed') {
      failed += 1;
      if (!invalidIds.has(j.jobId)) failedValid += 1;
    } else otherState += 1;
    if (!sentIds.has(j.jobId)) unrecorded += 1;
    deliveries += j.attemptsStarted;
    retries += Math.max(0, j.attemptsMade - 1);
    deferrals += Math.max(0, j.attemptsStarted - j.attemptsMade);
  }
  return {
    completed,
    failed,
    failedValid,
    otherState,
    unrecorded,
    deliveries,
    retries,
    deferralsAndStalls: deferrals,
    attemptsMadeMax,
  };
}

export function messageFigures(workload: ChaosWorkload): RunFigures['messages'] {
  const count = (kind: string) => workload.messages.filter((m) => m.kind === kind).length;
  return {
    sent: workload.messages.length,
    operations: workload.operations.size,
    originals: count('original'),
    duplicates: count('duplicate'),
    conflicts: count('conflict'),
    invalid: count('invalid'),
    bothDoors: count('both-doors'),
  };
}

export function faultFigures(scheduled: number, records: readonly FaultRecord[]): RunFigures['faults'] {
  const byKind: Record<string, number> = {};
  for (const r of records) if (r.error === null) byKind[r.kind] = (byKind[r.kind] ?? 0) + 1;
  return {
    scheduled,
    injected: records.filter((r) => r.error === null).length,
    errors: records.filter((r) => r.error !== null).length,
    byKind,
    idle: records.filter((r) => r.error === null && r.load !== undefined && r.load.inFlight === 0).length,
    list: records,
  };
}

const fmt = (n: number) => n.toLocaleString('en-US');
const cell = (v: unknown) =>
  String(v ?? '')
    .replace(/\|/g, '\\|')
    .replace(/\n/g, ' ');

/** For each pg-blackhole, how long its worker's wallets stayed held, against the bound. */
function renderBlackholes(lines: string[], faults: readonly FaultRecord[]): void {
  const blackholes = faults.filter((r) => r.blackhole !== undefined);
  if (blackholes.length === 0) return;
  lines.push(
    '## Database blackholes',
    '',
    "The worker's link to PostgreSQL forwarded nothing either way and closed nothing. Its lock keys were read every " +
      `${BLACKHOLE_POLL_MS} ms: the wallets it held when the path went silent, when the last of them was free, the most it ` +
      'held at once, and the longest any one lease of it was seen held, against the bound (the decision deadline plus a lock TTL).',
    '',
    '| # | worker | lasted (s) | held at start | all free after (s) | most held | longest hold (s) | bound (s) | result |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  );
  for (const r of blackholes) {
    const b = r.blackhole as BlackholeFigures;
    const freed =
      b.heldAtStart === 0 ? '' : b.releasedAfterMs === null ? 'never' : (b.releasedAfterMs / 1000).toFixed(1);
    lines.push(
      `| ${r.id} | ${r.worker ?? ''} | ${((r.endMs - r.startMs) / 1000).toFixed(1)} | ${b.heldAtStart} | ${freed} | ` +
        `${b.heldMax} | ${(b.longestHoldMs / 1000).toFixed(1)} | ${(b.boundMs / 1000).toFixed(1)} | ${b.ok ? 'within' : '**OVER**'} |`,
    );
  }
  lines.push('');
}

/** An intake run: what the producer, the relays and the feed did, and the adds lost in failovers. */
function renderIntake(lines: string[], i: RunIntakeFigures): void {
  const p = i.producerFigures;
  lines.push(
    '## Intake',
    '',
    i.producer === 'intake'
      ? `Producers requested transfers through the intake in PostgreSQL transactions; ${i.relays} relay process(es) ` +
          `(DB_POOL_MAX ${i.relayPoolMax ?? 'default'}) moved them to the queue shards and sent again what stayed ` +
          `undecided ${i.resendAfterMs} ms after its last send.`
      : 'Negative control: producers added to BullMQ straight (no intake, no relay).',
    '',
    '| figure | value |',
    '| --- | ---: |',
  );
  const f = i.feedReaders;
  const rows: [string, number | string][] = [
    ['transfers acknowledged to the producer', i.acknowledged],
    ...(p === null
      ? []
      : ([
          ['producer transactions committed', p.transactions],
          ['producer transactions run again after an error', p.transactionRetries],
          ['requests answered requested / duplicate', p.requested + p.duplicate],
          ['conflicting reuses refused at once by the intake', p.conflictsRefused],
          ['both-doors pairs (one id to BullMQ straight and through the intake at once)', p.bothDoorsPairs],
          [
            'of those, intake halves refused at once (decided straight with another body) / answered duplicate',
            `${fmt(p.bothDoorsRefused)} / ${fmt(p.bothDoorsDuplicate)}`,
          ],
        ] as [string, number | string][])),
    ['intake rows (requested transfers)', i.requests],
    ['intake rows decided', i.decided],
    ['intake rows still open', i.open],
    ['intake rows given up', i.givenUp],
    ['relay sends in all', i.sends],
    ['re-sends (sends after the first)', i.resends],
    ['re-sends that found no job (sum of lost_count)', i.resendsFindingNoJob],
    ['requests found lost at least once', i.requestsFoundLost],
    ['relay processes killed (kill-relay)', i.relayKills],
    ['acknowledged transfers never decided (lost)', i.lostTransfers],
    ['outcome feed events (positions 1..N)', i.feedEvents],
    ['outcome feed given-up events', i.givenUpEvents],
    ['outcome feed conflict events', i.conflictEvents],
    ["intake rows of another body than their operation's record", i.requestsOfAnotherBody],
    ['feed events sequenced by the checker (pending at the end)', i.sequencedAtCheck],
    ...(f === null
      ? []
      : ([
          [`feed reads during the run (transactions of ${f.readers} readers)`, f.reads],
          [
            'of those: rolled back / in REPEATABLE READ / re-reading earlier positions',
            `${fmt(f.rollbacks)} / ${fmt(f.repeatableReads)} / ${fmt(f.rereads)}`,
          ],
          ['feed reads that failed (a session ended)', f.failedReads],
          [
            'feed positions observed during the run (the highest)',
            `${fmt(f.positionsObserved)} (${fmt(f.lastPositionObserved)})`,
          ],
        ] as [string, number | string][])),
  ];
  for (const [k, v] of rows) lines.push(`| ${k} | ${typeof v === 'number' ? fmt(v) : v} |`);
  lines.push('');
  if (i.failoverLosses.length > 0) {
    lines.push(
      'Lossy failovers of a slot group holding a queue shard: the job hashes the old master held (read with its writes ' +
        'paused) and those the new master lacked: acknowledged adds lost. How each lost transfer was decided in the end:',
      '',
      '| # | slots | jobs on the old master | jobs lost | re-sent by a relay (found no job), then decided | decided otherwise | never decided |',
      '| ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const l of i.failoverLosses) {
      lines.push(
        `| ${l.faultId} | ${l.slots} | ${fmt(l.jobsBefore)} | ${fmt(l.jobsLost)} | ${fmt(l.resentAndDecided)} | ` +
          `${fmt(l.decidedOtherwise)} | ${l.neverDecided > 0 ? `**${fmt(l.neverDecided)}**` : '0'} |`,
      );
    }
    lines.push('');
  }
}

/** The cluster's failovers, each with what it lost and how the fence recovered. */
function renderFailovers(lines: string[], list: readonly FaultRecord[]): void {
  const failovers = list.filter((r) => r.failover !== undefined);
  if (failovers.length > 0) {
    lines.push(
      '## Failovers',
      '',
      "Lossy: the replica's link was stalled, then it took over (CLUSTER FAILOVER TAKEOVER); the lock keys " +
        "and fence counters of the old master were read with its writes paused and compared with the new master's. " +
        'Recovery: decisions refused with a stale token on the wallets whose counter went back, counters raised past the ' +
        `database's fence (within ${RECOVERY_WINDOW_MS / 1000} s of the takeover), and counters back at or above their lost value by the end.`,
      '',
      '| # | kind | slots | master → new master | replica behind (bytes) | fence increments lost (wallets) | lock keys lost | ' +
        'promoted after (ms) | stale-fence refusals | fences advanced | counters recovered |',
      '| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    );
    for (const r of failovers) {
      const fo = r.failover;
      if (fo === undefined) continue;
      const rec = r.recovery;
      if (fo.kind === 'lossy') {
        lines.push(
          `| ${r.id} | failover-lossy | ${fo.slots} | node ${fo.master} → node ${fo.replica} | ${fmt(fo.replicationLagBytes)} | ` +
            `${fo.fenceIncrementsLost} (${fo.fenceKeysBehind}) | ${fo.lockKeysLost} of ${fo.lockKeysBefore} | ${fo.promotionMs} | ` +
            `${rec?.staleFenceRefusals ?? 0} | ${rec?.fencesAdvanced ?? 0} | ${rec === undefined ? '' : `${rec.walletsRecovered} of ${rec.walletsBehind}`} |`,
        );
      } else {
        lines.push(
          `| ${r.id} | kill-master | ${fo.slots} | node ${fo.master} → node ${fo.replica} | | | | ${fo.promotionMs} | | | |`,
        );
      }
    }
    lines.push('');
  }
}

export function renderMarkdown(f: RunFigures, chartFile: string | null): string {
  const lines: string[] = [];
  const v = f.verdict;
  lines.push(`# Chaos run, seed ${f.seed}: ${v.pass ? 'PASS' : 'FAIL'}`, '');
  lines.push(
    `\`${f.command}\` — started ${f.startedAt}, ${(f.durationMs.total / 1000).toFixed(1)} s in all ` +
      `(set-up ${(f.durationMs.setup / 1000).toFixed(1)} s, faults ${(f.durationMs.faultPhase / 1000).toFixed(1)} s, ` +
      `drain ${(f.durationMs.drain / 1000).toFixed(1)} s, checks ${(f.durationMs.check / 1000).toFixed(1)} s).`,
    '',
  );
  lines.push(
    `- Mode: apply **${f.mode.apply}**, unsafe **${f.mode.unsafe ?? 'none'}**, Redis **${
      f.mode.redis === 'cluster' ? 'Cluster (3 masters, 1 replica each)' : 'single node'
    }**, ${f.mode.queueShards ?? 1} queue shard(s)${f.mode.pgbouncer === true ? ', PostgreSQL through **PgBouncer (transaction mode)**' : ''}`,
  );
  lines.push(`- Expectation: ${v.expectationText}`);
  lines.push(`- Verdict: **${v.pass ? 'as expected' : 'NOT as expected'}** — ${v.detail}`, '');
  if (chartFile !== null) lines.push(`![timeline](${chartFile})`, '');

  const m = f.messages;
  const j = f.jobs;
  const metric = (k: string) => f.metrics[k] ?? 0;
  lines.push('## Figures', '', '| figure | value |', '| --- | ---: |');
  const rows: [string, number | string][] = [
    ['messages sent', m.sent],
    ['distinct operations', m.operations],
    ['duplicate deliveries sent (new job ids)', m.duplicates],
    ['conflicting reuses of an id', m.conflicts],
    ['invalid messages', m.invalid],
    ...(m.bothDoors > 0 ? ([['both-doors messages (two per operation)', m.bothDoors]] as [string, number][]) : []),
    ['jobs completed', j.completed],
    ['jobs failed (all reasons)', j.failed],
    ['valid jobs failed', j.failedValid],
    ['jobs the harness did not send (resent by a client)', j.unrecorded],
    ['producer calls retried after a Redis error', f.producerRetries ?? 0],
    ['deliveries (job starts)', j.deliveries],
    ['retries (failed attempts retried)', j.retries],
    ['busy deferrals and stalled re-runs', j.deferralsAndStalls],
    ['transfers applied (ledger)', f.ledger.transfersApplied],
    ['transfers rejected (ledger)', f.ledger.transfersRejected],
    ['answers: applied', f.answers.applied ?? 0],
    ['answers: duplicate (answered from the record)', f.answers.duplicate ?? 0],
    ['answers: conflict', f.answers.conflict ?? 0],
    ['answers: rejected', f.answers.rejected ?? 0],
    ['worker metric: stale fences refused', metric('stale_fence')],
    ['worker metric: fences advanced after a refusal', metric('fence_advanced')],
    ['worker metric: lock losses', metric('lock_lost')],
    ['worker metric: leases lost with a decision in flight', metric('lease_lost_in_flight')],
    ['worker metric: lock busy', metric('lock_busy')],
    ['worker metric: transient errors', metric('transient_error')],
    ['worker metric: invalid', metric('invalid')],
    ['worker logs: leases lost (watchdog: expired by our clock)', f.workerLogEvents['lock_lost:lease_expired'] ?? 0],
    [
      'worker logs: leases lost (watchdog: renewal found another owner or none)',
      f.workerLogEvents['lock_lost:not_owner'] ?? 0,
    ],
    ['worker logs: releases that found the lock no longer ours', f.workerLogEvents.lock_release_not_owner ?? 0],
    [
      'latency enqueue→answer p50 / p95 / p99 / max (ms)',
      `${f.latencyMs.p50} / ${f.latencyMs.p95} / ${f.latencyMs.p99} / ${f.latencyMs.max}`,
    ],
    ['applied per second, mean / peak', `${f.appliedPerSecond.mean.toFixed(1)} / ${f.appliedPerSecond.peak}`],
  ];
  for (const [k, val] of rows) lines.push(`| ${k} | ${typeof val === 'number' ? fmt(val) : val} |`);
  lines.push('', ...lockBackendLines(f));
  if (f.payments !== undefined) lines.push(...paymentLines(f.payments));

  lines.push(
    '## Faults',
    '',
    `${f.faults.injected} injected of ${f.faults.scheduled} scheduled${f.faults.errors > 0 ? `, ${f.faults.errors} could not be injected` : ''}; ` +
      `${f.faults.idle ?? 0} met no transfer in flight.`,
    '',
  );
  lines.push('| kind | count |', '| --- | ---: |');
  for (const kind of faultKindsOf(
    f.mode.redis === 'cluster' ? 'cluster' : 'single',
    (f.intake?.relays ?? 0) > 0,
    f.mode.postgres === 'ha' ? 'ha' : 'single',
    f.lockBackend?.backend ?? 'redis',
  ) as readonly FaultKind[]) {
    lines.push(`| ${kind} | ${f.faults.byKind[kind] ?? 0} |`);
  }
  lines.push(
    '',
    'Every fault, with its window (s from the start of the fault phase) and the load it met: transfers in flight ' +
      '(submitted by the producer before the window ended, answered after it began) and answered inside the window; a fault ' +
      `shorter than ${FAULT_AFTERMATH_MS / 1000} s is measured over the ${FAULT_AFTERMATH_MS / 1000} s after its start.`,
    '',
    '| # | start | end | in flight | answered during | what | error |',
    '| ---: | ---: | ---: | ---: | ---: | --- | --- |',
  );
  for (const r of f.faults.list) {
    lines.push(
      `| ${r.id} | ${(r.startMs / 1000).toFixed(2)} | ${(r.endMs / 1000).toFixed(2)} | ${r.load?.inFlight ?? ''} | ` +
        `${r.load?.answeredDuring ?? ''} | ${cell(r.detail)} | ${cell(r.error ?? '')} |`,
    );
  }
  lines.push('');
  renderFailovers(lines, f.faults.list);
  renderPgFaults(lines, f.faults.list, f.jobs.attemptsMadeMax);
  renderBlackholes(lines, f.faults.list);
  if (f.intake !== undefined) renderIntake(lines, f.intake);
  lines.push('## Invariants', '', '| invariant | group | result | violations |', '| --- | --- | --- | ---: |');
  for (const c of f.checks)
    lines.push(
      `| ${cell(c.name)} | ${c.group} | ${c.ok ? 'pass' : '**FAIL**'} | ${c.violations}${c.capped ? '+' : ''} |`,
    );
  lines.push('');
  const failed = f.checks.filter((c) => !c.ok);
  if (failed.length > 0) {
    lines.push('### Counterexamples', '');
    for (const c of failed) {
      lines.push(`**${c.name}**`, '');
      for (const ex of c.counterexamples) lines.push(`- ${cell(JSON.stringify(ex))}`);
      lines.push('');
    }
  }
  lines.push(
    'Files: `history.ndjson` (every enqueue, job start, outcome and fault), `report.json` (these figures), ' +
      "`workers/worker-N.log` (each worker's log).",
    '',
  );
  return lines.join('\n');
}
