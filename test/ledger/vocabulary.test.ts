// The vocabulary against what produces its names: the SQL functions' current definitions (read
// from the migrations' text, the newest definition of each function winning) answer exactly its
// outcomes, statuses and rejection reasons, and the CHECK constraints allow exactly those (plus
// the one legacy reason the vocabulary names); and every failure message the code builds reads
// back to the kind and the error it was built from.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import {
  DecisionTimeoutError,
  LedgerContractError,
  LockLostError,
  LockProtocolError,
  RetryableTransferError,
} from '../../src/errors.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import {
  classifyFailure,
  DECISION_OUTCOMES,
  FAILURE_CAUSE_DOCS,
  FAILURE_CAUSES,
  FAILURE_KIND_DOCS,
  FAILURE_KINDS,
  failureMessage,
  LEDGER_CONTRACT_VIOLATIONS,
  type LedgerContractViolation,
  REJECTION_REASONS,
  RETRY_KINDS,
  STORED_STATUSES,
  type TerminalOutcome,
  WORKER_FAILURE_KINDS,
} from '../../src/ledger/vocabulary.ts';

const MIGRATIONS = join(PROJECT_ROOT, 'prisma', 'migrations');
/**
 * The functions a decision goes through, as the migrations define them (the negative controls'
 * variants are derived from these by harness/chaos/unsafe/ and live in no migration);
 * request_decide_invalid() ends an intake request no worker can decide.
 */
const DECISION_FUNCTIONS = [
  'decide_batch',
  'decision_moved',
  'decision_hold_ended',
  'decision_refunded',
  'decision_split',
  'decision_limit_changed',
  'decision_settled',
  'decision_wallet_changed',
  'apply_transfers',
  'apply_transfer',
  'request_decide_invalid',
];

/** Every migration's SQL, oldest first (the directory names start with their timestamp). */
function migrationTexts(): string[] {
  return readdirSync(MIGRATIONS, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort()
    .map((name) => readFileSync(join(MIGRATIONS, name, 'migration.sql'), 'utf8'));
}

/** The body ($$ … $$) of the newest definition of a function. */
function currentBody(name: string): string {
  const definition = new RegExp(
    `CREATE (?:OR REPLACE )?FUNCTION "${name}"\\([\\s\\S]*?AS \\$\\$([\\s\\S]*?)\\$\\$;`,
    'g',
  );
  const bodies = migrationTexts().flatMap((sql) => [...sql.matchAll(definition)].map((m) => m[1] as string));
  const body = bodies.at(-1);
  if (body === undefined) throw new Error(`no migration defines ${name}`);
  return body;
}

/** The quoted literals on the right of `<target> := …;` in a body. */
function assignedLiterals(body: string, target: RegExp): string[] {
  const assignment = new RegExp(`${target.source}\\s*:=([^;]*);`, 'g');
  return [...body.matchAll(assignment)].flatMap((m) =>
    [...(m[1] as string).matchAll(/'([a-z_]+)'/g)].map((l) => l[1] as string),
  );
}

/** The quoted list of the newest `CONSTRAINT "<name>" CHECK (…)` that mentions `column IN (…)`. */
function checkList(constraint: string, column: string): string[] {
  const pattern = new RegExp(`CONSTRAINT "${constraint}" CHECK \\(([\\s\\S]*?)\\)\\s*[,)]\\s*\\n`, 'g');
  const checks = migrationTexts().flatMap((sql) => [...sql.matchAll(pattern)].map((m) => m[1] as string));
  const check = checks.at(-1);
  if (check === undefined) throw new Error(`no migration adds ${constraint}`);
  const list = new RegExp(`"${column}" IN\\s*\\(([^)]*)`).exec(check)?.[1] ?? '';
  return [...list.matchAll(/'([a-z_]+)'/g)].map((l) => l[1] as string);
}

const sorted = (values: readonly string[]) => [...new Set(values)].sort();

/** The quoted literals of an SQL function's body (decision_refusal()'s and decision_answer()'s CASE). */
const literalsOf = (name: string) => [...currentBody(name).matchAll(/'([a-z_]+)'/g)].map((l) => l[1] as string);

describe('the vocabulary and the SQL functions', () => {
  const bodies = DECISION_FUNCTIONS.map(currentBody).join('\n');
  // A decision's status is its outcome when it decides; an answer from a record is decision_answer()'s.
  const statuses = assignedLiterals(bodies, /\b(?:v_)?status/);

  it('agree on the rejection reasons', () => {
    // decision_status_refusal()'s reasons are its CASE's answers (the other literals are statuses).
    const statusReasons = [...currentBody('decision_status_refusal').matchAll(/THEN '([a-z_]+)'/g)].map(
      (l) => l[1] as string,
    );
    expect(
      sorted([...assignedLiterals(bodies, /\b(?:v_)?reason/), ...literalsOf('decision_refusal'), ...statusReasons]),
    ).toEqual(sorted(REJECTION_REASONS));
  });

  it('agree on the outcomes a decision answers', () => {
    expect(sorted([...assignedLiterals(bodies, /\boutcome/), ...statuses, ...literalsOf('decision_answer')])).toEqual(
      sorted(DECISION_OUTCOMES),
    );
  });

  it('agree on the statuses the idempotency record stores', () => {
    expect(sorted(statuses)).toEqual(sorted(STORED_STATUSES));
  });

  it("agree with the transfers table's CHECK constraints", () => {
    expect(sorted(checkList('transfers_status_known', 'status'))).toEqual(sorted(STORED_STATUSES));
    expect(sorted(checkList('transfers_reason_matches_status', 'reason'))).toEqual(sorted(REJECTION_REASONS));
  });

  it('catch a reason the vocabulary lacks (negative control of the parser)', () => {
    const drifted = `${bodies}\n v_reason := 'frozen_wallet';`;
    expect(sorted([...assignedLiterals(drifted, /\b(?:v_)?reason/), ...literalsOf('decision_refusal')])).not.toEqual(
      sorted(REJECTION_REASONS),
    );
  });

  it('the outcome types name exactly the terminal outcomes', () => {
    expectTypeOf<TransferOutcome['outcome']>().toEqualTypeOf<TerminalOutcome>();
  });
});

describe('failure messages', () => {
  it('read back to the kind and the detail they were built from', () => {
    for (const kind of WORKER_FAILURE_KINDS) {
      const message = failureMessage(kind, 'some detail');
      expect(message).toBe(`${kind}: some detail`);
      expect(classifyFailure(message)).toEqual({ kind, detail: 'some detail', cause: null });
    }
  });

  it("read BullMQ's stall failure back", () => {
    expect(classifyFailure('job stalled more than allowable limit').kind).toBe('stalled');
  });

  it("word a RetryableTransferError's message as failureMessage() does, for every kind the worker retries", () => {
    for (const kind of RETRY_KINDS)
      expect(new RetryableTransferError(kind, 'detail').message).toBe(failureMessage(kind, 'detail'));
  });

  it("read back the error behind a failure's detail", () => {
    const lost = new RetryableTransferError('lock_lost', new LockLostError('w1', 7n, 'not_owner').message);
    expect(lost.message).toBe('lock_lost: the lock of wallet w1 (token 7) is lost: not_owner');
    expect(classifyFailure(lost.message)).toMatchObject({ kind: 'lock_lost', cause: 'LockLostError' });

    const protocol = new RetryableTransferError('lock_protocol', new LockProtocolError('acquire', 'bad').message);
    expect(protocol.message).toBe('lock_protocol: lock script acquire: bad');
    expect(classifyFailure(protocol.message)).toMatchObject({ kind: 'lock_protocol', cause: 'LockProtocolError' });

    const timeout = new RetryableTransferError('transient_error', new DecisionTimeoutError(11_000, 3).message);
    expect(classifyFailure(timeout.message)).toMatchObject({ kind: 'transient_error', cause: 'DecisionTimeoutError' });

    for (const violation of Object.keys(LEDGER_CONTRACT_VIOLATIONS) as LedgerContractViolation[]) {
      const message = failureMessage('ledger_contract', new LedgerContractError(violation, 'x').message);
      expect(classifyFailure(message), violation).toMatchObject({
        kind: 'ledger_contract',
        cause: 'LedgerContractError',
      });
    }
  });

  it('keep the texts stored records and dashboards already hold', () => {
    expect(new LedgerContractError('unknown_outcome', '"x"').message).toBe('unknown outcome "x"');
    expect(new LedgerContractError('unknown_rejection_reason', 'null').message).toBe(
      'rejection without a known reason: null',
    );
    expect(new LedgerContractError('batch_result_count', '1 results for 2 transfers').message).toBe(
      'the batch decision answered 1 results for 2 transfers',
    );
    expect(failureMessage('invalid_request', 'amount must be positive')).toBe(
      'invalid_request: amount must be positive',
    );
  });

  it('leave a foreign message unclassified', () => {
    expect(classifyFailure('connect ECONNREFUSED 127.0.0.1:5432')).toEqual({
      kind: null,
      detail: 'connect ECONNREFUSED 127.0.0.1:5432',
      cause: null,
    });
  });

  it('have prefixes no one of which starts another, so a message reads back one way', () => {
    const groups = [
      FAILURE_KINDS.map((k) => FAILURE_KIND_DOCS[k].prefix),
      FAILURE_CAUSES.flatMap((c) => FAILURE_CAUSE_DOCS[c].prefixes),
    ];
    for (const prefixes of groups) {
      for (const a of prefixes) {
        for (const b of prefixes) if (a !== b) expect(b.startsWith(a), `${a} / ${b}`).toBe(false);
      }
    }
  });
});
