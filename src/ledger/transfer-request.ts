// The wire format of a transfer job and its validation: a pure function that either returns a
// typed request or names precisely what is wrong. Nothing outside the format reaches the ledger.

/** `operationId` and wallet ids: 1-128 characters of this alphabet. */
export const ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
export const ID_LENGTH_MAX = 128;
export const CURRENCY_PATTERN = /^[A-Z]{3}$/;
/** Longest decimal string worth parsing; longer is refused before BigInt() sees it. */
export const AMOUNT_DIGITS_MAX = 19;
export const WIRE_FIELDS = ['operationId', 'from', 'to', 'amount', 'currency'] as const;

export interface TransferRequest {
  readonly operationId: string;
  readonly from: string;
  readonly to: string;
  readonly amountMinor: bigint;
  /** Absent: the wallets' own currency is used (and must agree). */
  readonly currency: string | null;
}

/** The JSON object on the queue; amounts travel as decimal strings, never numbers. */
export interface TransferWire {
  operationId: string;
  from: string;
  to: string;
  amount: string;
  currency?: string;
}

export type ValidationResult =
  | { readonly ok: true; readonly request: TransferRequest }
  | { readonly ok: false; readonly reason: string };

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function checkId(field: string, value: unknown): string | null {
  if (typeof value !== 'string') return `${field} must be a string, got ${describe(value)}`;
  if (value.length === 0) return `${field} is empty`;
  if (value.length > ID_LENGTH_MAX) return `${field} is ${value.length} characters long; at most ${ID_LENGTH_MAX}`;
  if (!ID_PATTERN.test(value)) return `${field} may only contain [A-Za-z0-9._:-]`;
  return null;
}

export function validateTransferRequest(data: unknown, amountMax: bigint): ValidationResult {
  const fail = (reason: string): ValidationResult => ({ ok: false, reason });
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return fail(`job data must be a JSON object, got ${describe(data)}`);
  }
  const record = data as Record<string, unknown>;
  const extra = Object.keys(record).filter((k) => !(WIRE_FIELDS as readonly string[]).includes(k));
  if (extra.length > 0) return fail(`unknown field ${JSON.stringify(extra[0]?.slice(0, 40))}`);

  for (const field of ['operationId', 'from', 'to'] as const) {
    const problem = checkId(field, record[field]);
    if (problem !== null) return fail(problem);
  }
  const operationId = record.operationId as string;
  const from = record.from as string;
  const to = record.to as string;
  if (from === to) return fail('from and to are the same wallet');

  const amount = record.amount;
  if (typeof amount !== 'string') return fail(`amount must be a string of decimal digits, got ${describe(amount)}`);
  if (!/^\d+$/.test(amount)) return fail('amount must be a string of decimal digits (no sign, point or exponent)');
  if (amount.length > AMOUNT_DIGITS_MAX) return fail(`amount exceeds the maximum of ${amountMax}`);
  const amountMinor = BigInt(amount);
  if (amountMinor <= 0n) return fail('amount must be positive');
  if (amountMinor > amountMax) return fail(`amount exceeds the maximum of ${amountMax}`);

  let currency: string | null = null;
  if (record.currency !== undefined) {
    if (typeof record.currency !== 'string' || !CURRENCY_PATTERN.test(record.currency)) {
      return fail('currency must be three capital letters, like "EUR"');
    }
    currency = record.currency;
  }
  return { ok: true, request: { operationId, from, to, amountMinor, currency } };
}

export function toWire(request: TransferRequest): TransferWire {
  const wire: TransferWire = {
    operationId: request.operationId,
    from: request.from,
    to: request.to,
    amount: request.amountMinor.toString(),
  };
  if (request.currency !== null) wire.currency = request.currency;
  return wire;
}
