// One rule at both ends (issue 41, 4.2): the intake's SQL must refuse exactly the bodies the
// worker's validation refuses, or a request is stored that no worker can ever decide. One table of
// bodies, valid and invalid, covering every rule and built from WIRE_LIMITS, runs through both:
// validateOperationRequest() at the widest a worker may be configured (the ceilings) and
// request_operation() in SQL, body by body. A row's `max` is the expiry maximum handed to both;
// null is SQL's NULL, which means the ceiling.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTINGS } from '../../src/config/settings.ts';
import { serverErrorOf } from '../../src/db/database-errors.ts';
import { validateOperationRequest } from '../../src/ledger/transfer-request.ts';
import { WIRE_LIMITS } from '../../src/ledger/wire-limits.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_onerule');
});
afterAll(async () => {
  await db.drop();
});

const L = WIRE_LIMITS;
const CEILING = L.amountCeilingMinor;
const WEEK_MS = 604_800_000;

interface Row {
  readonly name: string;
  readonly body: unknown;
  readonly valid: boolean;
  /** The expiry maximum given to both; null: SQL gets NULL, the validation the ceiling. Default: a week. */
  readonly max?: number | null;
}

let n = 0;
const op = (): string => {
  n += 1;
  return `one-rule-${n}`;
};
const transfer = (fields: Record<string, unknown> = {}) => ({
  operationId: op(),
  from: 'a',
  to: 'b',
  amount: '5',
  ...fields,
});
const hold = (fields: Record<string, unknown> = {}) => ({
  operationId: op(),
  kind: 'hold',
  from: 'a',
  to: 'b',
  amount: '5',
  ...fields,
});
/** A deposit's or withdrawal's body; `fields` name its wallet and override the rest (undefined drops one). */
const settled = (kind: 'deposit' | 'withdrawal', fields: Record<string, unknown>) =>
  JSON.parse(JSON.stringify({ operationId: op(), kind, amount: '5', currency: 'EUR', reference: 'r-1', ...fields }));
const legs = (count: number, amount = '1') => Array.from({ length: count }, (_, i) => ({ to: `leg-${i}`, amount }));
const split = (fields: Record<string, unknown> = {}) => ({
  operationId: op(),
  kind: 'split',
  from: 'a',
  legs: legs(2),
  ...fields,
});

const ROWS: readonly Row[] = [
  // Ids.
  { name: 'a transfer', body: transfer(), valid: true },
  {
    name: 'a transfer that says its kind, with a currency',
    body: transfer({ kind: 'transfer', currency: 'EUR' }),
    valid: true,
  },
  {
    name: `ids of ${L.idLengthMax} characters`,
    body: transfer({ operationId: 'o'.repeat(L.idLengthMax), from: 'f'.repeat(L.idLengthMax) }),
    valid: true,
  },
  {
    name: `an operationId of ${L.idLengthMax + 1} characters`,
    body: transfer({ operationId: 'o'.repeat(L.idLengthMax + 1) }),
    valid: false,
  },
  { name: 'a wallet id with a space', body: transfer({ to: 'b c' }), valid: false },
  { name: 'an empty wallet id', body: transfer({ from: '' }), valid: false },
  { name: 'an operationId that is a number', body: transfer({ operationId: 123 }), valid: false },
  { name: 'a wallet id that is true', body: transfer({ from: true }), valid: false },
  {
    name: 'a payment id that is a number',
    body: { operationId: op(), kind: 'void', from: 'a', hold: 7 },
    valid: false,
  },
  { name: 'the same wallet twice', body: transfer({ to: 'a' }), valid: false },
  // Amounts.
  { name: 'an amount of the ceiling', body: transfer({ amount: CEILING.toString() }), valid: true },
  { name: 'an amount with leading zeros', body: transfer({ amount: '007' }), valid: true },
  { name: 'an amount of 9e18', body: transfer({ amount: '9000000000000000000' }), valid: false },
  { name: 'an amount one above the ceiling', body: transfer({ amount: (CEILING + 1n).toString() }), valid: false },
  {
    name: 'a payment amount one above the ceiling',
    body: hold({ amount: (CEILING + 1n).toString(), expiresInMs: 60_000 }),
    valid: false,
  },
  {
    name: 'a capture of 9e18',
    body: { operationId: op(), kind: 'capture', from: 'a', hold: 'h', amount: '9000000000000000000' },
    valid: false,
  },
  {
    name: `an amount of ${L.amountDigitsMax + 1} digits`,
    body: transfer({ amount: '1'.repeat(L.amountDigitsMax + 1) }),
    valid: false,
  },
  { name: 'an amount above bigint', body: transfer({ amount: '9999999999999999999' }), valid: false },
  { name: 'an amount of 0', body: transfer({ amount: '0' }), valid: false },
  { name: 'a negative amount', body: transfer({ amount: '-1' }), valid: false },
  { name: 'an amount as a number', body: transfer({ amount: 5 }), valid: false },
  { name: 'an amount with an exponent', body: transfer({ amount: '1e3' }), valid: false },
  // Currencies.
  { name: 'a currency in small letters', body: transfer({ currency: 'eur' }), valid: false },
  { name: 'a currency of null', body: transfer({ currency: null }), valid: false },
  { name: 'a split currency of null', body: split({ currency: null }), valid: false },
  { name: 'a hold currency of four letters', body: hold({ currency: 'EURO', expiresInMs: 60_000 }), valid: false },
  // expiresAt, a real date.
  { name: 'a hold until a real instant', body: hold({ expiresAt: '2026-12-31T23:59:59Z' }), valid: true },
  {
    name: 'a hold until a leap day, to the millisecond',
    body: hold({ expiresAt: '2028-02-29T00:00:00.250Z' }),
    valid: true,
  },
  { name: 'a hold until 30 February', body: hold({ expiresAt: '2026-02-30T00:00:00Z' }), valid: false },
  {
    name: 'a hold until 29 February of a common year',
    body: hold({ expiresAt: '2027-02-29T00:00:00Z' }),
    valid: false,
  },
  { name: 'a hold until 31 April', body: hold({ expiresAt: '2026-04-31T12:00:00Z' }), valid: false },
  { name: 'a hold until month 13', body: hold({ expiresAt: '2026-13-01T00:00:00Z' }), valid: false },
  { name: 'a hold until hour 24', body: hold({ expiresAt: '2026-12-31T24:00:00Z' }), valid: false },
  { name: 'a hold until minute 60', body: hold({ expiresAt: '2026-12-31T23:60:00Z' }), valid: false },
  { name: 'a hold until second 60', body: hold({ expiresAt: '2026-12-31T23:59:60Z' }), valid: false },
  { name: 'a hold until year 0', body: hold({ expiresAt: '0000-01-01T00:00:00Z' }), valid: false },
  { name: 'a hold until a local time', body: hold({ expiresAt: '2026-12-31T23:59:59+01:00' }), valid: false },
  { name: 'a hold until a number', body: hold({ expiresAt: 1_800_000_000_000 }), valid: false },
  // expiresInMs bounds.
  { name: 'a hold of the shortest expiresInMs', body: hold({ expiresInMs: L.holdExpiresInMsMin }), valid: true },
  { name: 'a hold of the longest expiresInMs', body: hold({ expiresInMs: WEEK_MS }), valid: true },
  {
    name: 'a hold below the shortest expiresInMs',
    body: hold({ expiresInMs: L.holdExpiresInMsMin - 1 }),
    valid: false,
  },
  { name: 'a hold above the longest expiresInMs', body: hold({ expiresInMs: WEEK_MS + 1 }), valid: false },
  {
    name: 'expiresInMs 999999999999 with a NULL maximum',
    body: hold({ expiresInMs: 999_999_999_999 }),
    valid: false,
    max: null,
  },
  {
    name: 'expiresInMs of the ceiling with a NULL maximum',
    body: hold({ expiresInMs: L.holdExpiryCeilingMs }),
    valid: true,
    max: null,
  },
  {
    name: 'expiresInMs above the ceiling with a NULL maximum',
    body: hold({ expiresInMs: L.holdExpiryCeilingMs + 1 }),
    valid: false,
    max: null,
  },
  { name: 'a fractional expiresInMs', body: hold({ expiresInMs: 1500.5 }), valid: false },
  { name: 'expiresInMs as a string', body: hold({ expiresInMs: '60000' }), valid: false },
  {
    name: 'a hold with both expiries',
    body: hold({ expiresInMs: 60_000, expiresAt: '2026-12-31T23:59:59Z' }),
    valid: false,
  },
  { name: 'a hold with neither expiry', body: hold(), valid: false },
  {
    name: 'a hold without an amount',
    body: { operationId: op(), kind: 'hold', from: 'a', to: 'b', expiresInMs: 60_000 },
    valid: false,
  },
  // Split legs: count and total.
  { name: `a split of ${L.splitLegsMin} legs`, body: split(), valid: true },
  { name: `a split of ${L.splitLegsMax} legs`, body: split({ legs: legs(L.splitLegsMax) }), valid: true },
  { name: `a split of ${L.splitLegsMin - 1} leg`, body: split({ legs: legs(L.splitLegsMin - 1) }), valid: false },
  { name: `a split of ${L.splitLegsMax + 1} legs`, body: split({ legs: legs(L.splitLegsMax + 1) }), valid: false },
  {
    name: 'split legs totalling the ceiling',
    body: split({
      legs: [
        { to: 'b', amount: (CEILING - 1n).toString() },
        { to: 'c', amount: '1' },
      ],
    }),
    valid: true,
  },
  { name: 'split legs totalling 1.8e18', body: split({ legs: legs(2, '900000000000000000') }), valid: false },
  {
    name: 'split legs totalling one above the ceiling',
    body: split({
      legs: [
        { to: 'b', amount: CEILING.toString() },
        { to: 'c', amount: '1' },
      ],
    }),
    valid: false,
  },
  {
    name: 'a split that pays its source',
    body: split({
      legs: [
        { to: 'a', amount: '1' },
        { to: 'c', amount: '1' },
      ],
    }),
    valid: false,
  },
  {
    name: 'a split that pays a wallet twice',
    body: split({
      legs: [
        { to: 'b', amount: '1' },
        { to: 'b', amount: '1' },
      ],
    }),
    valid: false,
  },
  {
    name: 'a split leg of 0',
    body: split({
      legs: [
        { to: 'b', amount: '0' },
        { to: 'c', amount: '1' },
      ],
    }),
    valid: false,
  },
  {
    name: 'a split leg with another field',
    body: split({
      legs: [
        { to: 'b', amount: '1', memo: 'x' },
        { to: 'c', amount: '1' },
      ],
    }),
    valid: false,
  },
  { name: 'split legs that are not an array', body: split({ legs: { to: 'b', amount: '1' } }), valid: false },
  // Kinds and fields.
  { name: 'a capture of all of it', body: { operationId: op(), kind: 'capture', from: 'a', hold: 'h' }, valid: true },
  {
    name: 'a capture of some',
    body: { operationId: op(), kind: 'capture', from: 'a', hold: 'h', amount: '3' },
    valid: true,
  },
  { name: 'a capture without its hold', body: { operationId: op(), kind: 'capture', from: 'a' }, valid: false },
  { name: 'a void', body: { operationId: op(), kind: 'void', from: 'a', hold: 'h' }, valid: true },
  {
    name: 'a void with an amount',
    body: { operationId: op(), kind: 'void', from: 'a', hold: 'h', amount: '1' },
    valid: false,
  },
  { name: 'a refund', body: { operationId: op(), kind: 'refund', from: 'b', original: 'o', amount: '2' }, valid: true },
  { name: 'a credit limit', body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: '5' }, valid: true },
  {
    name: 'a credit limit of 0',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: '0' },
    valid: true,
  },
  {
    name: 'a credit limit at the ceiling',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: L.creditLimitCeilingMinor.toString() },
    valid: true,
  },
  {
    name: 'a credit limit one above the ceiling',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: (L.creditLimitCeilingMinor + 1n).toString() },
    valid: false,
  },
  {
    name: 'a credit limit of 20 digits',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: '9'.repeat(20) },
    valid: false,
  },
  {
    name: 'a credit limit below zero',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: '-1' },
    valid: false,
  },
  {
    name: 'a credit limit as a number',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: 5 },
    valid: false,
  },
  { name: 'a credit limit without one', body: { operationId: op(), kind: 'credit_limit', from: 'a' }, valid: false },
  {
    name: 'a credit limit with an amount',
    body: { operationId: op(), kind: 'credit_limit', from: 'a', limit: '5', amount: '5' },
    valid: false,
  },
  { name: 'a deposit', body: settled('deposit', { to: 'a' }), valid: true },
  { name: 'a withdrawal', body: settled('withdrawal', { from: 'a' }), valid: true },
  { name: 'a deposit naming from', body: settled('deposit', { from: 'a' }), valid: false },
  { name: 'a withdrawal naming to', body: settled('withdrawal', { from: 'a', to: 'b' }), valid: false },
  { name: 'a deposit without currency', body: settled('deposit', { to: 'a', currency: undefined }), valid: false },
  { name: 'a withdrawal without amount', body: settled('withdrawal', { from: 'a', amount: undefined }), valid: false },
  { name: 'a deposit of zero', body: settled('deposit', { to: 'a', amount: '0' }), valid: false },
  {
    name: 'a reference of 128 characters',
    body: settled('deposit', { to: 'a', reference: '!'.repeat(128) }),
    valid: true,
  },
  {
    name: 'a reference of 129 characters',
    body: settled('deposit', { to: 'a', reference: '!'.repeat(129) }),
    valid: false,
  },
  { name: 'a reference with a space', body: settled('withdrawal', { from: 'a', reference: 'a b' }), valid: false },
  { name: 'a reference with a newline', body: settled('withdrawal', { from: 'a', reference: 'a\nb' }), valid: false },
  { name: 'a reference that is a number', body: settled('withdrawal', { from: 'a', reference: 5 }), valid: false },
  { name: 'a reference beyond ASCII', body: settled('withdrawal', { from: 'a', reference: 'café' }), valid: false },
  {
    name: 'a wallet opened',
    body: { operationId: op(), kind: 'open_wallet', wallet: 'n', currency: 'EUR' },
    valid: true,
  },
  {
    name: 'a wallet opened with a limit',
    body: { operationId: op(), kind: 'open_wallet', wallet: 'n', currency: 'EUR', creditLimit: '0' },
    valid: true,
  },
  {
    name: 'a wallet opened above the limit ceiling',
    body: {
      operationId: op(),
      kind: 'open_wallet',
      wallet: 'n',
      currency: 'EUR',
      creditLimit: (L.creditLimitCeilingMinor + 1n).toString(),
    },
    valid: false,
  },
  {
    name: 'a wallet opened with a numeric limit',
    body: { operationId: op(), kind: 'open_wallet', wallet: 'n', currency: 'EUR', creditLimit: 5 },
    valid: false,
  },
  {
    name: 'a wallet opened without currency',
    body: { operationId: op(), kind: 'open_wallet', wallet: 'n' },
    valid: false,
  },
  {
    name: 'a wallet opened naming from',
    body: { operationId: op(), kind: 'open_wallet', from: 'n', currency: 'EUR' },
    valid: false,
  },
  {
    name: 'a wallet opened with a bad id',
    body: { operationId: op(), kind: 'open_wallet', wallet: '$held:a', currency: 'EUR' },
    valid: false,
  },
  { name: 'a wallet frozen', body: { operationId: op(), kind: 'freeze_wallet', wallet: 'a' }, valid: true },
  {
    name: 'a wallet frozen for credits too',
    body: { operationId: op(), kind: 'freeze_wallet', wallet: 'a', credits: 'refused' },
    valid: true,
  },
  {
    name: 'a wallet frozen sometimes',
    body: { operationId: op(), kind: 'freeze_wallet', wallet: 'a', credits: 'sometimes' },
    valid: false,
  },
  {
    name: 'a wallet frozen with credits true',
    body: { operationId: op(), kind: 'freeze_wallet', wallet: 'a', credits: true },
    valid: false,
  },
  { name: 'a wallet unfrozen', body: { operationId: op(), kind: 'unfreeze_wallet', wallet: 'a' }, valid: true },
  { name: 'a wallet closed', body: { operationId: op(), kind: 'close_wallet', wallet: 'a' }, valid: true },
  {
    name: 'a wallet closed with an amount',
    body: { operationId: op(), kind: 'close_wallet', wallet: 'a', amount: '1' },
    valid: false,
  },
  { name: 'a wallet closed without its wallet', body: { operationId: op(), kind: 'close_wallet' }, valid: false },
  {
    name: 'a transfer with metadata',
    body: transfer({ metadata: { order: '8812', note: 'Café ☕ a=b' } }),
    valid: true,
  },
  { name: 'a transfer with empty metadata', body: transfer({ metadata: {} }), valid: true },
  {
    name: 'a hold with metadata',
    body: { ...transfer({ kind: 'hold', expiresInMs: 60_000 }), metadata: { order: '1' } },
    valid: true,
  },
  { name: 'metadata that is null', body: transfer({ metadata: null }), valid: false },
  { name: 'metadata that is an array', body: transfer({ metadata: ['a'] }), valid: false },
  { name: 'metadata that is a string', body: transfer({ metadata: 'a' }), valid: false },
  { name: 'a metadata value that is a number', body: transfer({ metadata: { order: 8812 } }), valid: false },
  { name: 'a metadata value with a tab', body: transfer({ metadata: { note: 'a\tb' } }), valid: false },
  { name: 'a metadata value with DEL', body: transfer({ metadata: { note: 'a\u007fb' } }), valid: false },
  {
    name: 'a metadata value of the longest',
    body: transfer({ metadata: { note: 'é'.repeat(L.metadataValueLengthMax) } }),
    valid: true,
  },
  {
    name: 'a metadata value one character too long',
    body: transfer({ metadata: { note: 'é'.repeat(L.metadataValueLengthMax + 1) } }),
    valid: false,
  },
  {
    name: 'a metadata key of the longest',
    body: transfer({ metadata: { ['k'.repeat(L.metadataKeyLengthMax)]: 'v' } }),
    valid: true,
  },
  {
    name: 'a metadata key one character too long',
    body: transfer({ metadata: { ['k'.repeat(L.metadataKeyLengthMax + 1)]: 'v' } }),
    valid: false,
  },
  { name: 'an empty metadata key', body: transfer({ metadata: { '': 'v' } }), valid: false },
  { name: 'a metadata key beyond ASCII', body: transfer({ metadata: { clé: 'v' } }), valid: false },
  {
    name: 'the most metadata keys',
    body: transfer({
      metadata: Object.fromEntries(Array.from({ length: L.metadataKeysMax }, (_, i) => [`k${i}`, 'v'])),
    }),
    valid: true,
  },
  {
    name: 'one metadata key too many',
    body: transfer({
      metadata: Object.fromEntries(Array.from({ length: L.metadataKeysMax + 1 }, (_, i) => [`k${i}`, 'v'])),
    }),
    valid: false,
  },
  {
    name: 'metadata of the most bytes',
    body: transfer({
      metadata: { a: 'é'.repeat(255), b: 'é'.repeat(255), c: 'é'.repeat(255), d: 'é'.repeat(255), e: 'x'.repeat(3) },
    }),
    valid: true,
  },
  {
    name: 'metadata one byte over',
    body: transfer({
      metadata: { a: 'é'.repeat(255), b: 'é'.repeat(255), c: 'é'.repeat(255), d: 'é'.repeat(255), e: 'x'.repeat(4) },
    }),
    valid: false,
  },
  { name: 'an unknown kind', body: transfer({ kind: 'payout' }), valid: false },
  { name: 'a kind of null', body: transfer({ kind: null }), valid: false },
  { name: 'a kind that is a number', body: transfer({ kind: 5 }), valid: false },
  { name: 'an unknown field', body: transfer({ memo: 'x' }), valid: false },
  { name: 'a body that is an array', body: [transfer()], valid: false },
];

/**
 * What request_operation() says of a body, in a transaction rolled back: accepted, refused (22023,
 * the intake's refusal), or another error, named.
 */
async function sqlVerdict(body: unknown, max: number | null): Promise<string> {
  const client = await db.pg.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ answer: string }>(
      'SELECT request_operation($1::jsonb, $2::bigint) AS answer',
      [JSON.stringify(body), max],
    );
    if (rows[0]?.answer !== 'requested') throw new Error(`request_operation answered ${rows[0]?.answer}`);
    return 'accepted';
  } catch (err) {
    const server = serverErrorOf(err);
    if (server?.sqlState === '22023') return 'refused';
    if (server !== null) return `failed with ${server.sqlState}: ${server.message}`;
    throw err;
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

describe('the intake SQL and the worker validation', () => {
  it("take their ceilings from the settings' bounds: the largest TRANSFER_AMOUNT_MAX and HOLD_EXPIRY_MAX_MS", () => {
    expect(SETTINGS.TRANSFER_AMOUNT_MAX.pattern.test(CEILING.toString())).toBe(true);
    expect(SETTINGS.TRANSFER_AMOUNT_MAX.pattern.test((CEILING + 1n).toString())).toBe(false);
    expect(L.holdExpiryCeilingMs).toBe(SETTINGS.HOLD_EXPIRY_MAX_MS.max);
    expect(L.holdExpiresInMsMin).toBe(SETTINGS.HOLD_EXPIRY_MAX_MS.min);
  });

  it(`agree on each of ${ROWS.length} bodies`, async () => {
    const verdicts = [];
    for (const row of ROWS) {
      const max = row.max === undefined ? WEEK_MS : row.max;
      const ts = validateOperationRequest(row.body, CEILING, max ?? L.holdExpiryCeilingMs).ok ? 'accepted' : 'refused';
      const sql = await sqlVerdict(row.body, max);
      verdicts.push({ name: row.name, expected: row.valid ? 'accepted' : 'refused', ts, sql });
    }
    const disagreements = verdicts.filter((v) => v.ts !== v.expected || v.sql !== v.expected);
    expect(disagreements).toEqual([]);
  });

  it('request_transfer() refuses an amount above the ceiling, as the validation does', async () => {
    for (const amount of [CEILING, CEILING + 1n, 9_000_000_000_000_000_000n]) {
      const ts = validateOperationRequest(transfer({ amount: amount.toString() }), CEILING, WEEK_MS).ok;
      const client = await db.pg.connect();
      let sql: boolean;
      try {
        await client.query('BEGIN');
        await client.query("SELECT request_transfer($1, 'a', 'b', $2::bigint, NULL)", [op(), amount.toString()]);
        sql = true;
      } catch (err) {
        if (serverErrorOf(err)?.sqlState !== '22023') throw err;
        sql = false;
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
      expect({ amount, sql }).toEqual({ amount, sql: ts });
    }
  });

  it('request_operation() refuses an expiry maximum outside what a worker may have', async () => {
    for (const max of [L.holdExpiresInMsMin - 1, L.holdExpiryCeilingMs + 1]) {
      await expect(sqlVerdict(transfer(), max)).resolves.toBe('refused');
    }
  });
});
