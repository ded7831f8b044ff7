// The messages one chaos run sends: the seeded random transfers of src/workload (originals,
// re-deliveries under new job ids, conflicting reuses of an id), hostile messages that must
// never reach the ledger, in an intake run the operations sent through both doors at once (a
// pair of messages of one id: one to BullMQ straight, one through the intake; every second pair
// with another amount at the straight door), and the opening balance that makes every valid
// transfer apply, so the expected final balances are exact whatever the order of execution.
// Each kind beside the transfers is a seeded stream of its own, placed among them (Placed):
// buildWorkload lists the streams, and sendInOrder sends them, so a new kind is one more stream.

import { CONFIG_DEFAULTS } from '../../src/config/config.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import {
  type OperationKind,
  type OperationWire,
  operationKindOf,
  type TransferWire,
  validateOperationRequest,
  walletOf,
} from '../../src/ledger/transfer-request.ts';
import { TRANSFER_JOB_NAME } from '../../src/queue/job-options.ts';
import { randomInt, seededRandom } from '../../src/workload/prng.ts';
import { randomWorkload } from '../../src/workload/random-transfers.ts';
import { type CreditPlan, NO_CREDIT_PLAN, type PlacedOperation, planCredit } from './chaos-credit.ts';
import type { ChaosOptions } from './chaos-options.ts';
import {
  type PaymentPlan,
  type PlacedPayment,
  planPayments,
  type RefundableTransfer,
  uncoverableSplits,
} from './chaos-payments.ts';
import { NO_WALLET_PLAN, planWallets, type WalletPlan } from './chaos-wallets.ts';

export const WALLET_PREFIX = 'w';
export const CURRENCY = 'EUR';
/** Opening balances are this many times the largest total a wallet could send, so no transfer ever meets insufficient funds. */
export const OPENING_HEADROOM = 3n;
const INVALID_SEED_SALT = 0x0bad_f00d;
const HOLD_EXPIRY_MAX_MS = Number(CONFIG_DEFAULTS.HOLD_EXPIRY_MAX_MS);
const BOTH_DOORS_SEED_SALT = 0x2d00_7e57;

export type MessageKind = 'original' | 'duplicate' | 'conflict' | 'invalid' | 'both-doors' | 'payment';
/** Which door a both-doors message goes through. */
export type Door = 'intake' | 'straight';

export interface ChaosMessage {
  /** Position in the send order (0-based). */
  readonly seq: number;
  readonly kind: MessageKind;
  readonly jobName: string;
  /** What goes on the queue, as is (for invalid messages, anything). */
  readonly data: unknown;
  /** The operation a valid message carries; for an invalid one, the id it names (if any), which must move nothing. */
  readonly operationId: string | null;
  /** Valid messages: the request hash the idempotency record compares. */
  readonly hash: string | null;
  /** Invalid messages: what is wrong with it. */
  readonly defect: string | null;
  /** Both-doors messages: which door; the pair (intake first, then straight) is adjacent in the send order. */
  readonly door?: Door;
}

export interface OperationModel {
  readonly operationId: string;
  readonly kind: OperationKind;
  /** The wallet it debits (and the worker locks). */
  readonly from: string;
  /** A transfer's destination; '' for a payment (its wire says whom it credits). */
  readonly to: string;
  /** Every request sent under this id: hash → amount (a payment: the most it may debit). More than one means a conflict. */
  readonly variants: ReadonlyMap<string, bigint>;
  /** Every request sent under this id: hash → its wire body. */
  readonly wires: ReadonlyMap<string, OperationWire>;
  /** Messages (jobs) sent for it. */
  readonly messages: number;
}

export interface ChaosWorkload {
  readonly messages: readonly ChaosMessage[];
  readonly wallets: readonly string[];
  readonly openingBalanceMinor: bigint;
  readonly operations: ReadonlyMap<string, OperationModel>;
  /** Wallets that never send (naive mode: sinks; otherwise empty). */
  readonly sinkWallets: ReadonlySet<string>;
  /** The wallets opened at 0 with a credit limit, and the credit wallets' debits (chaos-credit.ts). */
  readonly credit: Omit<CreditPlan, 'placed'>;
  /** The wallets opened, frozen and closed while the run goes (chaos-wallets.ts). */
  readonly walletOps: WalletPlan;
}

type WorkloadOptions = Pick<
  ChaosOptions,
  | 'seed'
  | 'wallets'
  | 'transfers'
  | 'duplicateRate'
  | 'conflicts'
  | 'invalid'
  | 'hotWalletRate'
  | 'amountMaxMinor'
  | 'apply'
  | 'bothDoors'
  | 'payments'
  | 'durationS'
>;

/** Hostile messages, each with a name for the report. `op` is a fresh operation id. */
const INVALID_MAKERS: readonly {
  defect: string;
  make: (op: string, w: (i: number) => string) => { name?: string; data: unknown };
}[] = [
  { defect: 'float amount', make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(2), amount: 12.5 } }) },
  { defect: 'negative amount', make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(2), amount: '-500' } }) },
  { defect: 'zero amount', make: (op, w) => ({ data: { operationId: op, from: w(2), to: w(1), amount: '0' } }) },
  { defect: 'exponent amount', make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(3), amount: '1e3' } }) },
  { defect: 'decimal amount', make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(3), amount: '10.50' } }) },
  {
    defect: 'amount above maximum',
    make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(2), amount: '99999999999999999999' } }),
  },
  { defect: 'numeric amount', make: (op, w) => ({ data: { operationId: op, from: w(2), to: w(3), amount: 100 } }) },
  {
    defect: '5000-character operation id',
    make: (op, w) => ({ data: { operationId: `${op}-${'x'.repeat(5000)}`, from: w(1), to: w(2), amount: '1' } }),
  },
  {
    defect: '5000-character wallet id',
    make: (op) => ({ data: { operationId: op, from: 'w'.repeat(5000), to: 'w1', amount: '1' } }),
  },
  { defect: 'null message', make: () => ({ data: null }) },
  { defect: 'array message', make: (op, w) => ({ data: [op, w(1), w(2), '10'] }) },
  { defect: 'string message', make: (op) => ({ data: `transfer ${op}` }) },
  { defect: 'same wallet', make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(1), amount: '10' } }) },
  {
    defect: 'lowercase currency',
    make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(2), amount: '10', currency: 'eur' } }),
  },
  {
    defect: 'unknown field',
    make: (op, w) => ({ data: { operationId: op, from: w(1), to: w(2), amount: '10', admin: true } }),
  },
  { defect: 'missing destination', make: (op, w) => ({ data: { operationId: op, from: w(1), amount: '10' } }) },
  {
    defect: 'null operation id',
    make: (_op, w) => ({ data: { operationId: null, from: w(1), to: w(2), amount: '10' } }),
  },
  {
    defect: 'injection in id',
    make: (op, w) => ({ data: { operationId: `${op}'; DROP TABLE wallets; --`, from: w(1), to: w(2), amount: '10' } }),
  },
  {
    defect: 'object as wallet',
    make: (op, w) => ({ data: { operationId: op, from: { id: w(1) }, to: w(2), amount: '10' } }),
  },
  {
    defect: 'unknown job name',
    make: (op, w) => ({ name: 'transfer-v2', data: { operationId: op, from: w(1), to: w(2), amount: '10' } }),
  },
];

/**
 * `end`, or one more when the message before it is the intake half of a both-doors pair: a
 * slice of the send order never splits a pair, whose two halves are sent at once.
 */
export function pairSafeEnd(messages: readonly ChaosMessage[], end: number): number {
  const last = messages[end - 1];
  return last?.kind === 'both-doors' && last.door === 'intake' && end < messages.length ? end + 1 : end;
}

export function walletId(i: number): string {
  return `${WALLET_PREFIX}${i}`;
}

/** A valid transfer of the seeded workload (its wallets remapped for the naive apply). */
interface ValidTransfer {
  readonly kind: MessageKind;
  readonly wire: TransferWire;
}

/** One operation sent at both doors at once: the intake half first, then the straight one. */
interface DoorsPair {
  readonly position: number;
  readonly intake: TransferWire;
  readonly straight: TransferWire;
}

/**
 * Messages of a stream of their own (hostile messages, both-doors pairs, payments), sent just
 * before the valid transfer of index `position`, or after the last one when it is their count.
 */
interface Placed {
  readonly position: number;
  readonly send: (order: SendOrder) => void;
}

/** An OperationModel while the workload is built: its requests and messages still counted. */
type OperationDraft = Omit<OperationModel, 'variants' | 'wires' | 'messages'> & {
  readonly variants: Map<string, bigint>;
  readonly wires: Map<string, OperationWire>;
  messages: number;
};

const AMOUNT_MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** The messages in the order they are sent, and the model of every operation they carry. */
class SendOrder {
  readonly messages: ChaosMessage[] = [];
  readonly operations = new Map<string, OperationDraft>();

  /** A hostile message: it names an operation id at most, and is no operation of the model. */
  sendInvalid(bad: { name?: string; data: unknown; defect: string }): void {
    const data = bad.data as { operationId?: unknown } | null;
    const named =
      typeof data === 'object' && data !== null && typeof data.operationId === 'string' ? data.operationId : null;
    this.messages.push({
      seq: this.messages.length,
      kind: 'invalid',
      jobName: bad.name ?? TRANSFER_JOB_NAME,
      data: bad.data,
      operationId: named,
      hash: null,
      defect: bad.defect,
    });
  }

  /** A valid operation; `outflow` is a payment's most it may debit (a transfer debits its amount). */
  sendValid(wire: OperationWire, kind: MessageKind, door?: Door, outflow?: bigint): void {
    const checked = validateOperationRequest(wire, AMOUNT_MAX, HOLD_EXPIRY_MAX_MS);
    if (!checked.ok) throw new Error(`generated operation is invalid: ${checked.reason}`);
    const hash = requestHash(checked.request);
    this.messages.push({
      seq: this.messages.length,
      kind,
      jobName: TRANSFER_JOB_NAME,
      data: wire,
      operationId: wire.operationId,
      hash,
      defect: null,
      ...(door === undefined ? {} : { door }),
    });
    let op = this.operations.get(wire.operationId);
    if (op === undefined) {
      op = {
        operationId: wire.operationId,
        kind: operationKindOf(checked.request),
        from: walletOf(wire),
        to: 'kind' in wire && wire.kind !== 'transfer' ? '' : (wire as TransferWire).to,
        variants: new Map(),
        wires: new Map(),
        messages: 0,
      };
      this.operations.set(op.operationId, op);
    }
    const request = checked.request;
    op.variants.set(
      hash,
      outflow ?? ('amountMinor' in request && request.amountMinor !== null ? request.amountMinor : 0n),
    );
    op.wires.set(hash, wire);
    op.messages += 1;
  }
}

export function buildWorkload(o: WorkloadOptions): ChaosWorkload {
  const { valid, sinkWallets } = validTransfers(o);
  const pairs = bothDoorsPairs(o, valid.length);
  // Payments (not with the naive apply, which decides transfers only): a stream of their own,
  // placed among the valid transfers, so the transfers are those of a run without them.
  const plan = o.payments && o.apply !== 'naive' ? planPayments(o, valid.length, refundableTransfers(valid)) : null;
  const openingBalanceMinor = openingBalance(o, valid, pairs, plan);
  const payments = plan === null ? [] : placedPayments(plan, openingBalanceMinor * BigInt(o.wallets));
  // Credit limits: a stream of its own, on wallets opened at 0 (and limit changes of the others),
  // outside the opening balances' sum: its debits are meant to meet their limits.
  const { placed: credits, ...credit } = plan === null ? NO_CREDIT_PLAN : planCredit(o, valid.length);
  // Wallets opened, frozen and closed: a stream of its own too, with the payments.
  const { placed: walletMessages, ...walletOps } =
    plan === null ? { ...NO_WALLET_PLAN, placed: [] } : planWallets(o, valid.length, CURRENCY);
  // Where several streams place messages before one transfer, they go in this order.
  const order = sendInOrder(valid, [
    invalidMessages(o, valid.length),
    pairs.map(pairMessages),
    payments.map(paymentMessage),
    placedOperations(credits),
    placedOperations(walletMessages),
  ]);
  const wallets = Array.from({ length: o.wallets }, (_, i) => walletId(i + 1));
  return {
    messages: order.messages,
    wallets,
    openingBalanceMinor,
    operations: order.operations,
    sinkWallets,
    credit,
    walletOps,
  };
}

/** A stream's operations in place order, each sent as is. */
function placedOperations(placed: readonly PlacedOperation[]): Placed[] {
  return [...placed]
    .sort((a, b) => a.position - b.position)
    .map((c) => ({ position: c.position, send: (order: SendOrder) => order.sendValid(c.wire, 'payment') }));
}

/** The seeded random transfers of src/workload, and the wallets that never send. */
function validTransfers(o: WorkloadOptions): { valid: ValidTransfer[]; sinkWallets: Set<string> } {
  const generated = randomWorkload({
    transfers: o.transfers,
    wallets: o.wallets,
    walletPrefix: WALLET_PREFIX,
    duplicateRate: o.duplicateRate,
    conflicts: o.conflicts,
    amountMaxMinor: o.amountMaxMinor,
    seed: o.seed,
    operationPrefix: `op-${o.seed}-`,
    hotWalletRate: o.hotWalletRate,
  });

  // The naive read-modify-write is only meaningful when a source wallet is written by its lock
  // holder alone: sources send, sinks receive (a credit to a source would race the absolute write).
  const sources = o.apply === 'naive' ? Math.max(1, Math.floor(o.wallets / 2)) : o.wallets;
  const remap = (wallet: string, role: 'from' | 'to'): string => {
    if (o.apply !== 'naive') return wallet;
    const i = Number(wallet.slice(WALLET_PREFIX.length));
    return role === 'from'
      ? walletId(1 + ((i - 1) % sources))
      : walletId(sources + 1 + ((i - 1) % (o.wallets - sources)));
  };
  const sinkWallets = new Set<string>();
  if (o.apply === 'naive') for (let i = sources + 1; i <= o.wallets; i++) sinkWallets.add(walletId(i));

  const valid = generated.map((m) => ({
    kind: m.kind as MessageKind,
    wire: {
      ...m.wire,
      from: remap(m.wire.from, 'from'),
      to: remap(m.wire.to, 'to'),
      ...transferMetadata(o, m.wire.operationId),
    } satisfies TransferWire,
  }));
  return { valid, sinkWallets };
}

/**
 * Metadata on about one transfer in TRANSFER_METADATA_EVERY, chosen by its id (so its duplicates
 * and conflicting reuses carry the same): such a transfer is decided through apply_payments(), and
 * the checker holds its record to it. None with the naive apply, which writes no metadata.
 */
function transferMetadata(o: WorkloadOptions, operationId: string): { metadata?: Record<string, string> } {
  if (o.apply === 'naive') return {};
  let sum = 0;
  for (const c of operationId) sum += c.charCodeAt(0);
  return sum % TRANSFER_METADATA_EVERY === 0 ? { metadata: { order: operationId, channel: 'chaos' } } : {};
}
const TRANSFER_METADATA_EVERY = 10;

/** Hostile messages at seeded positions among the valid ones. */
function invalidMessages(o: WorkloadOptions, validCount: number): Placed[] {
  const random = seededRandom((o.seed ^ INVALID_SEED_SALT) >>> 0);
  return Array.from({ length: o.invalid }, (_, i) => {
    const maker = INVALID_MAKERS[i % INVALID_MAKERS.length] as (typeof INVALID_MAKERS)[number];
    const made = maker.make(`bad-${o.seed}-${i + 1}`, walletId);
    const bad = { defect: maker.defect, ...made };
    return { position: Math.floor(random() * (validCount + 1)), send: (order: SendOrder) => order.sendInvalid(bad) };
  }).sort((a, b) => a.position - b.position);
}

/**
 * Both-doors pairs at seeded positions among the valid ones (a stream of their own: the rest
 * of the workload is what it was without them). Odd pairs carry one body at both doors, even
 * pairs one more minor unit at the straight door.
 */
function bothDoorsPairs(o: WorkloadOptions, validCount: number): DoorsPair[] {
  const random = seededRandom((o.seed ^ BOTH_DOORS_SEED_SALT) >>> 0);
  return Array.from({ length: o.bothDoors }, (_, i) => {
    const from = randomInt(random, 1, o.wallets);
    let to = randomInt(random, 1, o.wallets - 1);
    if (to >= from) to += 1;
    const amount = randomInt(random, 1, o.amountMaxMinor);
    const intake: TransferWire = {
      operationId: `both-${o.seed}-${i + 1}`,
      from: walletId(from),
      to: walletId(to),
      amount: String(amount),
    };
    const straight: TransferWire = { ...intake, amount: String(i % 2 === 1 ? amount + 1 : amount) };
    return { position: Math.floor(random() * (validCount + 1)), intake, straight };
  }).sort((a, b) => a.position - b.position);
}

function pairMessages(pair: DoorsPair): Placed {
  return {
    position: pair.position,
    send: (order) => {
      order.sendValid(pair.intake, 'both-doors', 'intake');
      order.sendValid(pair.straight, 'both-doors', 'straight');
    },
  };
}

/** The transfers a refund may name: originals whose id no conflicting request reuses. */
function refundableTransfers(valid: readonly ValidTransfer[]): RefundableTransfer[] {
  const conflicted = new Set(valid.filter((m) => m.kind === 'conflict').map((m) => m.wire.operationId));
  return valid.flatMap((m, position) =>
    m.kind === 'original' && !conflicted.has(m.wire.operationId) ? [{ position, wire: m.wire }] : [],
  );
}

/**
 * Every wallet's opening balance: OPENING_HEADROOM times the most one wallet could send (each
 * transfer at its largest variant, each pair at its larger door, each payment at its outflow)
 * and one largest amount more, so no transfer meets insufficient funds whatever the order.
 */
function openingBalance(
  o: WorkloadOptions,
  valid: readonly ValidTransfer[],
  pairs: readonly DoorsPair[],
  plan: PaymentPlan | null,
): bigint {
  const paymentOutflow = new Map<string, bigint>();
  for (const p of plan?.placed ?? [])
    paymentOutflow.set(walletOf(p.wire), (paymentOutflow.get(walletOf(p.wire)) ?? 0n) + p.outflow);
  const transferOutflow = new Map<string, bigint>();
  for (const m of valid) {
    const op = m.wire.operationId;
    const amount = BigInt(m.wire.amount);
    const largest = transferOutflow.get(op);
    if (largest === undefined || amount > largest) transferOutflow.set(op, amount);
  }
  for (const p of pairs) {
    const amount = BigInt(p.straight.amount) > BigInt(p.intake.amount) ? p.straight.amount : p.intake.amount;
    transferOutflow.set(p.intake.operationId, BigInt(amount));
  }
  const outflow = new Map<string, bigint>();
  const fromOf = new Map(
    [...valid.map((m) => m.wire), ...pairs.map((p) => p.intake)].map((w) => [w.operationId, w.from]),
  );
  for (const [op, amount] of transferOutflow) {
    const from = fromOf.get(op) as string;
    outflow.set(from, (outflow.get(from) ?? 0n) + amount);
  }
  for (const [from, amount] of paymentOutflow) outflow.set(from, (outflow.get(from) ?? 0n) + amount);
  const maxOutflow = [...outflow.values()].reduce((a, b) => (a > b ? a : b), 0n);
  return (maxOutflow + BigInt(o.amountMaxMinor)) * OPENING_HEADROOM;
}

/** The planned payments and the uncoverable splits (above `systemMinor`, all the money there is), in place order. */
function placedPayments(plan: PaymentPlan, systemMinor: bigint): PlacedPayment[] {
  return [...plan.placed, ...uncoverableSplits(plan, systemMinor)].sort((a, b) => a.position - b.position);
}

function paymentMessage(p: PlacedPayment): Placed {
  return { position: p.position, send: (order) => order.sendValid(p.wire, 'payment', undefined, p.outflow) };
}

/**
 * The send order: the valid transfers, and before each one what every stream places at or before
 * it, stream after stream in the list's order; what is placed after the last transfer, at the end.
 */
function sendInOrder(valid: readonly ValidTransfer[], streams: readonly (readonly Placed[])[]): SendOrder {
  const order = new SendOrder();
  const next = streams.map(() => 0);
  const sendUpTo = (upTo: number) => {
    streams.forEach((stream, s) => {
      let i = next[s] as number;
      while (i < stream.length && (stream[i]?.position ?? Infinity) <= upTo) (stream[i++] as Placed).send(order);
      next[s] = i;
    });
  };
  valid.forEach((m, i) => {
    sendUpTo(i);
    order.sendValid(m.wire, m.kind);
  });
  sendUpTo(Infinity);
  return order;
}
