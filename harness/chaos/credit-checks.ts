// The credit limits' checks (chaos-credit.ts plans what they judge): each credit wallet applied
// exactly ⌊limit / amount⌋ of its debits, whatever the faults, the order and the re-deliveries;
// every credit limit change and every refused debit of a wallet opened at 0 agrees with the
// checker's model at its place in the decision order (payment-model.ts); and every wallet ends
// with the model's limit. The balances are balance-checks.ts's, the applied debits'
// paymentRulesCheck's (each within the limit in force).
import type { Invariant } from './check-result.ts';
import type { CheckFacts } from './expected-model.ts';

export const CREDIT_WALLETS_CHECK =
  'each credit wallet applied exactly ⌊limit / amount⌋ debits, the rest insufficient_funds';

export const creditWalletsCheck: Invariant<Pick<CheckFacts, 'workload' | 'recordList'>> = {
  name: CREDIT_WALLETS_CHECK,
  group: 'money',
  appliesTo: ({ workload }) => workload.credit.creditWallets.length > 0,
  find: ({ workload, recordList }, fail) => {
    for (const c of workload.credit.creditWallets) {
      const records = recordList.filter((r) => r.from_wallet === c.id && workload.operations.has(r.operation_id));
      const applied = records.filter((r) => r.status === 'applied').length;
      const expected = Number(c.creditLimitMinor / c.debitMinor);
      const otherwise = records.filter((r) => r.status !== 'applied' && r.reason !== 'insufficient_funds');
      if (applied !== expected || otherwise.length > 0) {
        fail({
          wallet: c.id,
          limit: c.creditLimitMinor.toString(),
          amount: c.debitMinor.toString(),
          debits: c.debits,
          decided: records.length,
          expected,
          applied,
          otherRefusals: otherwise.map((r) => `${r.operation_id}:${r.reason}`).join(' ') || null,
        });
      }
    }
  },
};

export const creditLimitRulesCheck: Invariant<Pick<CheckFacts, 'payments'>> = {
  name: 'every credit limit change held to what its wallet used, every refused debit to the limit (model)',
  group: 'money',
  find: ({ payments }, fail) => {
    for (const a of payments.anomalies) if (a.kind === 'credit-limit') fail(a.example);
  },
};

export const finalLimitsCheck: Invariant<Pick<CheckFacts, 'wallets' | 'payments'>> = {
  name: "every wallet's credit limit equals the model's (opening limit, changes in decision order)",
  group: 'money',
  find: ({ wallets, payments }, fail) => {
    for (const w of wallets) {
      const want = payments.limit.get(w.id) ?? 0n;
      if (w.credit_limit !== want) fail({ wallet: w.id, expected: want.toString(), actual: w.credit_limit.toString() });
    }
  },
};

/** Every credit check, in the report's order. */
export const CREDIT_CHECKS: readonly Invariant<CheckFacts>[] = [
  creditWalletsCheck,
  creditLimitRulesCheck,
  finalLimitsCheck,
];
