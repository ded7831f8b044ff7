// Renders docs/reference/outcomes.md from the vocabulary's tables (vocabulary.ts): every outcome,
// rejection reason, non-terminal answer, failure kind and failure cause with its meaning and
// what an operator does about it. `npm run docs` writes it (harness/docs/reference-docs.ts).
import {
  CHECK_ORDER,
  type Described,
  FAILURE_CAUSE_DOCS,
  FAILURE_CAUSES,
  FAILURE_KIND_DOCS,
  FAILURE_KINDS,
  NON_TERMINAL_ANSWER_DOCS,
  NON_TERMINAL_ANSWERS,
  REJECTION_REASON_DOCS,
  REJECTION_REASONS,
  TERMINAL_OUTCOME_DOCS,
  TERMINAL_OUTCOMES,
} from './vocabulary.ts';

export const OUTCOMES_REFERENCE_PATH = 'docs/reference/outcomes.md';

const code = (text: string) => `\`${text}\``;

/** A Markdown table with its columns padded to one width, as the formatter (Biome) writes them. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(3, h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => `| ${widths.map((w, i) => (cells[i] ?? '').padEnd(w)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function describedTable(title: string, names: readonly string[], docs: Readonly<Record<string, Described>>): string {
  return table(
    [title, 'meaning', 'what to do'],
    names.map((name) => {
      const doc = docs[name] as Described;
      return [code(name), doc.meaning, doc.action];
    }),
  );
}

/** The whole document; `notice` is its first line (the generator's "do not edit" mark). */
export function renderOutcomesReference(notice: string): string {
  const failureKinds = table(
    ['kind', 'message starts with', 'retried', 'meaning', 'what to do'],
    FAILURE_KINDS.map((kind) => {
      const doc = FAILURE_KIND_DOCS[kind];
      const retried = !doc.retried
        ? `no (${doc.source === 'bullmq' ? 'BullMQ fails it' : 'fails at once'})`
        : doc.permanent
          ? 'yes, spending no attempt, on a ready worker (this one holds)'
          : 'yes';
      return [code(kind), code(doc.prefix), retried, doc.meaning, doc.action];
    }),
  );
  const causes = table(
    ['error', 'message starts with', 'meaning', 'what to do'],
    FAILURE_CAUSES.map((cause) => {
      const doc = FAILURE_CAUSE_DOCS[cause];
      return [code(cause), doc.prefixes.map(code).join(', '), doc.meaning, doc.action];
    }),
  );
  const checkOrder = table(
    ['kind', 'checks, in order: the first that fails is the reason'],
    Object.entries(CHECK_ORDER).map(([kind, steps]) => [
      kind,
      steps.map((step, i) => `${i + 1}. ${code(step.reason)} (${step.when})`).join('; '),
    ]),
  );
  return [
    notice,
    '',
    '# Outcomes and failures',
    '',
    'Every answer an operation (a transfer, a hold, a capture, a void, a refund, a split) can get and every',
    'reason its job can fail, with what it means and what to do about it. Declared once in',
    "[src/ledger/vocabulary.ts](../../src/ledger/vocabulary.ts), which the SQL contract checks, the worker's",
    "messages and the metrics' label values derive from. The outcome feed's events, `expired` among them:",
    '[wire format](wire-format.md#the-outcome-feeds-events).',
    '',
    '## Terminal outcomes',
    '',
    "A job completes with one of these as its return value's `outcome`; counted by",
    '`fenced_transfers_outcomes_total{outcome}`, and by kind of operation in',
    '`fenced_transfers_operations_total{kind}`.',
    '',
    describedTable('outcome', TERMINAL_OUTCOMES, TERMINAL_OUTCOME_DOCS),
    '',
    '## Rejection reasons',
    '',
    'The `reason` of a `rejected` outcome, stored in `transfers.reason`; counted by',
    '`fenced_transfers_rejections_total{reason}`.',
    '',
    describedTable('reason', REJECTION_REASONS, REJECTION_REASON_DOCS),
    '',
    '## Order of checks',
    '',
    'An operation that breaks several rules gets the reason of the first check it fails. Before any of',
    "them, an operation already recorded answers `duplicate` or `conflict`, and a token below the debited wallet's",
    "fence `stale_fence`. A split checks its legs one at a time, in the message's order, each leg all three of",
    "its checks before the next leg: a first leg's `currency_mismatch` comes before a second leg's",
    "`unknown_wallet`, and `insufficient_funds` (the legs' total) only once every leg passed. The table is",
    '`CHECK_ORDER` in the vocabulary, checked against the SQL functions by `test/ledger/outcomes-reference.test.ts`.',
    "`invalid_request` is no decision's check: it ends a stored intake request that no worker can decide",
    '(`request_decide_invalid()`), whatever its kind.',
    '',
    checkOrder,
    '',
    '## Non-terminal answers',
    '',
    'Answers that end one try but not the job: the worker acts on each and tries again.',
    '',
    describedTable('answer', NON_TERMINAL_ANSWERS, NON_TERMINAL_ANSWER_DOCS),
    '',
    '## Failure kinds',
    '',
    "A failed attempt's message starts with its kind's prefix, and BullMQ keeps the last one as the",
    "job's `failedReason`. A retried kind fails the job only after the last of `JOB_ATTEMPTS_MAX`",
    'attempts; retries are counted by `fenced_transfers_retries_total{kind}`. A permanent kind (no retry',
    'on this worker can clear it) spends no attempt: the job goes back to the queue, delayed by the retry',
    'back-off, with the message in its progress (`lastPermanentFailure`) instead of its `failedReason`.',
    'It also takes the worker out: `/readyz` answers 503 with the reason and the worker takes no job for',
    'a hold (5 s, doubling while it recurs, at most 5 min), so the job waits for a fixed worker however',
    'long the fault lasts ([runbook](../operating/runbook.md)).',
    '',
    'A job that fails for good (its attempts spent, a message outside the wire format, or the stall',
    'limit) is given up, once: an intake request of that operation and body is parked with a `given_up`',
    'event in the outcome feed, for `npm run redrive`. A job sent to BullMQ straight has no request and',
    'gets no event (nothing in PostgreSQL can vouch for its body): only the failed job, the',
    '`transfer_given_up_unrecorded` log line and `fenced_transfers_given_up_jobs_total{feed}`.',
    '',
    failureKinds,
    '',
    "## Errors in a failure's detail",
    '',
    'The detail after a `lock_lost: `, `ledger_contract: ` or `lock_protocol: ` prefix is the message of the error behind it;',
    'these are the ones the project raises. Anything else there is most likely a PostgreSQL or Redis error.',
    '',
    causes,
    '',
  ].join('\n');
}
