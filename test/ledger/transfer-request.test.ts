// The wire-format validation (pure): what it accepts, and a precise reason for what it refuses.
import { describe, expect, it } from 'vitest';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { validateTransferRequest } from '../../src/ledger/transfer-request.ts';

const MAX = 10n ** 15n;
const ok = { operationId: 'op-1', from: 'a', to: 'b', amount: '100' };

describe('validateTransferRequest', () => {
  it('accepts the wire format, with and without currency', () => {
    expect(validateTransferRequest(ok, MAX)).toEqual({
      ok: true,
      request: { operationId: 'op-1', from: 'a', to: 'b', amountMinor: 100n, currency: null },
    });
    const withCurrency = validateTransferRequest({ ...ok, currency: 'EUR' }, MAX);
    expect(withCurrency.ok && withCurrency.request.currency).toBe('EUR');
    expect(validateTransferRequest({ ...ok, amount: MAX.toString() }, MAX).ok).toBe(true);
    expect(validateTransferRequest({ ...ok, operationId: 'x'.repeat(128) }, MAX).ok).toBe(true);
  });

  it.each([
    ['not an object', 'hello', 'job data must be a JSON object, got a string'],
    ['null', null, 'job data must be a JSON object, got null'],
    ['an array', [ok], 'job data must be a JSON object, got an array'],
    ['missing operationId', { from: 'a', to: 'b', amount: '1' }, 'operationId must be a string, got a undefined'],
    ['empty id', { ...ok, operationId: '' }, 'operationId is empty'],
    ['long id', { ...ok, from: 'x'.repeat(129) }, 'from is 129 characters long; at most 128'],
    ['bad characters', { ...ok, to: "b'; DROP TABLE wallets;--" }, 'to may only contain [A-Za-z0-9._:-]'],
    ['same wallet', { ...ok, to: 'a' }, 'from and to are the same wallet'],
    ['number amount', { ...ok, amount: 100 }, 'amount must be a string of decimal digits, got a number'],
    ['float', { ...ok, amount: '1.5' }, 'amount must be a string of decimal digits (no sign, point or exponent)'],
    ['exponent', { ...ok, amount: '1e3' }, 'amount must be a string of decimal digits (no sign, point or exponent)'],
    ['negative', { ...ok, amount: '-5' }, 'amount must be a string of decimal digits (no sign, point or exponent)'],
    ['zero', { ...ok, amount: '000' }, 'amount must be positive'],
    ['over the maximum', { ...ok, amount: (MAX + 1n).toString() }, `amount exceeds the maximum of ${MAX}`],
    ['huge', { ...ok, amount: '9'.repeat(400) }, `amount exceeds the maximum of ${MAX}`],
    ['bad currency', { ...ok, currency: 'eur' }, 'currency must be three capital letters, like "EUR"'],
    ['extra field', { ...ok, admin: true }, 'unknown field "admin"'],
  ])('refuses %s', (_name, data, reason) => {
    expect(validateTransferRequest(data, MAX)).toEqual({ ok: false, reason });
  });
});

describe('requestHash', () => {
  it('is stable for the same request and differs when any field differs', () => {
    const base = { operationId: 'op', from: 'a', to: 'b', amountMinor: 5n, currency: null };
    expect(requestHash(base)).toBe(requestHash({ ...base, operationId: 'other' }));
    const variants = [
      { ...base, from: 'c' },
      { ...base, to: 'c' },
      { ...base, amountMinor: 6n },
      { ...base, currency: 'EUR' },
    ];
    for (const v of variants) expect(requestHash(v)).not.toBe(requestHash(base));
    expect(requestHash(base)).toMatch(/^[0-9a-f]{64}$/);
  });
});
