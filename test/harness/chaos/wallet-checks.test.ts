// The wallets' lifecycle checks on hand-made histories: a debit or a credit after a freeze, on the
// decision clock, is a counterexample; one that some order inside its transaction explains is not;
// a refusal wallet_frozen with no freeze before it is one too.
import { describe, expect, it } from 'vitest';
import type { WalletPlan } from '../../../harness/chaos/chaos-wallets.ts';
import {
  noFrozenCreditCheck,
  noFrozenDebitCheck,
  openedWalletsCheck,
  walletDecisionsCheck,
} from '../../../harness/chaos/wallet-checks.ts';
import type { WalletEntryRow, WalletLog } from '../../../harness/chaos/wallet-state.ts';
import { factsOf, judge, operation, recordOf, transfer, wallet } from './check-facts.ts';

const freeze = (id: string, w: string, credits: 'allowed' | 'refused') =>
  operation(id, 'freeze_wallet', { from: w, wallet: w, credits });
const unfreeze = (id: string, w: string) => operation(id, 'unfreeze_wallet', { from: w, wallet: w });

const plan = (ids: string[]): WalletPlan => ({
  opened: new Map(),
  operationIds: new Set(ids),
  watched: new Set(['w1']),
});

function entry(id: number, op: string, amount: bigint, at: bigint, tx: bigint, extra: Partial<WalletEntryRow> = {}) {
  return {
    id: BigInt(id),
    operation_id: op,
    wallet_id: 'w1',
    amount,
    balance_after: 0n,
    at,
    tx,
    own_hold: false,
    ...extra,
  };
}

/** Decisions: operation id → [transaction start, decision clock]. */
function log(decided: Record<string, [number, number]>, entries: WalletEntryRow[]): WalletLog {
  const stamps = Object.entries(decided).map(([op, [tx, at]]) => [op, { tx: BigInt(tx), at: BigInt(at) }] as const);
  return { decided: new Map(stamps), entries };
}

describe('wallet checks', () => {
  const f = freeze('f1', 'w1', 'refused');
  const u = unfreeze('u1', 'w1');
  const t = transfer('t1', 'w1', 'w2', 5n);
  const c = transfer('c1', 'w2', 'w1', 5n);
  const ops = [f, u, t, c];
  const records = [recordOf(f), recordOf(u), recordOf(t), recordOf(c)];
  const walletOps = plan(['f1', 'u1']);

  it('a debit decided after a freeze and before its unfreeze is a counterexample', () => {
    const walletLog = log({ f1: [10, 11], u1: [30, 31], t1: [20, 21], c1: [40, 41] }, [
      entry(1, 't1', -5n, 21n, 20n),
      entry(2, 'c1', 5n, 41n, 40n),
    ]);
    const facts = factsOf({ ops, records, walletOps, walletLog });
    const found = judge(noFrozenDebitCheck, facts);
    expect(found).toEqual([
      { wallet: 'w1', entry: '1', operationId: 't1', amount: '-5', statuses: 'frozen', lastChange: 'f1' },
    ]);
    expect(judge(noFrozenCreditCheck, facts)).toEqual([]);
  });

  it('a debit the same transaction may have decided after the unfreeze is none', () => {
    // t1 and u1 share a transaction: its entry is stamped before u1's event, yet may follow it.
    const walletLog = log({ f1: [10, 11], u1: [20, 23], t1: [20, 22] }, [entry(1, 't1', -5n, 21n, 20n)]);
    expect(judge(noFrozenDebitCheck, factsOf({ ops, records, walletOps, walletLog }))).toEqual([]);
  });

  it('a credit to a wallet frozen for credits is a counterexample, its own hold given back is not', () => {
    const walletLog = log({ f1: [10, 11], u1: [30, 31], c1: [20, 21] }, [
      entry(1, 'c1', 5n, 21n, 20n),
      entry(2, '$expiry:h1', 5n, 22n, 21n, { own_hold: true }),
    ]);
    const found = judge(noFrozenCreditCheck, factsOf({ ops, records, walletOps, walletLog }));
    expect(found.map((e) => e.operationId)).toEqual(['c1']);
  });

  it('a refusal wallet_frozen of a wallet never frozen then is a counterexample', () => {
    const refused = [recordOf(f), recordOf(u), recordOf(t, 'rejected', 'wallet_frozen')];
    const early = log({ f1: [10, 11], u1: [30, 31], t1: [5, 6] }, []);
    const late = log({ f1: [10, 11], u1: [30, 31], t1: [20, 21] }, []);
    const facts = (walletLog: WalletLog) => factsOf({ ops, records: refused, walletOps, walletLog });
    expect(judge(walletDecisionsCheck, facts(early))).toEqual([
      {
        operationId: 't1',
        kind: 'transfer',
        status: 'rejected',
        reason: 'wallet_frozen',
        problem: 'no wallet it posts to was frozen then',
      },
    ]);
    expect(judge(walletDecisionsCheck, facts(late))).toEqual([]);
  });

  it("a wallet whose status is not its history's last is a counterexample", () => {
    const walletLog = log({ f1: [10, 11], u1: [30, 31] }, []);
    const wallets = [wallet('w1', 100n, { status: 'frozen' }), wallet('w2', 100n), wallet('w3', 100n)];
    const found = judge(openedWalletsCheck, factsOf({ ops, records, walletOps, walletLog, wallets }));
    expect(found).toEqual([{ wallet: 'w1', status: 'frozen', history: 'open' }]);
  });
});
