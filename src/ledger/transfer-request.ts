// The wire format of a transfer job, of the payment operations (hold, capture, void, refund,
// split) and of a credit limit change (credit_limit), and their validation: a pure function that either returns a typed request or names
// precisely what is wrong. Nothing outside the format reaches the ledger. Its limits are
// WIRE_LIMITS (wire-limits.ts), which the intake's SQL enforces too.
import { WIRE_LIMITS } from './wire-limits.ts';

/** `operationId` and wallet ids: 1-128 characters of this alphabet. */
export const ID_PATTERN = new RegExp(`^[A-Za-z0-9._:-]{1,${WIRE_LIMITS.idLengthMax}}$`);
export const ID_LENGTH_MAX = WIRE_LIMITS.idLengthMax;
export const CURRENCY_PATTERN = /^[A-Z]{3}$/;
/** Longest decimal string worth parsing; longer is refused before BigInt() sees it. */
export const AMOUNT_DIGITS_MAX = WIRE_LIMITS.amountDigitsMax;
export const WIRE_FIELDS = ['operationId', 'from', 'to', 'amount', 'currency', 'metadata'] as const;

/**
 * An operation's metadata: string values by key, within WIRE_LIMITS (at most 16 keys of
 * [A-Za-z0-9._:-], values of at most 256 characters without control characters, 2,048 bytes of
 * keys and values in all). Part of the request: kept with its record and its event.
 */
export type Metadata = Readonly<Record<string, string>>;

/** What every request may carry besides its kind's fields. */
export interface WithMetadata {
  /** Absent when the message has none. */
  readonly metadata?: Metadata;
}

/** What every wire object may carry besides its kind's fields. */
export interface WireMetadata {
  metadata?: Record<string, string>;
}

export interface TransferRequest extends WithMetadata {
  readonly operationId: string;
  readonly from: string;
  readonly to: string;
  readonly amountMinor: bigint;
  /** Absent: the wallets' own currency is used (and must agree). */
  readonly currency: string | null;
}

/** The JSON object on the queue; amounts travel as decimal strings, never numbers. */
export interface TransferWire extends WireMetadata {
  operationId: string;
  from: string;
  to: string;
  amount: string;
  currency?: string;
}

/** A transfer's validation: the typed request, or what is wrong with the message. */
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

/**
 * Validates a transfer's wire object as the worker does (TRANSFER_AMOUNT_MAX as `amountMax`);
 * never throws: a refusal is `{ ok: false, reason }`.
 */
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

  const amount = parseAmount('amount', record.amount, amountMax);
  if (typeof amount === 'string') return fail(amount);

  const currency = parseCurrency(record.currency);
  if (currency === undefined) return fail(CURRENCY_PROBLEM);
  const metadata = parseMetadata(record.metadata);
  if (typeof metadata === 'string') return fail(metadata);
  const request: TransferRequest = { operationId, from, to, amountMinor: amount, currency };
  return { ok: true, request: metadata === undefined ? request : { ...request, metadata } };
}

/** Characters a metadata value may not hold: C0 controls and DEL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters refused.
const METADATA_CONTROL = /[\u0000-\u001f\u007f]/;
const METADATA_KEY = new RegExp(`^[A-Za-z0-9._:-]{1,${WIRE_LIMITS.metadataKeyLengthMax}}$`);

/** An operation's metadata, undefined when absent, or what is wrong with it (request_metadata_problem() in SQL). */
export function parseMetadata(value: unknown): Metadata | undefined | string {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return 'metadata must be an object of string values';
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > WIRE_LIMITS.metadataKeysMax) return `metadata has more than ${WIRE_LIMITS.metadataKeysMax} keys`;
  let bytes = 0;
  for (const [key, text] of [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (!METADATA_KEY.test(key)) {
      return `every metadata key must be 1-${WIRE_LIMITS.metadataKeyLengthMax} characters of [A-Za-z0-9._:-]`;
    }
    if (
      typeof text !== 'string' ||
      [...text].length > WIRE_LIMITS.metadataValueLengthMax ||
      METADATA_CONTROL.test(text)
    ) {
      return `metadata.${key} must be a string of at most ${WIRE_LIMITS.metadataValueLengthMax} characters without control characters`;
    }
    bytes += Buffer.byteLength(key, 'utf8') + Buffer.byteLength(text, 'utf8');
  }
  if (bytes > WIRE_LIMITS.metadataBytesMax) {
    return `metadata is ${bytes} bytes of keys and values; at most ${WIRE_LIMITS.metadataBytesMax}`;
  }
  return value as Metadata;
}

/** A positive amount in minor units, at most `amountMax`, from its decimal string; or what is wrong with it. */
function parseAmount(field: string, value: unknown, amountMax: bigint): bigint | string {
  if (typeof value !== 'string') return `${field} must be a string of decimal digits, got ${describe(value)}`;
  if (!/^\d+$/.test(value)) return `${field} must be a string of decimal digits (no sign, point or exponent)`;
  if (value.length > AMOUNT_DIGITS_MAX) return `${field} exceeds the maximum of ${amountMax}`;
  const amountMinor = BigInt(value);
  if (amountMinor <= 0n) return `${field} must be positive`;
  if (amountMinor > amountMax) return `${field} exceeds the maximum of ${amountMax}`;
  return amountMinor;
}

const CURRENCY_PROBLEM = 'currency must be three capital letters, like "EUR"';

/** Null when absent (the wallets' own currency), the code when well formed, undefined when malformed. */
function parseCurrency(value: unknown): string | null | undefined {
  if (value === undefined) return null;
  return typeof value === 'string' && CURRENCY_PATTERN.test(value) ? value : undefined;
}

export function toWire(request: TransferRequest): TransferWire {
  const wire: TransferWire = {
    operationId: request.operationId,
    from: request.from,
    to: request.to,
    amount: request.amountMinor.toString(),
  };
  if (request.currency !== null) wire.currency = request.currency;
  if (request.metadata !== undefined) wire.metadata = { ...request.metadata };
  return wire;
}

// Payment operations. Every kind but a transfer names itself in `kind`; `from` is always the
// wallet the operation debits, the one the worker locks and fences and the queue shard follows
// (a deposit names only its `to`, a wallet operation its `wallet`: walletOf()).

/**
 * Every kind of operation: a transfer, the payment operations, a credit limit change, money
 * entering (deposit) or leaving (withdrawal) the ledger through its currency's settlement account,
 * and the wallet operations: a wallet opened, frozen, unfrozen and closed.
 */
export const OPERATION_KINDS = [
  'transfer',
  'hold',
  'capture',
  'void',
  'refund',
  'split',
  'credit_limit',
  'deposit',
  'withdrawal',
  'open_wallet',
  'freeze_wallet',
  'unfreeze_wallet',
  'close_wallet',
] as const;
/** One of OPERATION_KINDS. */
export type OperationKind = (typeof OPERATION_KINDS)[number];
export type PaymentKind = Exclude<OperationKind, 'transfer'>;

/** The shortest hold a producer may ask for with `expiresInMs`; the longest is HOLD_EXPIRY_MAX_MS. */
export const HOLD_EXPIRES_IN_MS_MIN = WIRE_LIMITS.holdExpiresInMsMin;
/** A split credits at least two wallets (one is a transfer) and at most this many. */
export const SPLIT_LEGS_MIN = WIRE_LIMITS.splitLegsMin;
export const SPLIT_LEGS_MAX = WIRE_LIMITS.splitLegsMax;
/** `expiresAt`: a UTC instant to the second or the millisecond, the form SQL parses the same way. */
export const EXPIRES_AT_PATTERN = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,3})?Z$/;

/** The fields each kind's wire object may carry; a transfer's may also say `kind: "transfer"`. */
export const OPERATION_WIRE_FIELDS: Readonly<Record<OperationKind, readonly string[]>> = {
  transfer: [...WIRE_FIELDS, 'kind'],
  hold: ['operationId', 'kind', 'from', 'to', 'amount', 'currency', 'expiresInMs', 'expiresAt'],
  capture: ['operationId', 'kind', 'from', 'hold', 'amount'],
  void: ['operationId', 'kind', 'from', 'hold'],
  refund: ['operationId', 'kind', 'from', 'original', 'amount'],
  split: ['operationId', 'kind', 'from', 'legs', 'currency'],
  credit_limit: ['operationId', 'kind', 'from', 'limit'],
  deposit: ['operationId', 'kind', 'to', 'amount', 'currency', 'reference'],
  withdrawal: ['operationId', 'kind', 'from', 'amount', 'currency', 'reference'],
  open_wallet: ['operationId', 'kind', 'wallet', 'currency', 'creditLimit'],
  freeze_wallet: ['operationId', 'kind', 'wallet', 'credits'],
  unfreeze_wallet: ['operationId', 'kind', 'wallet'],
  close_wallet: ['operationId', 'kind', 'wallet'],
};

/** What a freeze_wallet does to credits: `allowed` (the default: debits refused only) or `refused` too. */
export const FREEZE_CREDITS = ['allowed', 'refused'] as const;
/** One of FREEZE_CREDITS. */
export type FreezeCredits = (typeof FREEZE_CREDITS)[number];

/** A deposit's or withdrawal's external reference (the card processor's, the bank's): printable ASCII, no spaces. */
export const REFERENCE_PATTERN = new RegExp(`^[!-~]{1,${WIRE_LIMITS.idLengthMax}}$`);

/** Moves `amountMinor` from `from` to its holding wallet until a capture, a void or the expiry. */
export interface HoldRequest extends WithMetadata {
  readonly kind: 'hold';
  readonly operationId: string;
  readonly from: string;
  /** The payee a capture credits. */
  readonly to: string;
  readonly amountMinor: bigint;
  readonly currency: string | null;
  /** Exactly one of expiresInMs and expiresAt is set. */
  readonly expiresInMs: number | null;
  /** As given on the wire, so the request hash is the one SQL computes from the same text. */
  readonly expiresAt: string | null;
}

export interface CaptureRequest extends WithMetadata {
  readonly kind: 'capture';
  readonly operationId: string;
  /** The hold's source wallet. */
  readonly from: string;
  /** The hold's operationId. */
  readonly hold: string;
  /** Null: all of the held amount. */
  readonly amountMinor: bigint | null;
}

export interface VoidRequest extends WithMetadata {
  readonly kind: 'void';
  readonly operationId: string;
  /** The hold's source wallet. */
  readonly from: string;
  /** The hold's operationId. */
  readonly hold: string;
}

export interface RefundRequest extends WithMetadata {
  readonly kind: 'refund';
  readonly operationId: string;
  /** The original's destination (the wallet that was credited), now debited. */
  readonly from: string;
  /** The operationId of an applied transfer, a captured hold or an applied split. */
  readonly original: string;
  /** Null: what is left of the original. */
  readonly amountMinor: bigint | null;
}

export interface SplitLeg {
  readonly to: string;
  readonly amountMinor: bigint;
}

export interface SplitRequest extends WithMetadata {
  readonly kind: 'split';
  readonly operationId: string;
  /** Debited by the legs' total. */
  readonly from: string;
  /** Credited in the order given; the order is part of the request hash. */
  readonly legs: readonly SplitLeg[];
  readonly currency: string | null;
}

/**
 * Sets the credit limit of `from`: how far below zero its debits may take its balance. Decided and
 * fenced on that wallet like a debit; a limit below what the wallet already uses (its balance below
 * zero) is refused `limit_below_used`.
 */
export interface CreditLimitRequest extends WithMetadata {
  readonly kind: 'credit_limit';
  readonly operationId: string;
  /** The wallet whose limit changes. */
  readonly from: string;
  /** The new limit in minor units, 0 to CREDIT_LIMIT_MAX. */
  readonly limitMinor: bigint;
}

/**
 * Money entering the ledger from the outside world: credits `to`, debits the currency's settlement
 * account `$settlement:<currency>`. Decided and fenced on `to`, the one wallet it names.
 */
export interface DepositRequest extends WithMetadata {
  readonly kind: 'deposit';
  readonly operationId: string;
  readonly to: string;
  readonly amountMinor: bigint;
  readonly currency: string;
  /** The outside world's id of the money (a card processor's charge, a bank transfer). */
  readonly reference: string;
}

/**
 * Money leaving the ledger for the outside world: debits `from` (down to minus its credit limit,
 * like every debit), credits the currency's settlement account. A payout that can fail at the
 * bank is a hold whose capture (to a payout wallet) or void settles it.
 */
export interface WithdrawalRequest extends WithMetadata {
  readonly kind: 'withdrawal';
  readonly operationId: string;
  readonly from: string;
  readonly amountMinor: bigint;
  readonly currency: string;
  readonly reference: string;
}

/**
 * Opens `wallet` in `currency`, empty, with a credit limit (0 when the wire says none). Refused
 * `wallet_exists` when the id has a row, a closed wallet's included: an id is opened once.
 */
export interface OpenWalletRequest extends WithMetadata {
  readonly kind: 'open_wallet';
  readonly operationId: string;
  readonly wallet: string;
  readonly currency: string;
  /** Null when the wire has no `creditLimit`: 0. */
  readonly creditLimitMinor: bigint | null;
}

/** Refuses the debits of `wallet` from now on, and its credits too when `credits` is `refused`. */
export interface FreezeWalletRequest extends WithMetadata {
  readonly kind: 'freeze_wallet';
  readonly operationId: string;
  readonly wallet: string;
  /** Null when the wire has no `credits`: `allowed`. */
  readonly credits: FreezeCredits | null;
}

/** Opens a frozen `wallet` again; closes only an empty one (`wallet_not_empty`), for good. */
export interface WalletStatusRequest extends WithMetadata {
  readonly kind: 'unfreeze_wallet' | 'close_wallet';
  readonly operationId: string;
  readonly wallet: string;
}

/** The wallet operations: each decided and fenced on its `wallet`, none moves money. */
export type WalletRequest = OpenWalletRequest | FreezeWalletRequest | WalletStatusRequest;

/** Every request that names its kind (all but a transfer). */
export type PaymentRequest =
  | HoldRequest
  | CaptureRequest
  | VoidRequest
  | RefundRequest
  | SplitRequest
  | CreditLimitRequest
  | DepositRequest
  | WithdrawalRequest
  | WalletRequest;
/** A transfer carries no `kind`: it is the same TransferRequest it always was. */
export type OperationRequest = TransferRequest | PaymentRequest;

export function operationKindOf(request: OperationRequest): OperationKind {
  return 'kind' in request ? request.kind : 'transfer';
}

export function isPaymentRequest(request: OperationRequest): request is PaymentRequest {
  return 'kind' in request;
}

/**
 * The wallet an operation is decided on: the worker locks and fences it, the queue shard follows
 * it, the decision takes its row lock first. The wallet it debits (`from`), but a deposit's `to`,
 * the only wallet it names, and a wallet operation's `wallet`.
 *
 * @throws nothing: a request or a wire that passed validation always names its wallet.
 */
export function walletOf(request: OperationRequest | OperationWire): string {
  if ('wallet' in request) return request.wallet;
  return 'kind' in request && request.kind === 'deposit' ? request.to : (request as { from: string }).from;
}

/** A transfer on the wire, with or without its kind. */
export interface TransferOperationWire extends TransferWire {
  kind?: 'transfer';
}

/** A hold on the wire: `amount` of `from` is held for `to` until captured, voided or expired. */
export interface HoldWire extends WireMetadata {
  operationId: string;
  kind: 'hold';
  from: string;
  to: string;
  amount: string;
  currency?: string;
  /** A JSON number; exactly one of expiresInMs and expiresAt. */
  expiresInMs?: number;
  expiresAt?: string;
}

/** A capture on the wire: takes `amount` (all of it when absent) of the hold `hold` to its payee. */
export interface CaptureWire extends WireMetadata {
  operationId: string;
  kind: 'capture';
  from: string;
  hold: string;
  amount?: string;
}

/** A void on the wire: releases the hold `hold` back to `from`. */
export interface VoidWire extends WireMetadata {
  operationId: string;
  kind: 'void';
  from: string;
  hold: string;
}

/** A refund on the wire: gives back `amount` (what is left when absent) of the payment `original`. */
export interface RefundWire extends WireMetadata {
  operationId: string;
  kind: 'refund';
  from: string;
  original: string;
  amount?: string;
}

/** One leg of a split: who gets how much. */
export interface SplitLegWire {
  to: string;
  amount: string;
}

/** A split on the wire: one debit of `from`, one credit per leg. */
export interface SplitWire extends WireMetadata {
  operationId: string;
  kind: 'split';
  from: string;
  legs: SplitLegWire[];
  currency?: string;
}

/** A credit limit change on the wire: `limit` (decimal string, 0 allowed) becomes `from`'s credit limit. */
export interface CreditLimitWire extends WireMetadata {
  operationId: string;
  kind: 'credit_limit';
  from: string;
  limit: string;
}

/** A deposit on the wire: `amount` of `currency` credited to `to` from the settlement account. */
export interface DepositWire extends WireMetadata {
  operationId: string;
  kind: 'deposit';
  to: string;
  amount: string;
  currency: string;
  reference: string;
}

/** A withdrawal on the wire: `amount` of `currency` debited from `from` to the settlement account. */
export interface WithdrawalWire extends WireMetadata {
  operationId: string;
  kind: 'withdrawal';
  from: string;
  amount: string;
  currency: string;
  reference: string;
}

/** A wallet opened on the wire: `creditLimit` a decimal string, 0 when absent. */
export interface OpenWalletWire extends WireMetadata {
  operationId: string;
  kind: 'open_wallet';
  wallet: string;
  currency: string;
  creditLimit?: string;
}

/** A wallet frozen on the wire: debits refused, credits too when `credits` is `refused`. */
export interface FreezeWalletWire extends WireMetadata {
  operationId: string;
  kind: 'freeze_wallet';
  wallet: string;
  credits?: FreezeCredits;
}

/** A wallet unfrozen or closed on the wire. */
export interface WalletStatusWire extends WireMetadata {
  operationId: string;
  kind: 'unfreeze_wallet' | 'close_wallet';
  wallet: string;
}

/** Any operation on the wire that names its kind. */
export type PaymentWire =
  | HoldWire
  | CaptureWire
  | VoidWire
  | RefundWire
  | SplitWire
  | CreditLimitWire
  | DepositWire
  | WithdrawalWire
  | OpenWalletWire
  | FreezeWalletWire
  | WalletStatusWire;
/** Any operation on the wire: what requestOperation() and enqueueOperation() take. */
export type OperationWire = TransferOperationWire | PaymentWire;

/** An operation's validation: the typed request, or what is wrong with the message. */
export type OperationValidationResult =
  | { readonly ok: true; readonly request: OperationRequest }
  | { readonly ok: false; readonly reason: string };

/**
 * What is wrong with one field of the message, already worded. Thrown only by the readers below
 * and turned into a refusal by validateOperationRequest: a reader stops at the first wrong field
 * without threading a result through each of its steps.
 */
class FieldProblem extends Error {}

/** A parsed value, or its problem (a string) thrown. */
function required<T>(parsed: T | string): T {
  if (typeof parsed === 'string') throw new FieldProblem(parsed);
  return parsed;
}

function id(record: Readonly<Record<string, unknown>>, field: string): string {
  const problem = checkId(field, record[field]);
  if (problem !== null) throw new FieldProblem(problem);
  return record[field] as string;
}

function currencyOf(record: Readonly<Record<string, unknown>>): string | null {
  const currency = parseCurrency(record.currency);
  if (currency === undefined) throw new FieldProblem(CURRENCY_PROBLEM);
  return currency;
}

/** An optional amount: null when absent (the kind decides what that means). */
function optionalAmount(record: Readonly<Record<string, unknown>>, amountMax: bigint): bigint | null {
  return record.amount === undefined ? null : required(parseAmount('amount', record.amount, amountMax));
}

/**
 * Any operation's wire object, validated. Without `kind`, or with `kind: "transfer"`, it is
 * exactly validateTransferRequest (same answers, same messages) and gives the same
 * TransferRequest, without the kind, so its request hash does not depend on the kind being said.
 * `creditLimitMax` is CREDIT_LIMIT_MAX (the widest, WIRE_LIMITS' ceiling, when not given).
 * Never throws: a refusal is `{ ok: false, reason }`.
 */
export function validateOperationRequest(
  data: unknown,
  amountMax: bigint,
  holdExpiryMaxMs: number,
  creditLimitMax: bigint = WIRE_LIMITS.creditLimitCeilingMinor,
): OperationValidationResult {
  if (typeof data !== 'object' || data === null || Array.isArray(data) || !('kind' in data)) {
    return validateTransferRequest(data, amountMax);
  }
  const { kind, ...rest } = data as Record<string, unknown>;
  if (kind === undefined || kind === 'transfer') return validateTransferRequest(rest, amountMax);
  if (!isPaymentKind(kind)) {
    const given = typeof kind === 'string' ? JSON.stringify(kind.slice(0, 40)) : describe(kind);
    return { ok: false, reason: `kind must be one of ${OPERATION_KINDS.join(', ')}, got ${given}` };
  }
  const record = data as Record<string, unknown>;
  const extra = Object.keys(record).find((k) => k !== 'metadata' && !OPERATION_WIRE_FIELDS[kind].includes(k));
  if (extra !== undefined) return { ok: false, reason: `unknown field ${JSON.stringify(extra.slice(0, 40))}` };
  try {
    const request = PAYMENT_READERS[kind](record, { amountMax, holdExpiryMaxMs, creditLimitMax });
    const metadata = parseMetadata(record.metadata);
    if (typeof metadata === 'string') return { ok: false, reason: metadata };
    return { ok: true, request: metadata === undefined ? request : { ...request, metadata } };
  } catch (err) {
    if (err instanceof FieldProblem) return { ok: false, reason: err.message };
    throw err;
  }
}

/** The settings a worker validates by (TRANSFER_AMOUNT_MAX, HOLD_EXPIRY_MAX_MS, CREDIT_LIMIT_MAX). */
export interface OperationBounds {
  readonly transferAmountMax: bigint;
  readonly holdExpiryMaxMs: number;
  readonly creditLimitMax: bigint;
}

/** validateOperationRequest() by a worker's settings. */
export function validateOperationWithin(data: unknown, bounds: OperationBounds): OperationValidationResult {
  return validateOperationRequest(data, bounds.transferAmountMax, bounds.holdExpiryMaxMs, bounds.creditLimitMax);
}

function isPaymentKind(value: unknown): value is PaymentKind {
  return typeof value === 'string' && value !== 'transfer' && (OPERATION_KINDS as readonly string[]).includes(value);
}

/** The bounds a worker is configured with. */
interface ReaderLimits {
  readonly amountMax: bigint;
  readonly holdExpiryMaxMs: number;
  readonly creditLimitMax: bigint;
}

type PaymentReader = (record: Readonly<Record<string, unknown>>, limits: ReaderLimits) => PaymentRequest;

/** One reader per kind; each throws a FieldProblem naming the first field that is wrong. */
const PAYMENT_READERS: Readonly<Record<PaymentKind, PaymentReader>> = {
  hold: (record, { amountMax, holdExpiryMaxMs }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    const to = id(record, 'to');
    if (from === to) throw new FieldProblem('from and to are the same wallet');
    const amountMinor = required(parseAmount('amount', record.amount, amountMax));
    const currency = currencyOf(record);
    const { expiresInMs, expiresAt } = holdExpiry(record, holdExpiryMaxMs);
    return { kind: 'hold', operationId, from, to, amountMinor, currency, expiresInMs, expiresAt };
  },
  capture: (record, { amountMax }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    const hold = id(record, 'hold');
    return { kind: 'capture', operationId, from, hold, amountMinor: optionalAmount(record, amountMax) };
  },
  void: (record) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    return { kind: 'void', operationId, from, hold: id(record, 'hold') };
  },
  refund: (record, { amountMax }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    const original = id(record, 'original');
    return { kind: 'refund', operationId, from, original, amountMinor: optionalAmount(record, amountMax) };
  },
  split: (record, { amountMax }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    const legs = splitLegs(record.legs, from, amountMax);
    return { kind: 'split', operationId, from, legs, currency: currencyOf(record) };
  },
  credit_limit: (record, { creditLimitMax }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    return { kind: 'credit_limit', operationId, from, limitMinor: creditLimit(record.limit, creditLimitMax) };
  },
  open_wallet: (record, { creditLimitMax }) => {
    const operationId = id(record, 'operationId');
    const wallet = id(record, 'wallet');
    const currency = currencyOf(record);
    if (currency === null) throw new FieldProblem('an open_wallet needs its currency');
    const creditLimitMinor =
      record.creditLimit === undefined ? null : creditLimit(record.creditLimit, creditLimitMax, 'creditLimit');
    return { kind: 'open_wallet', operationId, wallet, currency, creditLimitMinor };
  },
  freeze_wallet: (record) => {
    const operationId = id(record, 'operationId');
    const wallet = id(record, 'wallet');
    const { credits } = record;
    if (credits !== undefined && !(FREEZE_CREDITS as readonly unknown[]).includes(credits)) {
      const given = typeof credits === 'string' ? JSON.stringify(credits.slice(0, 40)) : describe(credits);
      throw new FieldProblem(`credits must be "allowed" or "refused", got ${given}`);
    }
    return { kind: 'freeze_wallet', operationId, wallet, credits: (credits as FreezeCredits | undefined) ?? null };
  },
  unfreeze_wallet: (record) => ({
    kind: 'unfreeze_wallet',
    operationId: id(record, 'operationId'),
    wallet: id(record, 'wallet'),
  }),
  close_wallet: (record) => ({
    kind: 'close_wallet',
    operationId: id(record, 'operationId'),
    wallet: id(record, 'wallet'),
  }),
  deposit: (record, { amountMax }) => {
    const operationId = id(record, 'operationId');
    const to = id(record, 'to');
    const amountMinor = required(parseAmount('amount', record.amount, amountMax));
    return { kind: 'deposit', operationId, to, amountMinor, ...settlementFields(record) };
  },
  withdrawal: (record, { amountMax }) => {
    const operationId = id(record, 'operationId');
    const from = id(record, 'from');
    const amountMinor = required(parseAmount('amount', record.amount, amountMax));
    return { kind: 'withdrawal', operationId, from, amountMinor, ...settlementFields(record) };
  },
};

/** A deposit's or withdrawal's currency (required: it names the settlement account) and reference. */
function settlementFields(record: Readonly<Record<string, unknown>>): { currency: string; reference: string } {
  const currency = currencyOf(record);
  if (currency === null) throw new FieldProblem(`a ${String(record.kind)} needs its currency`);
  const { reference } = record;
  if (typeof reference !== 'string' || !REFERENCE_PATTERN.test(reference)) {
    throw new FieldProblem(
      `reference must be a string of 1-${WIRE_LIMITS.idLengthMax} printable ASCII characters without spaces`,
    );
  }
  return { currency, reference };
}

/** A credit limit in minor units, 0 to `max`, from its decimal string. */
function creditLimit(value: unknown, max: bigint, field = 'limit'): bigint {
  if (typeof value !== 'string' || !/^\d+$/.test(value)) {
    throw new FieldProblem(`${field} must be a string of decimal digits (0 to ${max}), got ${describe(value)}`);
  }
  if (value.length > AMOUNT_DIGITS_MAX || BigInt(value) > max) {
    throw new FieldProblem(`${field} exceeds the maximum of ${max}`);
  }
  return BigInt(value);
}

/**
 * Exactly one of the two expiry fields. Whether the instant lies ahead and within the maximum is
 * the decision's (`expiry_out_of_range`): it depends on the database's clock, not on the message.
 */
function holdExpiry(
  record: Readonly<Record<string, unknown>>,
  holdExpiryMaxMs: number,
): { expiresInMs: number | null; expiresAt: string | null } {
  const { expiresInMs, expiresAt } = record;
  if (expiresInMs !== undefined && expiresAt !== undefined) {
    throw new FieldProblem('expiresInMs and expiresAt are both given; a hold takes exactly one');
  }
  if (expiresInMs !== undefined) {
    if (typeof expiresInMs !== 'number' || !Number.isInteger(expiresInMs)) {
      const given = typeof expiresInMs === 'number' ? String(expiresInMs) : describe(expiresInMs);
      throw new FieldProblem(`expiresInMs must be a whole number of milliseconds (a JSON number), got ${given}`);
    }
    if (expiresInMs < HOLD_EXPIRES_IN_MS_MIN || expiresInMs > holdExpiryMaxMs) {
      throw new FieldProblem(
        `expiresInMs must be between ${HOLD_EXPIRES_IN_MS_MIN} and ${holdExpiryMaxMs}, got ${expiresInMs}`,
      );
    }
    return { expiresInMs, expiresAt: null };
  }
  if (expiresAt !== undefined) {
    const problem = checkExpiresAt(expiresAt);
    if (problem !== null) throw new FieldProblem(problem);
    return { expiresInMs: null, expiresAt: expiresAt as string };
  }
  throw new FieldProblem('a hold needs expiresInMs or expiresAt');
}

function checkExpiresAt(value: unknown): string | null {
  if (typeof value !== 'string') return `expiresAt must be a string, got ${describe(value)}`;
  const match = EXPIRES_AT_PATTERN.exec(value);
  if (match === null) return 'expiresAt must be a UTC time like "2026-12-31T23:59:59Z" or "2026-12-31T23:59:59.250Z"';
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  // The setters roll 31 April over to 1 May and 24:00 to the next day: a real instant reads back
  // unchanged. setUTCFullYear, unlike Date.UTC, takes years 0-99 as they are.
  const instant = new Date(0);
  instant.setUTCFullYear(year, month - 1, day);
  instant.setUTCHours(hour, minute, second);
  const real =
    year >= 1 &&
    instant.getUTCFullYear() === year &&
    instant.getUTCMonth() === month - 1 &&
    instant.getUTCDate() === day &&
    instant.getUTCHours() === hour &&
    instant.getUTCMinutes() === minute &&
    instant.getUTCSeconds() === second;
  return real ? null : `expiresAt is not a real date and time: ${JSON.stringify(value)}`;
}

const LEG_FIELDS = ['to', 'amount'] as const;

function splitLegs(value: unknown, from: string, amountMax: bigint): readonly SplitLeg[] {
  if (!Array.isArray(value)) {
    throw new FieldProblem(`legs must be an array of {to, amount} objects, got ${describe(value)}`);
  }
  if (value.length < SPLIT_LEGS_MIN || value.length > SPLIT_LEGS_MAX) {
    throw new FieldProblem(`legs has ${value.length} entries; a split takes ${SPLIT_LEGS_MIN} to ${SPLIT_LEGS_MAX}`);
  }
  const legs: SplitLeg[] = [];
  const seen = new Map<string, number>();
  let totalMinor = 0n;
  for (const [i, leg] of value.entries()) {
    const field = `legs[${i}]`;
    if (typeof leg !== 'object' || leg === null || Array.isArray(leg)) {
      throw new FieldProblem(`${field} must be an object {to, amount}, got ${describe(leg)}`);
    }
    const entry = leg as Record<string, unknown>;
    const extra = Object.keys(entry).find((k) => !(LEG_FIELDS as readonly string[]).includes(k));
    if (extra !== undefined) throw new FieldProblem(`unknown field ${JSON.stringify(extra.slice(0, 40))} in ${field}`);
    const problem = checkId(`${field}.to`, entry.to);
    if (problem !== null) throw new FieldProblem(problem);
    const to = entry.to as string;
    if (to === from) throw new FieldProblem(`${field}.to and from are the same wallet`);
    const first = seen.get(to);
    if (first !== undefined) {
      throw new FieldProblem(`${field}.to repeats legs[${first}].to; each leg credits another wallet`);
    }
    seen.set(to, i);
    const amountMinor = required(parseAmount(`${field}.amount`, entry.amount, amountMax));
    totalMinor += amountMinor;
    legs.push({ to, amountMinor });
  }
  if (totalMinor > amountMax) {
    throw new FieldProblem(`the legs' total ${totalMinor} exceeds the maximum of ${amountMax}`);
  }
  return legs;
}

/** The wire object of a request: validateOperationRequest's inverse. A transfer's carries no kind. */
export function toOperationWire(request: TransferRequest): TransferWire;
export function toOperationWire(request: PaymentRequest): PaymentWire;
export function toOperationWire(request: OperationRequest): OperationWire;
export function toOperationWire(request: OperationRequest): OperationWire {
  if (!isPaymentRequest(request)) return toWire(request);
  const wire = paymentWire(request);
  if (request.metadata !== undefined) wire.metadata = { ...request.metadata };
  return wire;
}

function paymentWire(request: PaymentRequest): PaymentWire {
  const { operationId } = request;
  const from = walletOf(request);
  switch (request.kind) {
    case 'hold': {
      const wire: HoldWire = {
        operationId,
        kind: 'hold',
        from,
        to: request.to,
        amount: request.amountMinor.toString(),
      };
      if (request.currency !== null) wire.currency = request.currency;
      if (request.expiresInMs !== null) wire.expiresInMs = request.expiresInMs;
      if (request.expiresAt !== null) wire.expiresAt = request.expiresAt;
      return wire;
    }
    case 'capture': {
      const wire: CaptureWire = { operationId, kind: 'capture', from, hold: request.hold };
      if (request.amountMinor !== null) wire.amount = request.amountMinor.toString();
      return wire;
    }
    case 'void':
      return { operationId, kind: 'void', from, hold: request.hold };
    case 'refund': {
      const wire: RefundWire = { operationId, kind: 'refund', from, original: request.original };
      if (request.amountMinor !== null) wire.amount = request.amountMinor.toString();
      return wire;
    }
    case 'split': {
      const legs = request.legs.map((leg) => ({ to: leg.to, amount: leg.amountMinor.toString() }));
      const wire: SplitWire = { operationId, kind: 'split', from, legs };
      if (request.currency !== null) wire.currency = request.currency;
      return wire;
    }
    case 'credit_limit':
      return { operationId, kind: 'credit_limit', from, limit: request.limitMinor.toString() };
    case 'deposit':
    case 'withdrawal':
      return settlementWire(request);
    case 'open_wallet': {
      const wire: OpenWalletWire = { operationId, kind: 'open_wallet', wallet: from, currency: request.currency };
      if (request.creditLimitMinor !== null) wire.creditLimit = request.creditLimitMinor.toString();
      return wire;
    }
    case 'freeze_wallet':
      return request.credits === null
        ? { operationId, kind: 'freeze_wallet', wallet: from }
        : { operationId, kind: 'freeze_wallet', wallet: from, credits: request.credits };
    case 'unfreeze_wallet':
    case 'close_wallet':
      return { operationId, kind: request.kind, wallet: from };
  }
}

function settlementWire(request: DepositRequest | WithdrawalRequest): DepositWire | WithdrawalWire {
  const { operationId, currency, reference } = request;
  const amount = request.amountMinor.toString();
  return request.kind === 'deposit'
    ? { operationId, kind: 'deposit', to: request.to, amount, currency, reference }
    : { operationId, kind: 'withdrawal', from: request.from, amount, currency, reference };
}
