// The credit limits' checks on hand-made histories: a limit wallet whose limit is lowered below
// what it uses (refused), then within it (applied), with debits before and after, replayed in the
// feed's order and consistent; a credit wallet applying ⌊limit / amount⌋ of its debits. Then each
// property broken (a lowering applied below what is used, a debit applied past the limit in force,
// a refusal the limit did not call for, a credit wallet applying one debit more, a limit that is
// not the model's) and its check failing on it.
import { describe, expect, it } from 'vitest';
import { creditLimitRulesCheck, creditWalletsCheck, finalLimitsCheck } from '../../../harness/chaos/credit-checks.ts';
import { paymentRulesCheck } from '../../../harness/chaos/payment-checks.ts';
import { factsOf, judge, operation, recordOf, transfer, wallet } from './check-facts.ts';

const credit = {
  groups: [],
  openingLimits: new Map([
    ['lw1', 100n],
    ['cw1', 100n],
  ]),
  creditWallets: [{ id: 'cw1', creditLimitMinor: 100n, debitMinor: 30n, debits: 5 }],
};
const limit = (id: string, value: bigint) => operation(id, 'credit_limit', { from: 'lw1', limit: String(value) });
const d1 = transfer('d1', 'lw1', 'w1', 60n);
const l1 = limit('l1', 50n);
const l2 = limit('l2', 80n);
const d2 = transfer('d2', 'lw1', 'w1', 30n);
const d3 = transfer('d3', 'lw1', 'w1', 20n);
const ops = [d1, l1, l2, d2, d3];

describe('a limit wallet', () => {
  const consistent = factsOf({
    ops,
    credit,
    records: [
      recordOf(d1),
      recordOf(l1, 'rejected', 'limit_below_used'),
      recordOf(l2),
      recordOf(d2, 'rejected', 'insufficient_funds'),
      recordOf(d3),
    ],
    feedOrder: ['d1', 'l1', 'l2', 'd2', 'd3'],
    commitOrder: ['d1', 'd3'],
    wallets: [wallet('lw1', -80n, { credit_limit: 80n })],
  });

  it('the model replays the changes in decision order: balance -80, limit 80, every check holds', () => {
    expect(consistent.payments.balance.get('lw1')).toBe(-80n);
    expect(consistent.payments.limit.get('lw1')).toBe(80n);
    expect(judge(creditLimitRulesCheck, consistent)).toEqual([]);
    expect(judge(paymentRulesCheck, consistent)).toEqual([]);
    expect(judge(finalLimitsCheck, consistent)).toEqual([]);
  });

  it('a lowering applied below what the wallet uses, and a refusal it did not call for, fail the rules', () => {
    const facts = factsOf({
      ops,
      credit,
      records: [
        recordOf(d1),
        recordOf(l1),
        recordOf(l2, 'rejected', 'limit_below_used'),
        recordOf(d2, 'rejected', 'insufficient_funds'),
        recordOf(d3),
      ],
      feedOrder: ['d1', 'l1', 'l2', 'd2', 'd3'],
      commitOrder: ['d1', 'd3'],
    });
    expect(judge(creditLimitRulesCheck, facts)).toEqual([
      {
        operationId: 'l1',
        kind: 'credit_limit',
        limit: '50',
        problem: 'applied with 60 used (balance -60, limit 100)',
      },
      {
        operationId: 'l2',
        kind: 'credit_limit',
        limit: '80',
        problem: 'refused limit_below_used with 60 used (balance -60, limit 100)',
      },
      { operationId: 'd2', kind: 'transfer', problem: 'refused insufficient_funds for 30 with balance -60, limit 100' },
    ]);
  });

  it('a debit applied past the limit in force (no-credit-limit) fails the payment rules, and the limit check', () => {
    const facts = factsOf({
      ops,
      credit,
      records: [recordOf(d1), recordOf(l1, 'rejected', 'limit_below_used'), recordOf(l2), recordOf(d2), recordOf(d3)],
      feedOrder: ['d1', 'l1', 'l2', 'd2', 'd3'],
      commitOrder: ['d1', 'd2', 'd3'],
      wallets: [wallet('lw1', -110n, { credit_limit: 100n })],
    });
    expect(judge(paymentRulesCheck, facts)).toEqual([
      { operationId: 'd2', kind: 'transfer', problem: 'applied 30 with balance -60, limit 80' },
    ]);
    expect(judge(finalLimitsCheck, facts)).toEqual([{ wallet: 'lw1', expected: '80', actual: '100' }]);
  });
});

describe('a credit wallet', () => {
  const debits = [1, 2, 3, 4, 5].map((i) => transfer(`c${i}`, 'cw1', 'w1', 30n));
  const facts = (applied: number) =>
    factsOf({
      ops: debits,
      credit,
      records: debits.map((d, i) => (i < applied ? recordOf(d) : recordOf(d, 'rejected', 'insufficient_funds'))),
      commitOrder: debits.slice(0, applied).map((d) => d.operationId),
    });

  it('applies exactly ⌊100 / 30⌋ = 3 of its 5 debits', () => {
    expect(judge(creditWalletsCheck, facts(3))).toEqual([]);
    expect(judge(creditLimitRulesCheck, facts(3))).toEqual([]);
  });

  it('one more applied fails the count', () => {
    expect(judge(creditWalletsCheck, facts(4))).toEqual([
      {
        wallet: 'cw1',
        limit: '100',
        amount: '30',
        debits: 5,
        decided: 5,
        expected: 3,
        applied: 4,
        otherRefusals: null,
      },
    ]);
  });
});
