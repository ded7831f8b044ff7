// The classification of a failed attempt's error (src/queue/attempt-failure.ts): which errors
// can clear by themselves (retried as always) and which cannot (the worker holds, the reason
// names the fix), and that every reason reads back to its kind and cause.
import { describe, expect, it } from 'vitest';
import {
  DecisionTimeoutError,
  ERROR_CODES,
  LedgerContractError,
  LockLostError,
  LockProtocolError,
} from '../../src/errors.ts';
import { classifyFailure, FAILURE_KIND_DOCS, failureMessage, PERMANENT_KINDS } from '../../src/ledger/vocabulary.ts';
import { classifyAttemptError, permanentKindOfCode, roleOf } from '../../src/queue/attempt-failure.ts';

/** An error shaped as Prisma raises one for a raw query PostgreSQL refused (see PRISMA-NOTES). */
function postgresError(code: string, message: string): Error {
  return Object.assign(new Error(`Raw query failed. Code: \`${code}\`. Message: \`${message}\``), {
    code: 'P2010',
    meta: { driverAdapterError: { cause: { originalCode: code, originalMessage: message } } },
  });
}

const ROLE = 'ft_worker';

describe('permanent errors', () => {
  it('42501: permission_denied, naming the role and the command that fixes it', () => {
    const f = classifyAttemptError(postgresError('42501', 'permission denied for function apply_transfers'), ROLE);
    expect(f).toMatchObject({ permanent: true, kind: 'permission_denied', sqlState: '42501' });
    expect(f.detail).toBe(
      '42501 permission denied for function apply_transfers (role ft_worker); run npm run db:worker-role -- --role ft_worker as the database owner',
    );
  });

  it('42883 (the function this build calls is gone): ledger_contract, run the migrations', () => {
    const f = classifyAttemptError(postgresError('42883', 'function apply_transfers(text[]) does not exist'), ROLE);
    expect(f).toMatchObject({ permanent: true, kind: 'ledger_contract' });
    expect(f.detail).toContain('run npm run db:migrate');
  });

  it('LedgerContractError: ledger_contract; the reason still reads back to its cause', () => {
    const f = classifyAttemptError(new LedgerContractError('batch_row_count', '0 rows for 1 transfers'), ROLE);
    expect(f).toMatchObject({ permanent: true, kind: 'ledger_contract', sqlState: null });
    expect(classifyFailure(failureMessage(f.kind, f.detail))).toMatchObject({
      kind: 'ledger_contract',
      cause: 'LedgerContractError',
    });
  });

  it('LockProtocolError: lock_protocol, reading back to its cause', () => {
    const f = classifyAttemptError(new LockProtocolError('acquire', 'unexpected reply "x"'), ROLE);
    expect(f).toMatchObject({ permanent: true, kind: 'lock_protocol' });
    expect(f.detail).toContain('LOCK_KEY_PREFIX');
    expect(classifyFailure(failureMessage(f.kind, f.detail))).toMatchObject({
      kind: 'lock_protocol',
      cause: 'LockProtocolError',
    });
  });

  it('RangeError: internal_error, with its class name', () => {
    const f = classifyAttemptError(new RangeError('fence must be positive, got 0'), ROLE);
    expect(f).toMatchObject({ permanent: true, kind: 'internal_error' });
    expect(f.detail).toMatch(/^RangeError: fence must be positive, got 0; a bug/);
  });

  it('classifies by code, never by name: a renamed LedgerContractError still holds, a look-alike name does not', () => {
    const renamed = new LedgerContractError('batch_order', 'position 2 for 1');
    renamed.name = 'Error';
    expect(classifyAttemptError(renamed, ROLE)).toMatchObject({ permanent: true, kind: 'ledger_contract' });
    const lookAlike = Object.assign(new Error('apply_transfers returned 0 rows'), { name: 'LedgerContractError' });
    expect(classifyAttemptError(lookAlike, ROLE)).toMatchObject({ permanent: false, kind: 'transient_error' });
    // Another copy of the package (a second install) throws errors of other classes with the same codes.
    const otherCopy = Object.assign(new Error('lock script acquire: unexpected reply'), { code: 'LOCK_PROTOCOL' });
    expect(classifyAttemptError(otherCopy, ROLE)).toMatchObject({ permanent: true, kind: 'lock_protocol' });
  });

  it('every code of src/errors.ts has a classification: only LEDGER_CONTRACT, LOCK_EPOCH and LOCK_PROTOCOL are permanent', () => {
    const permanent = ERROR_CODES.filter((code) => permanentKindOfCode(code) !== undefined);
    expect(permanent.sort()).toEqual(['LEDGER_CONTRACT', 'LOCK_EPOCH', 'LOCK_PROTOCOL']);
  });

  it('every permanent kind is declared as permanent and retried (by a ready worker) in the vocabulary', () => {
    for (const kind of PERMANENT_KINDS)
      expect(FAILURE_KIND_DOCS[kind]).toMatchObject({ permanent: true, retried: true });
  });
});

describe('transient errors are retried as before', () => {
  it('40P01 (deadlock) and 57P01 (terminated): transient_error, expected', () => {
    for (const code of ['40P01', '57P01']) {
      expect(classifyAttemptError(postgresError(code, 'deadlock detected'), ROLE)).toMatchObject({
        permanent: false,
        kind: 'transient_error',
        sqlState: code,
        expected: true,
      });
    }
  });

  it('ECONNRESET, a TypeError and an unknown SQLSTATE: transient_error (only what is known to be permanent holds)', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    for (const err of [reset, new TypeError('Cannot read properties of null'), postgresError('53300', 'too many')])
      expect(classifyAttemptError(err, ROLE)).toMatchObject({ permanent: false, kind: 'transient_error' });
    expect(classifyAttemptError(reset, ROLE)).toMatchObject({ detail: 'read ECONNRESET', expected: false });
  });

  it("a silent database's deadlines (pg's query timeout, the batch deadline, a lease given up): transient_error", () => {
    const given = new LockLostError('w1', 5n, 'no_progress');
    for (const err of [new Error('Query read timeout'), new DecisionTimeoutError(11_000, 3), given])
      expect(classifyAttemptError(err, ROLE)).toMatchObject({ permanent: false, kind: 'transient_error' });
  });
});

it('reads the role from DATABASE_URL, percent-decoded', () => {
  expect(roleOf('postgresql://ft_w%5F1:secret@127.0.0.1:5432/transfers')).toBe('ft_w_1');
  expect(roleOf('not a url')).toBe('NAME');
});
