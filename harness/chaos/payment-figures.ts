// The payments' counts for the report: per kind, per outcome (applied, or the reason of a
// refusal; undecided), the holds expired and still active at the check, and each credit wallet's
// debits applied against the count expected.
import type { ChaosWorkload } from './chaos-workload.ts';
import type { HoldRow, RecordRow } from './database-state.ts';

export interface PaymentFigures {
  readonly byKind: Record<string, Record<string, number>>;
  readonly holdsExpired: number;
  readonly holdsActive: number;
  readonly anchorsActive: number;
  /** Per credit wallet: its debits applied against the ⌊limit / amount⌋ expected, and refused. */
  readonly creditWallets: readonly CreditWalletFigures[];
}

export interface CreditWalletFigures {
  readonly wallet: string;
  readonly limit: string;
  readonly amount: string;
  readonly debits: number;
  readonly expected: number;
  readonly applied: number;
  readonly rejected: number;
}

export function paymentFigures(
  workload: ChaosWorkload,
  records: readonly RecordRow[],
  holds: ReadonlyMap<string, HoldRow>,
): PaymentFigures {
  const byKind: Record<string, Record<string, number>> = {};
  const count = (kind: string, outcome: string) => {
    const k = byKind[kind] ?? {};
    k[outcome] = (k[outcome] ?? 0) + 1;
    byKind[kind] = k;
  };
  const decided = new Set<string>();
  for (const r of records) {
    const op = workload.operations.get(r.operation_id);
    if (op === undefined) continue;
    decided.add(r.operation_id);
    count(op.kind, r.status === 'applied' ? 'applied' : (r.reason ?? 'rejected'));
  }
  for (const op of workload.operations.values()) if (!decided.has(op.operationId)) count(op.kind, 'undecided');
  const holdRows = [...holds.values()];
  return {
    byKind,
    holdsExpired: holdRows.filter((h) => h.state === 'expired').length,
    holdsActive: holdRows.filter((h) => h.state === 'active').length,
    anchorsActive: holdRows.filter((h) => h.state === 'active' && h.hold_id.startsWith('anchor-')).length,
    creditWallets: workload.credit.creditWallets.map((c) => {
      const mine = records.filter((r) => r.from_wallet === c.id && workload.operations.has(r.operation_id));
      return {
        wallet: c.id,
        limit: c.creditLimitMinor.toString(),
        amount: c.debitMinor.toString(),
        debits: c.debits,
        expected: Number(c.creditLimitMinor / c.debitMinor),
        applied: mine.filter((r) => r.status === 'applied').length,
        rejected: mine.filter((r) => r.status === 'rejected').length,
      };
    }),
  };
}
