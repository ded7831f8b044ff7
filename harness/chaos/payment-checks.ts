// The payments' checks: their invariants in SQL (payment-sql-checks.ts), then the comparisons
// with the checker's own model of the rules (payment-model.ts): every applied record followed the
// rules given the model's state then, each refusal is what its reason claims (where that is
// decidable after the fact, against the end state), no hold ended twice, no refund above what was
// left of its original, and every hold's end is the model's. The balances are balance-checks.ts's.
import type { OperationKind } from '../../src/ledger/transfer-request.ts';
import type { Invariant } from './check-result.ts';
import type { CheckFacts } from './expected-model.ts';
import {
  type AnomalyKind,
  kindOf,
  type PaymentModel,
  refundKey,
  refundLimit,
  replayedWithoutEntries,
  type Wire,
  wireOf,
} from './payment-model.ts';
import { PAYMENT_SQL_INVARIANTS, sqlInvariant } from './payment-sql-checks.ts';
import { judgedByWalletChecks } from './wallet-checks.ts';

/** What a refusal's reason is judged against: the workload, the records, the model's end state. */
type RefusalFacts = Pick<CheckFacts, 'workload' | 'records' | 'payments'>;

/** Why a refusal with this reason is not what its reason claims, or null when it is consistent. */
type Judge = (facts: RefusalFacts, wire: Wire, reason: string) => string | null;

function judgeSplit({ workload }: RefusalFacts, wire: Wire, reason: string): string | null {
  const systemMinor = workload.openingBalanceMinor * BigInt(workload.wallets.length);
  const total = (wire.legs as { amount: string }[]).reduce((t, l) => t + BigInt(l.amount), 0n);
  return reason === 'insufficient_funds' && total > systemMinor ? null : 'a split every wallet could cover';
}

/** The hold's request as sent, or null when the id is no hold of the workload. */
function holdWire({ workload }: RefusalFacts, holdId: string): Wire | null {
  const op = workload.operations.get(holdId);
  return op?.kind === 'hold' ? ([...op.wires.values()][0] as unknown as Wire) : null;
}

function judgeCaptureOrVoid(kind: 'capture' | 'void'): Judge {
  return (facts, wire, reason) => {
    const holdId = wire.hold as string;
    const h = facts.payments.holds.get(holdId);
    const hw = holdWire(facts, holdId);
    const state = `the hold is ${h?.state ?? 'absent'}`;
    switch (reason) {
      case 'hold_not_found':
        return null;
      case 'hold_rejected':
        return facts.records.get(holdId)?.status === 'rejected' ? null : 'the hold was not rejected';
      case 'hold_already_captured':
        return h?.state === 'captured' && h.endedBy !== wire.operationId ? null : state;
      case 'hold_already_voided':
        return h?.state === 'voided' && h.endedBy !== wire.operationId ? null : state;
      case 'hold_expired':
        return h?.state === 'expired' ? null : state;
      case 'exceeds_hold_amount': {
        const above =
          hw !== null && wire.amount !== undefined && BigInt(wire.amount as string) > BigInt(hw.amount as string);
        return kind === 'capture' && above ? null : 'the capture is within the hold';
      }
      case 'wallet_mismatch':
        return hw !== null && hw.from !== wire.from ? null : 'the capture or void names the hold source';
      default:
        return 'not a reason a capture or void of this workload may have';
    }
  };
}

function judgeRefund(facts: RefusalFacts, wire: Wire, reason: string): string | null {
  const original = wire.original as string;
  const o = facts.records.get(original);
  const oKind = facts.workload.operations.get(original)?.kind;
  if (reason === 'original_not_found' || reason === 'wallet_mismatch') return null;
  if (reason === 'original_not_refundable') {
    const refundable = o !== undefined && o.status === 'applied' && (oKind === 'transfer' || oKind === 'split');
    return refundable ? 'the original is an applied transfer or split' : null;
  }
  if (reason === 'refund_exceeds_original') {
    const limit = refundLimit(facts.payments, original, wire.from);
    if (typeof limit === 'string') return `original: ${limit}`;
    const left = limit - (facts.payments.refunded.get(refundKey(original, wire.from)) ?? 0n);
    const asked = wire.amount === undefined ? null : BigInt(wire.amount as string);
    const exceeds = (asked === null && left <= 0n) || (asked !== null && asked > left);
    return exceeds ? null : `asked ${asked ?? 'the rest'} with ${left} left at the end`;
  }
  return 'not a reason a refund of this workload may have';
}

const JUDGES: Partial<Record<OperationKind, Judge>> = {
  split: judgeSplit,
  capture: judgeCaptureOrVoid('capture'),
  void: judgeCaptureOrVoid('void'),
  refund: judgeRefund,
};

/** The replay's anomalies of one kind, in commit order. */
function anomalies(payments: PaymentModel, kind: AnomalyKind) {
  return payments.anomalies.filter((a) => a.kind === kind).map((a) => a.example);
}

export const paymentRulesCheck: Invariant<Pick<CheckFacts, 'workload' | 'records' | 'recordList' | 'payments'>> = {
  name: "every decided record follows the payment rules (the checker's model, commit order)",
  group: 'money',
  find: (facts, fail) => {
    for (const example of anomalies(facts.payments, 'payment-rules')) fail(example);
    // Refusals: what each reason claims, against the end state (the order of refusals is not recorded).
    for (const r of facts.recordList) {
      if (r.status !== 'rejected') continue;
      const kind = kindOf(facts.workload, r.operation_id);
      const wire = wireOf(facts.workload, r);
      if (kind === 'transfer' || wire === null) continue; // transfers: "no valid transfer was rejected"
      if (replayedWithoutEntries(facts.workload, r)) continue; // judged by the replay (credit-checks.ts)
      if (judgedByWalletChecks(facts.workload, r)) continue; // judged by the wallets' histories
      const judge = JUDGES[kind];
      const problem =
        judge === undefined ? `a ${kind} of this workload is never refused` : judge(facts, wire, r.reason ?? '');
      if (problem !== null) fail({ operationId: r.operation_id, kind, reason: r.reason, problem });
    }
  },
};

export const holdEndedOnceCheck: Invariant<Pick<CheckFacts, 'payments'>> = {
  name: 'no hold ended twice, and none was captured or voided after it ended (model)',
  group: 'exactly-once',
  find: ({ payments }, fail) => {
    for (const example of anomalies(payments, 'hold-ended-twice')) fail(example);
  },
};

export const refundBoundCheck: Invariant<Pick<CheckFacts, 'payments'>> = {
  name: 'no refund moved more than what was left of its original (model)',
  group: 'money',
  find: ({ payments }, fail) => {
    for (const example of anomalies(payments, 'over-refund')) fail(example);
  },
};

export const holdEndsCheck: Invariant<Pick<CheckFacts, 'holds' | 'payments'>> = {
  name: "every hold's end state equals the model's (state, captured, released, ended by)",
  group: 'money',
  find: ({ holds, payments }, fail) => {
    for (const [id, h] of payments.holds) {
      const d = holds.get(id);
      const want = `${h.state} ${h.captured}/${h.released} ${h.endedBy ?? '-'}`;
      const got = d === undefined ? 'no row' : `${d.state} ${d.captured}/${d.released} ${d.ended_by ?? '-'}`;
      if (want !== got) fail({ hold: id, model: want, database: got });
    }
    for (const id of holds.keys())
      if (!payments.holds.has(id)) fail({ hold: id, model: 'never applied', database: 'row' });
  },
};

/** Every payment check, in the report's order: the SQL ones, then the model's. */
export const PAYMENT_CHECKS: readonly Invariant<CheckFacts>[] = [
  ...PAYMENT_SQL_INVARIANTS.map(sqlInvariant),
  paymentRulesCheck,
  holdEndedOnceCheck,
  refundBoundCheck,
  holdEndsCheck,
];
