// The wallets' end-state checks on hand-made histories: the balances against the model's
// replay, and last_fence against the debits' fences; each holds on a consistent history and fails
// when its property is switched off.
import { describe, expect, it } from 'vitest';
import { finalBalancesCheck, lastFenceCheck } from '../../../harness/chaos/balance-checks.ts';
import { factsOf, judge, recordOf, transfer, wallet } from './check-facts.ts';

const t1 = transfer('t1', 'w1', 'w2', 10n);

describe('final balances equal the expected ones', () => {
  it('holds when each wallet is its opening balance ± every applied transfer, once', () => {
    const wallets = [wallet('w1', 90n), wallet('w2', 110n), wallet('w3', 100n)];
    const facts = factsOf({ ops: [t1], records: [recordOf(t1)], wallets, commitOrder: ['t1'] });
    expect(judge(finalBalancesCheck, facts)).toEqual([]);
  });

  it('fails on a transfer applied twice, a held amount the model never credited, and a wallet missing', () => {
    const wallets = [wallet('w1', 80n), wallet('w2', 120n, { held: 5n })];
    const facts = factsOf({ ops: [t1], records: [recordOf(t1)], wallets, commitOrder: ['t1'] });
    expect(judge(finalBalancesCheck, facts)).toEqual([
      { wallet: 'w1', expected: '90', actual: '80', difference: '-10' },
      { wallet: 'w2', expected: '110', actual: '120', difference: '10' },
      { wallet: '$held:w2', expected: '0', actual: '5', difference: '5' },
      { wallet: 'w3', actual: null, problem: 'wallet missing' },
    ]);
  });
});

describe("each wallet's last_fence is at least its debits' fences", () => {
  const debit = (wallet_id: string, fence: bigint) => ({ operation_id: 't1', wallet_id, amount: -10n, fence });

  it('holds when the wallet wrote its highest token', () => {
    const facts = factsOf({ ops: [], wallets: [wallet('w1', 90n, { last_fence: 7n })], debits: [debit('w1', 7n)] });
    expect(judge(lastFenceCheck, facts)).toEqual([]);
  });

  it("fails on a debit, or a debit of the wallet's holding account, under a higher token", () => {
    const wallets = [wallet('w1', 90n, { last_fence: 3n })];
    const facts = factsOf({ ops: [], wallets, debits: [debit('w1', 7n), debit('$held:w1', 5n)] });
    expect(judge(lastFenceCheck, facts)).toEqual([
      { wallet: 'w1', lastFence: '3', highestDebitFence: '7' },
      { wallet: '$held:w1', sourceLastFence: '3', highestDebitFence: '5' },
    ]);
  });
});
