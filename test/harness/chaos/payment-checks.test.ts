// The payments' checks against the checker's model (payment-model.ts) on hand-made histories: a
// hold captured, a refund within its original, each consistent; then each property switched off
// (a hold ended twice, a refund above its original, a hold applied beyond the balance, a refusal
// whose reason is false, a hold row that is not the model's) and its check failing on it.
import { describe, expect, it } from 'vitest';
import {
  holdEndedOnceCheck,
  holdEndsCheck,
  paymentRulesCheck,
  refundBoundCheck,
} from '../../../harness/chaos/payment-checks.ts';
import { PAYMENT_SQL_INVARIANTS, sqlInvariant } from '../../../harness/chaos/payment-sql-checks.ts';
import { factsOf, holdRow, judge, operation, recordOf, transfer } from './check-facts.ts';

const h1 = operation('h1', 'hold', { from: 'w1', to: 'w2', amount: '30' });
const c1 = operation('c1', 'capture', { from: 'w1', hold: 'h1', amount: '20' });
const v1 = operation('v1', 'void', { from: 'w1', hold: 'h1' });
const captured = holdRow(h1, 'captured', { captured: 20n, released: 10n, ended_by: 'c1' });

describe('holds', () => {
  const consistent = factsOf({
    ops: [h1, c1],
    records: [recordOf(h1), recordOf(c1)],
    holds: [captured],
    commitOrder: ['h1', 'c1'],
  });

  it('the model replays a hold and its capture, and every hold check holds', () => {
    expect(consistent.payments.balance.get('w1')).toBe(80n);
    expect(consistent.payments.balance.get('w2')).toBe(120n);
    expect(consistent.payments.balance.get('$held:w1')).toBe(0n);
    expect(judge(paymentRulesCheck, consistent)).toEqual([]);
    expect(judge(holdEndedOnceCheck, consistent)).toEqual([]);
    expect(judge(holdEndsCheck, consistent)).toEqual([]);
  });

  it("a void applied after the capture (the hold's state check off) is a hold ended twice", () => {
    const facts = factsOf({
      ops: [h1, c1, v1],
      records: [recordOf(h1), recordOf(c1), recordOf(v1)],
      holds: [captured],
      commitOrder: ['h1', 'c1', 'v1'],
    });
    expect(judge(holdEndedOnceCheck, facts)).toEqual([
      { operationId: 'v1', kind: 'void', hold: 'h1', problem: 'applied to a hold already captured', endedBy: 'c1' },
    ]);
  });

  it("a hold row that is not the model's end fails the hold-end check", () => {
    const voided = holdRow(h1, 'voided', { released: 30n, ended_by: 'v1' });
    const facts = factsOf({
      ops: [h1, c1],
      records: [recordOf(h1), recordOf(c1)],
      holds: [voided],
      commitOrder: ['h1', 'c1'],
    });
    expect(judge(holdEndsCheck, facts)).toEqual([
      { hold: 'h1', model: 'captured 20/10 c1', database: 'voided 0/30 v1' },
    ]);
  });
});

describe('the payment rules', () => {
  it('a hold applied beyond the available balance and the limit breaks the rules', () => {
    const big = operation('h2', 'hold', { from: 'w1', to: 'w2', amount: '500' });
    const facts = factsOf({
      ops: [big],
      records: [recordOf(big)],
      holds: [holdRow(big, 'active')],
      commitOrder: ['h2'],
    });
    expect(judge(paymentRulesCheck, facts)).toEqual([
      { operationId: 'h2', kind: 'hold', problem: 'hold of 500 applied with balance 100, limit 0' },
    ]);
  });

  it('a refusal is judged by what its reason claims: a capture refused as expired, of a captured hold, is false', () => {
    const c2 = operation('c2', 'capture', { from: 'w1', hold: 'h1' });
    const records = [recordOf(h1), recordOf(c1), recordOf(c2, 'rejected', 'hold_already_captured')];
    const ops = [h1, c1, c2];
    const base = { ops, holds: [captured], commitOrder: ['h1', 'c1'] };
    expect(judge(paymentRulesCheck, factsOf({ ...base, records }))).toEqual([]);
    const expired = [...records.slice(0, 2), recordOf(c2, 'rejected', 'hold_expired')];
    expect(judge(paymentRulesCheck, factsOf({ ...base, records: expired }))).toEqual([
      { operationId: 'c2', kind: 'capture', reason: 'hold_expired', problem: 'the hold is captured' },
    ]);
  });
});

describe('refunds', () => {
  const t1 = transfer('t1', 'w1', 'w2', 10n);
  const refund = (id: string, amount: string) => operation(id, 'refund', { from: 'w2', original: 't1', amount });

  it('a refund within its original holds; one past what is left (the bound off) fails', () => {
    const [r1, r2] = [refund('r1', '5'), refund('r2', '8')];
    const within = factsOf({ ops: [t1, r1], records: [recordOf(t1), recordOf(r1)], commitOrder: ['t1', 'r1'] });
    expect(judge(refundBoundCheck, within)).toEqual([]);
    expect(within.payments.balance.get('w1')).toBe(95n);
    const past = factsOf({
      ops: [t1, r1, r2],
      records: [recordOf(t1), recordOf(r1), recordOf(r2)],
      commitOrder: ['t1', 'r1', 'r2'],
    });
    expect(judge(refundBoundCheck, past)).toEqual([{ operationId: 'r2', original: 't1', asked: '8', left: '5' }]);
  });
});

describe('the SQL invariants', () => {
  const [first] = PAYMENT_SQL_INVARIANTS;
  if (first === undefined) throw new Error('no SQL invariant');
  const check = sqlInvariant(first);

  it('hold when their query answered no row, fail on each row, and fail when it never ran', () => {
    expect(judge(check, { sqlViolations: new Map([[first.name, []]]) })).toEqual([]);
    const row = { wallet: 'w1', balance: '-5', held: '0' };
    expect(judge(check, { sqlViolations: new Map([[first.name, [row]]]) })).toEqual([row]);
    expect(judge(check, { sqlViolations: new Map() })).toEqual([{ problem: 'its query was not run' }]);
  });
});
