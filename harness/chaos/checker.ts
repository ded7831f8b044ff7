// The checker: after the queue has drained, proves (or refutes, with counterexamples) the
// invariants of DESIGN.md on the database — the ledger ones through src/ledger/reconciliation.ts —
// and the end-to-end ones that need the harness's own record of what was sent: every message
// has a final state, every operation one terminal outcome, invalid messages moved nothing,
// each job's answer agrees with the stored record, and the final balances are exactly the
// expected ones. It reads the database once (database-state.ts), builds the model of what should
// have happened once (expected-model.ts), and runs the list of checks, CHECKS, against both.
import type { PrismaClient } from '../../src/db/prisma.ts';
import { COUNTEREXAMPLES_MAX, type ReconcileReport } from '../../src/ledger/reconciliation.ts';
import { finalBalancesCheck, lastFenceCheck } from './balance-checks.ts';
import { type CheckGroup, type CheckResult, type Invariant, runInvariants } from './check-result.ts';
import { CREDIT_CHECKS } from './credit-checks.ts';
import { readDatabaseState } from './database-state.ts';
import { buildCheckFacts, type CheckFacts, type CheckInput } from './expected-model.ts';
import {
  appliedOnceCheck,
  conflictsOnceCheck,
  invalidMessagesCheck,
  jobAnswersCheck,
  metadataKeptCheck,
  noRejectionCheck,
  storedRequestCheck,
  terminalOutcomeCheck,
} from './operation-checks.ts';
import { PAYMENT_CHECKS } from './payment-checks.ts';
import { type PaymentFigures, paymentFigures } from './payment-figures.ts';
import { drainedCheck, finalStateCheck } from './queue-checks.ts';
import { WALLET_CHECKS } from './wallet-checks.ts';

export type { CheckInput } from './expected-model.ts';

/** The harness's checks, in the report's order (after the ledger's own, from reconcile()). */
export const CHECKS: readonly Invariant<CheckFacts>[] = [
  drainedCheck,
  finalStateCheck,
  terminalOutcomeCheck,
  storedRequestCheck,
  metadataKeptCheck,
  noRejectionCheck,
  jobAnswersCheck,
  appliedOnceCheck,
  conflictsOnceCheck,
  invalidMessagesCheck,
  ...PAYMENT_CHECKS,
  ...CREDIT_CHECKS,
  ...WALLET_CHECKS,
  finalBalancesCheck,
  lastFenceCheck,
];

const RECONCILE_GROUPS: Record<string, CheckGroup> = {
  'conservation: sum of balances equals the opening balances plus what entered less what left': 'money',
  'no balance below minus its credit limit, no negative held': 'money',
  "no entry's running balance below minus the credit limit in force then": 'money',
  'at most one debit per operation': 'exactly-once',
  "every operation's entries sum to zero": 'money',
  'every wallet balance equals the sum of its entries': 'money',
  "every entry's running balance equals the sum of its account's entries up to it": 'money',
  'applied transfers have one debit and one credit; others none': 'exactly-once',
  'each settlement account mirrors the deposits and withdrawals of its currency': 'money',
  'every money movement has an operation record': 'exactly-once',
  'per wallet, debit fences never decrease in commit order': 'fence',
  'per wallet, no token was used by two leases': 'fence',
  "each wallet's held equals the sum of its active holds": 'money',
  'every ended hold has captured + released = amount and ended once': 'exactly-once',
  'no applied capture of a voided or expired hold, no applied void of a captured one': 'exactly-once',
  "no refund total above its original's refundable amount": 'money',
  "every split's legs sum to its debit": 'money',
};

/** The ledger invariants of the project's own reconcile(), as check results. */
export function ledgerResults(ledger: ReconcileReport): CheckResult[] {
  return ledger.invariants.map((inv) => {
    const counterexamples = inv.counterexamples;
    const ok = counterexamples.length === 0;
    return {
      name: inv.name,
      group: RECONCILE_GROUPS[inv.name] ?? 'money',
      ok,
      violations: ok ? 0 : Math.max(1, counterexamples.length),
      capped: counterexamples.length >= COUNTEREXAMPLES_MAX,
      counterexamples,
    };
  });
}

export interface CheckOutput {
  readonly checks: CheckResult[];
  /** The ledger's own totals, from reconcile(). */
  readonly totals: ReconcileReport['totals'];
  /** The payments' counts: per kind and outcome, holds expired. */
  readonly payments: PaymentFigures;
}

export async function runChecks(prisma: PrismaClient, input: CheckInput): Promise<CheckOutput> {
  const db = await readDatabaseState(prisma, [...input.workload.walletOps.watched]);
  const facts = buildCheckFacts(input, db);
  return {
    checks: [...ledgerResults(db.ledger), ...runInvariants(CHECKS, facts)],
    totals: db.ledger.totals,
    payments: paymentFigures(input.workload, db.recordList, db.holds),
  };
}
