// Tiny, hand-made histories for the chaos checker's unit tests: a workload of a few operations,
// the jobs and the rows a run would leave, and the facts the checks read, built the way the
// checker builds them (buildCheckFacts) but from literals, with no service.

import { NO_CREDIT_PLAN } from '../../../harness/chaos/chaos-credit.ts';
import { NO_WALLET_PLAN, type WalletPlan } from '../../../harness/chaos/chaos-wallets.ts';
import type { ChaosMessage, ChaosWorkload, OperationModel } from '../../../harness/chaos/chaos-workload.ts';
import { type Invariant, runInvariant } from '../../../harness/chaos/check-result.ts';
import type { DatabaseState, HoldRow, RecordRow, WalletRow } from '../../../harness/chaos/database-state.ts';
import { buildCheckFacts, type CheckFacts } from '../../../harness/chaos/expected-model.ts';
import type { FinalJob } from '../../../harness/chaos/final-job.ts';
import { NO_WALLET_LOG, type WalletLog } from '../../../harness/chaos/wallet-state.ts';
import type { OperationKind, OperationWire } from '../../../src/ledger/transfer-request.ts';

export const OPENING = 100n;

/** An operation sent once, its request's hash `h:<id>`; `wire` is its body without the id. */
export function operation(
  operationId: string,
  kind: OperationKind,
  wire: Record<string, unknown> & { from: string },
): OperationModel {
  const hash = `h:${operationId}`;
  const amount = typeof wire.amount === 'string' ? BigInt(wire.amount) : 0n;
  return {
    operationId,
    kind,
    from: wire.from,
    to: kind === 'transfer' ? String(wire.to) : '',
    variants: new Map([[hash, amount]]),
    wires: new Map([[hash, { operationId, ...wire } as unknown as OperationWire]]),
    messages: 1,
  };
}

export const transfer = (id: string, from: string, to: string, amount: bigint) =>
  operation(id, 'transfer', { from, to, amount: String(amount) });

export function workloadOf(
  ops: readonly OperationModel[],
  wallets = ['w1', 'w2', 'w3'],
  credit: ChaosWorkload['credit'] = NO_CREDIT_PLAN,
  walletOps: WalletPlan = NO_WALLET_PLAN,
): ChaosWorkload {
  return {
    messages: [],
    wallets,
    openingBalanceMinor: OPENING,
    operations: new Map(ops.map((o) => [o.operationId, o])),
    sinkWallets: new Set(),
    credit,
    walletOps,
  };
}

/** The record a decision of the operation's (only) request leaves. */
export function recordOf(op: OperationModel, status = 'applied', reason: string | null = null): RecordRow {
  const [hash, amount] = [...op.variants][0] ?? ['', 0n];
  return {
    operation_id: op.operationId,
    request_hash: hash,
    kind: op.kind,
    original_id: null,
    from_wallet: op.from,
    to_wallet: op.kind === 'transfer' ? op.to : null,
    amount,
    status,
    reason,
    fence: 1n,
    metadata: ([...op.wires.values()][0]?.metadata as Record<string, string> | undefined) ?? null,
  };
}

export function message(seq: number, op: OperationModel | null, extra: Partial<ChaosMessage> = {}): ChaosMessage {
  return {
    seq,
    kind: op === null ? 'invalid' : 'original',
    jobName: 'transfer',
    data: {},
    operationId: op?.operationId ?? null,
    hash: op === null ? null : ([...op.variants.keys()][0] ?? null),
    defect: op === null ? 'no operationId' : null,
    ...extra,
  };
}

export function job(
  jobId: string,
  state: string,
  returnvalue: unknown = null,
  extra: Partial<FinalJob> = {},
): FinalJob {
  return {
    jobId,
    name: 'transfer',
    state,
    returnvalue,
    failedReason: null,
    attemptsMade: 1,
    attemptsStarted: 1,
    timestamp: 0,
    processedOn: null,
    finishedOn: null,
    data: {},
    ...extra,
  };
}

export function wallet(id: string, balance: bigint, extra: Partial<WalletRow> = {}): WalletRow {
  return { id, balance, held: 0n, last_fence: 1n, credit_limit: 0n, currency: 'EUR', status: 'open', ...extra };
}

export function holdRow(hold: OperationModel, state: string, extra: Partial<HoldRow> = {}): HoldRow {
  const wire = [...hold.wires.values()][0] as unknown as { from: string; to: string; amount: string };
  const amount = BigInt(wire.amount);
  return {
    hold_id: hold.operationId,
    from_wallet: wire.from,
    to_wallet: wire.to,
    amount,
    state,
    captured: 0n,
    released: 0n,
    ended_by: null,
    ...extra,
  };
}

/** A run: what was sent (message per job id), the jobs read back, and the database left. */
export interface History {
  readonly ops: readonly OperationModel[];
  readonly sent?: readonly [string, ChaosMessage][];
  readonly jobs?: readonly FinalJob[];
  readonly records?: readonly RecordRow[];
  readonly wallets?: readonly WalletRow[];
  readonly debits?: DatabaseState['debits'];
  readonly holds?: readonly HoldRow[];
  /** Operation ids (and `$expiry:<hold>`) in commit order. */
  readonly commitOrder?: readonly string[];
  /** Operation ids in the outcome feed's order (default: the records' order). */
  readonly feedOrder?: readonly string[];
  /** Wallets opened at 0 with a limit, and the credit wallets (default: none). */
  readonly credit?: ChaosWorkload['credit'];
  readonly drained?: { ok: boolean; detail: string };
  readonly intakeRun?: boolean;
  /** The wallets' stream and the decisions' clock (default: none). */
  readonly walletOps?: WalletPlan;
  readonly walletLog?: WalletLog;
}

/** The facts the checker would build for this history. */
export function factsOf(h: History): CheckFacts {
  const records = h.records ?? [];
  const db: DatabaseState = {
    ledger: { ok: true, invariants: [], totals: {} as DatabaseState['ledger']['totals'] },
    recordList: records,
    records: new Map(records.map((r) => [r.operation_id, r])),
    wallets: h.wallets ?? [],
    debits: h.debits ?? [],
    holds: new Map((h.holds ?? []).map((r) => [r.hold_id, r])),
    firstEntry: new Map((h.commitOrder ?? []).map((id, i) => [id, BigInt(i + 1)])),
    feedOrder: new Map((h.feedOrder ?? records.map((r) => r.operation_id)).map((id, i) => [id, BigInt(i + 1)])),
    sqlViolations: new Map(),
    walletLog: h.walletLog ?? NO_WALLET_LOG,
  };
  const input = {
    workload: workloadOf(h.ops, undefined, h.credit, h.walletOps),
    sent: new Map(h.sent ?? []),
    jobs: h.jobs ?? [],
    drained: h.drained ?? { ok: true, detail: '' },
    intakeRun: h.intakeRun ?? false,
  };
  return buildCheckFacts(input, db);
}

/** The check's counterexamples on the history (none: it holds). */
export function judge<In>(check: Invariant<In>, facts: In) {
  return runInvariant(check, facts).counterexamples;
}
