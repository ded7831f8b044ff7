// Payment decisions straight through SQL, below the worker and its wire format: apply_payments()
// (every check on, as the worker calls it), apply_payments_unsafe() with some checks off (the
// negative controls; a test installs it first with db.installUnsafeDecisions(), as no migrated
// database has it) and the expiry sweep, holds_expire(). Each operation is named by its fields;
// its request hash is made from them, so the same fields are the same request.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { PaymentKind } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from './lease-ids.ts';

/** The default of HOLD_EXPIRY_MAX_MS: 7 days. */
export const HOLD_EXPIRY_MAX_MS = 604_800_000;

/** Every kind but a transfer, as the wire names them. */
export type { PaymentKind } from '../../src/ledger/transfer-request.ts';

export interface PaymentOp {
  readonly kind: PaymentKind;
  readonly operationId: string;
  /** The wallet the operation debits, and whose fence it carries. */
  readonly from: string;
  readonly to?: string;
  /** A credit_limit's new limit, an open_wallet's limit, 0 allowed. */
  readonly amount?: bigint;
  readonly currency?: string;
  /**
   * The hold of a capture or a void, the original of a refund, the reference of a deposit or a
   * withdrawal, a freeze_wallet's credits (`allowed` or `refused`).
   */
  readonly ref?: string;
  readonly expiresInMs?: number;
  readonly expiresAt?: Date;
  readonly legs?: readonly { to: string; amount: bigint }[];
  readonly fence: bigint;
  /** By default the one lease of this token (leaseIdFor). */
  readonly leaseId?: string;
}

export interface PaymentAnswer {
  readonly outcome: 'applied' | 'rejected' | 'duplicate' | 'conflict' | 'stale_fence';
  readonly status: string | null;
  readonly reason: string | null;
}

/** The checks apply_payments_unsafe() can switch off; each one left out stays on. */
export interface Switches {
  readonly idempotency?: boolean;
  readonly fence?: boolean;
  readonly lease?: boolean;
  readonly holdState?: boolean;
  readonly refundBound?: boolean;
  readonly creditLimit?: boolean;
  readonly walletStatus?: boolean;
}

export type Sql = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

function hashOf(op: PaymentOp): string {
  const fields = [op.kind, op.operationId, op.from, op.to, op.amount, op.currency, op.ref, op.expiresInMs];
  const legs = (op.legs ?? []).map((l) => `${l.to}=${l.amount}`);
  const lines = [...fields.map((f) => (f === undefined ? '' : String(f))), op.expiresAt?.toISOString() ?? '', ...legs];
  return createHash('sha256').update(lines.join('\n')).digest('hex');
}

function columns(ops: readonly PaymentOp[]): unknown[] {
  return [
    ops.map((o) => o.kind),
    ops.map((o) => o.operationId),
    ops.map(hashOf),
    ops.map((o) => o.from),
    ops.map((o) => o.to ?? null),
    ops.map((o) => (o.amount === undefined ? null : o.amount.toString())),
    ops.map((o) => o.currency ?? null),
    ops.map((o) => o.ref ?? null),
    ops.map((o) => (o.expiresInMs === undefined ? null : String(o.expiresInMs))),
    ops.map((o) => o.expiresAt?.toISOString() ?? null),
    ops.map((o) =>
      o.legs === undefined ? null : JSON.stringify(o.legs.map((l) => ({ to: l.to, amount: l.amount.toString() }))),
    ),
    ops.map((o) => o.fence.toString()),
    ops.map((o) => o.leaseId ?? leaseIdFor(o.fence)),
    HOLD_EXPIRY_MAX_MS,
  ];
}

const ARGUMENTS =
  '$1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[], ' +
  '$9::bigint[], $10::timestamptz[], $11::jsonb[], $12::bigint[], $13::uuid[], $14::bigint';

/** One call of apply_payments(): the answers in the operations' order. */
export async function applyPayments(sql: Sql, ops: readonly PaymentOp[]): Promise<PaymentAnswer[]> {
  const { rows } = await sql.query<PaymentAnswer>(
    `SELECT outcome, status, reason FROM apply_payments(${ARGUMENTS}) ORDER BY ord`,
    columns(ops),
  );
  return rows;
}

/** One call of apply_payments_unsafe() with the checks `off` names switched off. */
export async function applyPaymentsUnsafe(
  sql: Sql,
  ops: readonly PaymentOp[],
  off: Switches,
): Promise<PaymentAnswer[]> {
  const on = (check: boolean | undefined) => check !== false;
  const { rows } = await sql.query<PaymentAnswer>(
    `SELECT outcome, status, reason FROM apply_payments_unsafe(${ARGUMENTS}, $15, $16, $17, $18, $19, $20, $21) ORDER BY ord`,
    [
      ...columns(ops),
      on(off.idempotency),
      on(off.fence),
      on(off.lease),
      on(off.holdState),
      on(off.refundBound),
      on(off.creditLimit),
      on(off.walletStatus),
    ],
  );
  return rows;
}

/** A split of `from` to each [wallet, amount] leg, in order. */
export function splitOp(
  operationId: string,
  from: string,
  legs: readonly [string, bigint][],
  fence: bigint,
): PaymentOp {
  return { kind: 'split', operationId, from, legs: legs.map(([to, amount]) => ({ to, amount })), fence };
}

/** One call of apply_payments(), each answer as said() puts it. */
export async function decidedAs(sql: Sql, ops: readonly PaymentOp[]): Promise<string[]> {
  return (await applyPayments(sql, ops)).map(said);
}

/** One answer as a short word: `applied`, `rejected:<reason>`, or the outcome. */
export function said(answer: PaymentAnswer | undefined): string {
  if (answer === undefined) return 'none';
  return answer.outcome === 'rejected' ? `rejected:${answer.reason}` : answer.outcome;
}

/** The expiry sweep once: how many holds it released. */
export async function holdsExpire(sql: Sql, limit = 1000): Promise<number> {
  const { rows } = await sql.query<{ released: number }>('SELECT holds_expire($1) AS released', [limit]);
  return rows[0]?.released ?? -1;
}

/** The balance of a holding account `$held:<wallet>`: that wallet's `held`. */
const HELD = '$held:';

/**
 * The balances of these accounts, -1 for one that does not exist: a wallet's own, or for
 * `$held:<wallet>` the wallet's `held`.
 */
export async function balancesOf(sql: Sql, ids: readonly string[]): Promise<Record<string, bigint>> {
  const walletOf = (id: string) => (id.startsWith(HELD) ? id.slice(HELD.length) : id);
  const { rows } = await sql.query<{ id: string; balance: string; held: string }>(
    'SELECT id, balance::text AS balance, held::text AS held FROM wallets WHERE id = ANY ($1::text[])',
    [ids.map(walletOf)],
  );
  const out: Record<string, bigint> = {};
  for (const id of ids) {
    const row = rows.find((r) => r.id === walletOf(id));
    out[id] = BigInt((id.startsWith(HELD) ? row?.held : row?.balance) ?? '-1');
  }
  return out;
}

export interface HoldRow {
  state: string;
  captured: string;
  released: string;
  ended_by: string | null;
  expires_at: Date;
}

export async function holdOf(sql: Sql, holdId: string): Promise<HoldRow | undefined> {
  const { rows } = await sql.query<HoldRow>(
    'SELECT state, captured::text, released::text, ended_by, expires_at FROM holds WHERE hold_id = $1',
    [holdId],
  );
  return rows[0];
}

/** How many ledger entries the operation has (the sweep's release of a hold: `$expiry:<holdId>`). */
export async function entriesOf(sql: Sql, operationId: string): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM ledger_entries WHERE operation_id = $1',
    [operationId],
  );
  return rows[0]?.n ?? -1;
}
