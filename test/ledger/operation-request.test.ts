// The payment operations' wire format (pure): each kind round-trips through validation and back,
// each refusal names its field, a transfer is the same request with or without its kind, and
// each kind's request hash is the sha256 of the canonical lines SQL computes too.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestHash, requestHashLines } from '../../src/ledger/request-hash.ts';
import {
  isPaymentRequest,
  type OperationRequest,
  type OperationWire,
  operationKindOf,
  type TransferRequest,
  toOperationWire,
  toWire,
  validateOperationRequest,
  validateTransferRequest,
  walletOf,
} from '../../src/ledger/transfer-request.ts';

const MAX = 10n ** 15n;
const EXPIRY_MAX_MS = 604_800_000;

const transfer = { operationId: 'op-1', from: 'a', to: 'b', amount: '100' };
const hold = { operationId: 'h-1', kind: 'hold', from: 'a', to: 'b', amount: '100', expiresInMs: 60_000 };
const capture = { operationId: 'c-1', kind: 'capture', from: 'a', hold: 'h-1' };
const voidOp = { operationId: 'v-1', kind: 'void', from: 'a', hold: 'h-1' };
const refund = { operationId: 'r-1', kind: 'refund', from: 'b', original: 'op-1' };
const creditLimit = { operationId: 'l-1', kind: 'credit_limit', from: 'a', limit: '5000' };
const deposit = {
  operationId: 'd-1',
  kind: 'deposit',
  to: 'a',
  amount: '700',
  currency: 'EUR',
  reference: 'ch_3N:x/1',
};
const withdrawal = {
  operationId: 'w-1',
  kind: 'withdrawal',
  from: 'a',
  amount: '300',
  currency: 'EUR',
  reference: 'SEPA-88',
};
const openWallet = { operationId: 'ow-1', kind: 'open_wallet', wallet: 'n', currency: 'EUR', creditLimit: '250' };
const freezeWallet = { operationId: 'fw-1', kind: 'freeze_wallet', wallet: 'a' };
const unfreezeWallet = { operationId: 'uw-1', kind: 'unfreeze_wallet', wallet: 'a' };
const closeWallet = { operationId: 'cw-1', kind: 'close_wallet', wallet: 'a' };
const split = {
  operationId: 's-1',
  kind: 'split',
  from: 'a',
  legs: [
    { to: 'b', amount: '70' },
    { to: 'c', amount: '30' },
  ],
};

function validate(data: unknown) {
  return validateOperationRequest(data, MAX, EXPIRY_MAX_MS);
}

function accepted(data: unknown): OperationRequest {
  const result = validate(data);
  if (!result.ok) throw new Error(`refused: ${result.reason}`);
  return result.request;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

describe('validateOperationRequest accepts every kind, and toOperationWire gives the body back', () => {
  it.each([
    ['a transfer', transfer],
    ['a transfer with currency', { ...transfer, currency: 'EUR' }],
    ['a hold with expiresInMs', hold],
    [
      'a hold with expiresAt and currency',
      { ...hold, expiresInMs: undefined, expiresAt: '2026-12-31T23:59:59.250Z', currency: 'EUR' },
    ],
    ['a hold at the shortest expiry', { ...hold, expiresInMs: 1_000 }],
    ['a hold at the longest expiry', { ...hold, expiresInMs: EXPIRY_MAX_MS }],
    ['a whole capture', capture],
    ['a partial capture', { ...capture, amount: '40' }],
    ['a void', voidOp],
    ['a whole refund', refund],
    ['a partial refund', { ...refund, amount: '1' }],
    ['a split', split],
    ['a split with currency', { ...split, currency: 'EUR' }],
    ['a credit limit', creditLimit],
    ['a credit limit of zero', { ...creditLimit, limit: '0' }],
    ['a credit limit at the ceiling', { ...creditLimit, limit: (10n ** 17n).toString() }],
    ['a deposit', deposit],
    ['a withdrawal', withdrawal],
    ['a reference of 128 characters', { ...deposit, reference: '~'.repeat(128) }],
    ['a wallet opened with a limit', openWallet],
    ['a wallet opened without one', { ...openWallet, creditLimit: undefined }],
    ['a wallet frozen', freezeWallet],
    ['a wallet frozen for credits too', { ...freezeWallet, credits: 'refused' }],
    ['a wallet frozen for debits only, said', { ...freezeWallet, credits: 'allowed' }],
    ['a wallet unfrozen', unfreezeWallet],
    ['a wallet closed', closeWallet],
    ['a transfer with metadata', { ...transfer, metadata: { order: '8812', note: 'Café crème, 2 × ☕' } }],
    ['a hold with empty metadata', { ...hold, metadata: {} }],
    [
      'a split with sixteen metadata keys at their longest',
      { ...split, metadata: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v'.repeat(125)])) },
    ],
    ['a deposit with a value of 256 characters', { ...deposit, metadata: { memo: 'é'.repeat(256) } }],
    [
      'a split of sixteen legs totalling the maximum',
      {
        ...split,
        legs: Array.from({ length: 16 }, (_, i) => ({ to: `w${i}`, amount: (i === 0 ? MAX - 15n : 1n).toString() })),
      },
    ],
  ])('%s', (_name, body) => {
    const wire = JSON.parse(JSON.stringify(body));
    const request = accepted(wire);
    expect(toOperationWire(request)).toEqual(wire);
    expect(accepted(toOperationWire(request))).toEqual(request);
  });

  it('reads each kind into its typed request', () => {
    expect(accepted(hold)).toEqual({
      kind: 'hold',
      operationId: 'h-1',
      from: 'a',
      to: 'b',
      amountMinor: 100n,
      currency: null,
      expiresInMs: 60_000,
      expiresAt: null,
    });
    expect(accepted(capture)).toEqual({
      kind: 'capture',
      operationId: 'c-1',
      from: 'a',
      hold: 'h-1',
      amountMinor: null,
    });
    expect(accepted(voidOp)).toEqual({ kind: 'void', operationId: 'v-1', from: 'a', hold: 'h-1' });
    expect(accepted({ ...refund, amount: '5' })).toEqual({
      kind: 'refund',
      operationId: 'r-1',
      from: 'b',
      original: 'op-1',
      amountMinor: 5n,
    });
    expect(accepted(split)).toEqual({
      kind: 'split',
      operationId: 's-1',
      from: 'a',
      legs: [
        { to: 'b', amountMinor: 70n },
        { to: 'c', amountMinor: 30n },
      ],
      currency: null,
    });
    expect(accepted(creditLimit)).toEqual({ kind: 'credit_limit', operationId: 'l-1', from: 'a', limitMinor: 5000n });
    expect(accepted(deposit)).toEqual({
      kind: 'deposit',
      operationId: 'd-1',
      to: 'a',
      amountMinor: 700n,
      currency: 'EUR',
      reference: 'ch_3N:x/1',
    });
    expect(walletOf(accepted(deposit))).toBe('a');
    expect(walletOf(accepted(withdrawal))).toBe('a');
    expect(accepted(openWallet)).toEqual({
      kind: 'open_wallet',
      operationId: 'ow-1',
      wallet: 'n',
      currency: 'EUR',
      creditLimitMinor: 250n,
    });
    expect(accepted({ ...freezeWallet, credits: 'refused' })).toEqual({
      kind: 'freeze_wallet',
      operationId: 'fw-1',
      wallet: 'a',
      credits: 'refused',
    });
    expect(walletOf(accepted(openWallet))).toBe('n');
    expect(walletOf(openWallet as OperationWire)).toBe('n');
    expect(walletOf(accepted(closeWallet))).toBe('a');
  });

  it('names the kind of every request, a transfer by its absence', () => {
    expect(operationKindOf(accepted(transfer))).toBe('transfer');
    expect(isPaymentRequest(accepted(transfer))).toBe(false);
    for (const body of [
      hold,
      capture,
      voidOp,
      refund,
      split,
      creditLimit,
      deposit,
      withdrawal,
      openWallet,
      closeWallet,
    ]) {
      expect(operationKindOf(accepted(body))).toBe(body.kind);
      expect(isPaymentRequest(accepted(body))).toBe(true);
    }
  });
});

describe('a transfer, with or without its kind', () => {
  it('validates exactly as validateTransferRequest, to the same request and hash', () => {
    const plain = accepted(transfer);
    const kinded = accepted({ ...transfer, kind: 'transfer' });
    expect(validateTransferRequest(transfer, MAX)).toEqual({ ok: true, request: plain });
    expect(kinded).toEqual(plain);
    expect(kinded).not.toHaveProperty('kind');
    expect(requestHash(kinded)).toBe(requestHash(plain));
    expect(toOperationWire(kinded)).toEqual(toWire(plain as TransferRequest));
    expect(toOperationWire(kinded)).not.toHaveProperty('kind');
  });

  it.each([
    ['not an object', 'hello'],
    ['null', null],
    ['an array', [transfer]],
    ['same wallet', { ...transfer, to: 'a' }],
    ['zero', { ...transfer, amount: '0' }],
    ['bad currency', { ...transfer, currency: 'eur' }],
    ['an extra field', { ...transfer, admin: true }],
    ['a field of another kind', { ...transfer, hold: 'h-1' }],
  ])('refuses %s with the same message, kind said or not', (_name, data) => {
    const expected = validateTransferRequest(data, MAX);
    expect(expected.ok).toBe(false);
    expect(validate(data)).toEqual(expected);
    if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
      expect(validate({ ...data, kind: 'transfer' })).toEqual(expected);
    }
  });
});

const KINDS =
  'transfer, hold, capture, void, refund, split, credit_limit, deposit, withdrawal, open_wallet, freeze_wallet, unfreeze_wallet, close_wallet';

/** A case: its name, the job data, and the reason it is refused with. */
type Refusal = readonly [string, unknown, string];

describe('validateOperationRequest refuses', () => {
  it.each<Refusal>([
    // The kind.
    ['an unknown kind', { ...capture, kind: 'authorize' }, `kind must be one of ${KINDS}, got "authorize"`],
    ['a kind that is not a string', { ...capture, kind: 3 }, `kind must be one of ${KINDS}, got a number`],
    ['a kind in capitals', { ...capture, kind: 'HOLD' }, `kind must be one of ${KINDS}, got "HOLD"`],
    // Fields of the kind only.
    ['an extra field on a hold', { ...hold, admin: true }, 'unknown field "admin"'],
    ['a capture with a to', { ...capture, to: 'b' }, 'unknown field "to"'],
    ['a void with an amount', { ...voidOp, amount: '1' }, 'unknown field "amount"'],
    ['a refund with a hold', { ...refund, hold: 'h-1' }, 'unknown field "hold"'],
    ['a split with a to', { ...split, to: 'b' }, 'unknown field "to"'],
    ['a void with a currency', { ...voidOp, currency: 'EUR' }, 'unknown field "currency"'],
    ['a credit limit with an amount', { ...creditLimit, amount: '1' }, 'unknown field "amount"'],
    // Deposit and withdrawal.
    ['a deposit with a from', { ...deposit, from: 'b' }, 'unknown field "from"'],
    ['a withdrawal with a to', { ...withdrawal, to: 'b' }, 'unknown field "to"'],
    ['a deposit without currency', { ...deposit, currency: undefined }, 'a deposit needs its currency'],
    ['a wallet opened without currency', { ...openWallet, currency: undefined }, 'an open_wallet needs its currency'],
    ['a wallet opened with a from', { ...openWallet, from: 'a' }, 'unknown field "from"'],
    [
      'a wallet closed without its wallet',
      { ...closeWallet, wallet: undefined },
      'wallet must be a string, got a undefined',
    ],
    [
      'a wallet opened above the limit ceiling',
      { ...openWallet, creditLimit: (10n ** 17n + 1n).toString() },
      `creditLimit exceeds the maximum of ${10n ** 17n}`,
    ],
    [
      'a wallet opened with a numeric limit',
      { ...openWallet, creditLimit: 5 },
      `creditLimit must be a string of decimal digits (0 to ${10n ** 17n}), got a number`,
    ],
    ['metadata that is an array', { ...hold, metadata: ['a'] }, 'metadata must be an object of string values'],
    ['metadata that is null', { ...transfer, metadata: null }, 'metadata must be an object of string values'],
    [
      'a metadata value that is a number',
      { ...capture, metadata: { order: 8812 } },
      'metadata.order must be a string of at most 256 characters without control characters',
    ],
    [
      'a metadata value with a newline',
      { ...transfer, metadata: { note: 'a\nb' } },
      'metadata.note must be a string of at most 256 characters without control characters',
    ],
    [
      'a metadata value of 257 characters',
      { ...voidOp, metadata: { note: 'x'.repeat(257) } },
      'metadata.note must be a string of at most 256 characters without control characters',
    ],
    [
      'a metadata key with a space',
      { ...refund, metadata: { 'order id': '1' } },
      'every metadata key must be 1-64 characters of [A-Za-z0-9._:-]',
    ],
    [
      'seventeen metadata keys',
      { ...split, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) },
      'metadata has more than 16 keys',
    ],
    [
      'metadata of 2,052 bytes, each value within its bound',
      { ...withdrawal, metadata: { a: 'é'.repeat(256), b: 'é'.repeat(256), c: 'é'.repeat(256), d: 'é'.repeat(256) } },
      'metadata is 2052 bytes of keys and values; at most 2048',
    ],
    [
      'a freeze of credits sometimes',
      { ...freezeWallet, credits: 'sometimes' },
      'credits must be "allowed" or "refused", got "sometimes"',
    ],
    ['a withdrawal without currency', { ...withdrawal, currency: undefined }, 'a withdrawal needs its currency'],
    [
      'a deposit without reference',
      { ...deposit, reference: undefined },
      'reference must be a string of 1-128 printable ASCII characters without spaces',
    ],
    [
      'a reference with a space',
      { ...withdrawal, reference: 'SEPA 88' },
      'reference must be a string of 1-128 printable ASCII characters without spaces',
    ],
    [
      'a reference of 129 characters',
      { ...withdrawal, reference: 'x'.repeat(129) },
      'reference must be a string of 1-128 printable ASCII characters without spaces',
    ],
    ['a withdrawal of zero', { ...withdrawal, amount: '0' }, 'amount must be positive'],
    ['a deposit to a bad id', { ...deposit, to: 'a b' }, 'to may only contain [A-Za-z0-9._:-]'],
    // Credit limit.
    [
      'a credit limit without a limit',
      { ...creditLimit, limit: undefined },
      `limit must be a string of decimal digits (0 to ${10n ** 17n}), got a undefined`,
    ],
    [
      'a negative credit limit',
      { ...creditLimit, limit: '-1' },
      `limit must be a string of decimal digits (0 to ${10n ** 17n}), got a string`,
    ],
    [
      'a credit limit as a number',
      { ...creditLimit, limit: 5 },
      `limit must be a string of decimal digits (0 to ${10n ** 17n}), got a number`,
    ],
    [
      'a credit limit over the ceiling',
      { ...creditLimit, limit: (10n ** 17n + 1n).toString() },
      `limit exceeds the maximum of ${10n ** 17n}`,
    ],
    [
      'a credit limit of twenty digits',
      { ...creditLimit, limit: '1'.repeat(20) },
      `limit exceeds the maximum of ${10n ** 17n}`,
    ],
    // Ids.
    ['a missing operationId', { ...voidOp, operationId: undefined }, 'operationId must be a string, got a undefined'],
    ['an empty from', { ...hold, from: '' }, 'from is empty'],
    ['a long hold id', { ...capture, hold: 'x'.repeat(129) }, 'hold is 129 characters long; at most 128'],
    ['a missing hold id', { ...voidOp, hold: undefined }, 'hold must be a string, got a undefined'],
    ['bad characters in original', { ...refund, original: 'op 1' }, 'original may only contain [A-Za-z0-9._:-]'],
    ['a missing to on a hold', { ...hold, to: undefined }, 'to must be a string, got a undefined'],
    // Hold.
    ['a hold to its own source', { ...hold, to: 'a' }, 'from and to are the same wallet'],
    [
      'a hold without amount',
      { ...hold, amount: undefined },
      'amount must be a string of decimal digits, got a undefined',
    ],
    ['a hold of zero', { ...hold, amount: '0' }, 'amount must be positive'],
    ['a hold over the maximum', { ...hold, amount: (MAX + 1n).toString() }, `amount exceeds the maximum of ${MAX}`],
    ['a hold with a bad currency', { ...hold, currency: 'eur' }, 'currency must be three capital letters, like "EUR"'],
    ['a hold without expiry', { ...hold, expiresInMs: undefined }, 'a hold needs expiresInMs or expiresAt'],
    [
      'a hold with both expiries',
      { ...hold, expiresAt: '2026-12-31T23:59:59Z' },
      'expiresInMs and expiresAt are both given; a hold takes exactly one',
    ],
    [
      'expiresInMs as a string',
      { ...hold, expiresInMs: '60000' },
      'expiresInMs must be a whole number of milliseconds (a JSON number), got a string',
    ],
    [
      'a fractional expiresInMs',
      { ...hold, expiresInMs: 1500.5 },
      'expiresInMs must be a whole number of milliseconds (a JSON number), got 1500.5',
    ],
    [
      'expiresInMs below 1000',
      { ...hold, expiresInMs: 999 },
      `expiresInMs must be between 1000 and ${EXPIRY_MAX_MS}, got 999`,
    ],
    [
      'expiresInMs over the maximum',
      { ...hold, expiresInMs: EXPIRY_MAX_MS + 1 },
      `expiresInMs must be between 1000 and ${EXPIRY_MAX_MS}, got ${EXPIRY_MAX_MS + 1}`,
    ],
    [
      'expiresAt as a number',
      { ...hold, expiresInMs: undefined, expiresAt: 1_800_000_000_000 },
      'expiresAt must be a string, got a number',
    ],
    ...['2026-12-31 23:59:59Z', '2026-12-31T23:59:59+01:00', '2026-12-31T23:59:59', '2026-12-31T23:59:59.1234Z'].map(
      (expiresAt) =>
        [
          `expiresAt ${expiresAt}`,
          { ...hold, expiresInMs: undefined, expiresAt },
          'expiresAt must be a UTC time like "2026-12-31T23:59:59Z" or "2026-12-31T23:59:59.250Z"',
        ] as Refusal,
    ),
    ...['2026-02-29T00:00:00Z', '2026-04-31T12:00:00Z', '2026-13-01T00:00:00Z', '2026-12-31T24:00:00Z'].map(
      (expiresAt) =>
        [
          `expiresAt ${expiresAt}`,
          { ...hold, expiresInMs: undefined, expiresAt },
          `expiresAt is not a real date and time: "${expiresAt}"`,
        ] as Refusal,
    ),
    [
      'an expiresAt second of 60',
      { ...hold, expiresInMs: undefined, expiresAt: '2026-12-31T23:59:60Z' },
      'expiresAt is not a real date and time: "2026-12-31T23:59:60Z"',
    ],
    // Capture and refund amounts, when given.
    ['a capture of zero', { ...capture, amount: '0' }, 'amount must be positive'],
    [
      'a capture over the maximum',
      { ...capture, amount: (MAX + 1n).toString() },
      `amount exceeds the maximum of ${MAX}`,
    ],
    [
      'a capture amount as a number',
      { ...capture, amount: 5 },
      'amount must be a string of decimal digits, got a number',
    ],
    ['a capture amount of null', { ...capture, amount: null }, 'amount must be a string of decimal digits, got null'],
    [
      'a refund amount with a sign',
      { ...refund, amount: '-5' },
      'amount must be a string of decimal digits (no sign, point or exponent)',
    ],
    ['a refund over the maximum', { ...refund, amount: '9'.repeat(40) }, `amount exceeds the maximum of ${MAX}`],
    // Split legs.
    [
      'a split without legs',
      { ...split, legs: undefined },
      'legs must be an array of {to, amount} objects, got a undefined',
    ],
    [
      'legs as an object',
      { ...split, legs: { to: 'b' } },
      'legs must be an array of {to, amount} objects, got an object',
    ],
    ['one leg', { ...split, legs: [{ to: 'b', amount: '1' }] }, 'legs has 1 entries; a split takes 2 to 16'],
    [
      'seventeen legs',
      { ...split, legs: Array.from({ length: 17 }, (_, i) => ({ to: `w${i}`, amount: '1' })) },
      'legs has 17 entries; a split takes 2 to 16',
    ],
    [
      'a leg that is a string',
      { ...split, legs: [split.legs[0], 'c'] },
      'legs[1] must be an object {to, amount}, got a string',
    ],
    [
      'a leg that is null',
      { ...split, legs: [null, split.legs[1]] },
      'legs[0] must be an object {to, amount}, got null',
    ],
    [
      'a leg with an extra field',
      { ...split, legs: [split.legs[0], { to: 'c', amount: '1', currency: 'EUR' }] },
      'unknown field "currency" in legs[1]',
    ],
    [
      'a leg without to',
      { ...split, legs: [split.legs[0], { amount: '1' }] },
      'legs[1].to must be a string, got a undefined',
    ],
    [
      'a leg with a bad to',
      { ...split, legs: [split.legs[0], { to: 'c d', amount: '1' }] },
      'legs[1].to may only contain [A-Za-z0-9._:-]',
    ],
    [
      'a leg to the source',
      { ...split, legs: [split.legs[0], { to: 'a', amount: '1' }] },
      'legs[1].to and from are the same wallet',
    ],
    [
      'two legs to one wallet',
      { ...split, legs: [...split.legs, { to: 'b', amount: '1' }] },
      'legs[2].to repeats legs[0].to; each leg credits another wallet',
    ],
    ['a leg of zero', { ...split, legs: [split.legs[0], { to: 'c', amount: '0' }] }, 'legs[1].amount must be positive'],
    [
      'a leg amount as a number',
      { ...split, legs: [{ to: 'b', amount: 7 }, split.legs[1]] },
      'legs[0].amount must be a string of decimal digits, got a number',
    ],
    [
      'a leg over the maximum',
      { ...split, legs: [split.legs[0], { to: 'c', amount: (MAX + 1n).toString() }] },
      `legs[1].amount exceeds the maximum of ${MAX}`,
    ],
    [
      'legs whose total is over the maximum',
      {
        ...split,
        legs: [
          { to: 'b', amount: MAX.toString() },
          { to: 'c', amount: '1' },
        ],
      },
      `the legs' total ${MAX + 1n} exceeds the maximum of ${MAX}`,
    ],
    [
      'a split with a bad currency',
      { ...split, currency: 'EURO' },
      'currency must be three capital letters, like "EUR"',
    ],
  ])('%s', (_name, data, reason) => {
    expect(validate(JSON.parse(JSON.stringify(data)))).toEqual({ ok: false, reason });
  });

  it('a hold longer than the maximum it is given', () => {
    expect(validateOperationRequest({ ...hold, expiresInMs: 60_000 }, MAX, 59_999)).toEqual({
      ok: false,
      reason: 'expiresInMs must be between 1000 and 59999, got 60000',
    });
  });

  it("holds a credit limit to the worker's CREDIT_LIMIT_MAX when given one", () => {
    expect(validateOperationRequest(creditLimit, MAX, EXPIRY_MAX_MS, 5000n).ok).toBe(true);
    expect(validateOperationRequest(creditLimit, MAX, EXPIRY_MAX_MS, 4999n)).toEqual({
      ok: false,
      reason: 'limit exceeds the maximum of 4999',
    });
  });
});

describe('requestHash of a payment operation', () => {
  it.each([
    ['a transfer (its first version, unchanged)', transfer, 'v1\na\nb\n100\n'],
    ['a transfer with currency', { ...transfer, currency: 'EUR' }, 'v1\na\nb\n100\nEUR'],
    ['a hold with expiresInMs', hold, 'v2\nhold\na\nb\n100\n\n60000\n'],
    [
      'a hold with expiresAt and currency',
      { ...hold, expiresInMs: undefined, expiresAt: '2026-12-31T23:59:59.250Z', currency: 'EUR' },
      'v2\nhold\na\nb\n100\nEUR\n\n2026-12-31T23:59:59.250Z',
    ],
    ['a whole capture', capture, 'v2\ncapture\na\nh-1\n'],
    ['a partial capture', { ...capture, amount: '40' }, 'v2\ncapture\na\nh-1\n40'],
    ['a void', voidOp, 'v2\nvoid\na\nh-1'],
    ['a whole refund', refund, 'v2\nrefund\nb\nop-1\n'],
    ['a partial refund', { ...refund, amount: '5' }, 'v2\nrefund\nb\nop-1\n5'],
    ['a split', split, 'v2\nsplit\na\n\nb\n70\nc\n30'],
    ['a split with currency', { ...split, currency: 'EUR' }, 'v2\nsplit\na\nEUR\nb\n70\nc\n30'],
    ['a credit limit', creditLimit, 'v2\ncredit_limit\na\n5000'],
    ['a credit limit with leading zeros', { ...creditLimit, limit: '007' }, 'v2\ncredit_limit\na\n7'],
    ['a deposit', { ...deposit, amount: '0700' }, 'v2\ndeposit\na\n700\nEUR\nch_3N:x/1'],
    ['a withdrawal', withdrawal, 'v2\nwithdrawal\na\n300\nEUR\nSEPA-88'],
    ['a wallet opened', openWallet, 'v2\nopen_wallet\nn\nEUR\n250'],
    ['a wallet opened without a limit', { ...openWallet, creditLimit: undefined }, 'v2\nopen_wallet\nn\nEUR\n0'],
    ['a wallet opened with a limit of zeros', { ...openWallet, creditLimit: '000' }, 'v2\nopen_wallet\nn\nEUR\n0'],
    ['a wallet frozen', freezeWallet, 'v2\nfreeze_wallet\na\nallowed'],
    ['a wallet frozen, credits said', { ...freezeWallet, credits: 'allowed' }, 'v2\nfreeze_wallet\na\nallowed'],
    ['a wallet frozen for credits too', { ...freezeWallet, credits: 'refused' }, 'v2\nfreeze_wallet\na\nrefused'],
    ['a wallet unfrozen', unfreezeWallet, 'v2\nunfreeze_wallet\na'],
    ['a wallet closed', closeWallet, 'v2\nclose_wallet\na'],
    [
      'a transfer with metadata, its keys sorted',
      { ...transfer, metadata: { order: '8812', note: 'a=b' } },
      'v1\na\nb\n100\n\nnote=a=b\norder=8812',
    ],
    ['a transfer with empty metadata', { ...transfer, metadata: {} }, 'v1\na\nb\n100\n'],
    ['a void with metadata', { ...voidOp, metadata: { case: 'c-1' } }, 'v2\nvoid\na\nh-1\ncase=c-1'],
  ])('%s is the sha256 of its canonical lines', (_name, body, canonical) => {
    const request = accepted(JSON.parse(JSON.stringify(body)));
    expect(requestHashLines(request).join('\n')).toBe(canonical);
    expect(requestHash(request)).toBe(sha256(canonical));
  });

  it('ignores the operationId and differs when any other field differs', () => {
    const bases = [
      hold,
      capture,
      voidOp,
      refund,
      split,
      creditLimit,
      deposit,
      withdrawal,
      openWallet,
      freezeWallet,
      unfreezeWallet,
      closeWallet,
    ];
    const variants: Record<string, unknown>[] = [
      { ...hold, from: 'c' },
      { ...hold, to: 'c' },
      { ...hold, amount: '101' },
      { ...hold, currency: 'EUR' },
      { ...hold, expiresInMs: 60_001 },
      { ...hold, expiresInMs: undefined, expiresAt: '2026-12-31T23:59:59Z' },
      { ...capture, from: 'c' },
      { ...capture, hold: 'h-2' },
      { ...capture, amount: '1' },
      { ...voidOp, from: 'c' },
      { ...voidOp, hold: 'h-2' },
      { ...refund, from: 'c' },
      { ...refund, original: 'op-2' },
      { ...refund, amount: '1' },
      { ...split, from: 'd' },
      { ...split, currency: 'EUR' },
      { ...split, legs: [split.legs[0], { to: 'd', amount: '30' }] },
      { ...split, legs: [split.legs[0], { to: 'c', amount: '31' }] },
      { ...split, legs: [split.legs[1], split.legs[0]] },
      { ...split, legs: [...split.legs, { to: 'd', amount: '1' }] },
      { ...creditLimit, from: 'b' },
      { ...creditLimit, limit: '5001' },
      { ...deposit, to: 'b' },
      { ...deposit, amount: '701' },
      { ...deposit, currency: 'USD' },
      { ...deposit, reference: 'ch_3N:x/2' },
      { ...withdrawal, from: 'b' },
      { ...withdrawal, reference: 'SEPA-89' },
      { ...openWallet, wallet: 'm' },
      { ...openWallet, currency: 'USD' },
      { ...openWallet, creditLimit: '251' },
      { ...freezeWallet, wallet: 'b' },
      { ...freezeWallet, credits: 'refused' },
      { ...unfreezeWallet, wallet: 'b' },
      { ...closeWallet, wallet: 'b' },
      { ...hold, metadata: { order: '1' } },
      { ...hold, metadata: { order: '2' } },
      { ...hold, metadata: { order: '1', note: '' } },
      { ...hold, metadata: { Order: '1' } },
    ];
    const hashes = [...bases, ...variants, transfer].map((body) => requestHash(accepted(body)));
    expect(new Set(hashes).size).toBe(hashes.length);
    for (const body of bases) {
      expect(requestHash(accepted({ ...body, operationId: 'other' }))).toBe(requestHash(accepted(body)));
    }
  });

  it('tells a void from a whole capture of the same hold', () => {
    expect(requestHash(accepted(voidOp))).not.toBe(requestHash(accepted({ ...capture, operationId: 'v-1' })));
  });
});
