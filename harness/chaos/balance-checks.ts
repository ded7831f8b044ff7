// The checks of each wallet's end state: its balance and its held amount are exactly the model's
// (payment-model.ts replays every applied operation, its stored request, and every expiry by the
// rules; with transfers alone, opening ± each once), and its last_fence is at least the fence of
// every debit it took.
import type { Invariant } from './check-result.ts';
import type { CheckFacts } from './expected-model.ts';
import { HELD } from './payment-model.ts';

export const finalBalancesCheck: Invariant<Pick<CheckFacts, 'workload' | 'wallets' | 'payments'>> = {
  name: 'final balances equal the expected ones (opening ± every applied operation, once)',
  group: 'money',
  find: ({ workload, wallets, payments }, fail) => {
    const expected = payments.balance;
    const seen = new Set<string>();
    const compare = (wallet: string, want: bigint, actual: bigint) => {
      if (want !== actual)
        fail({ wallet, expected: want.toString(), actual: actual.toString(), difference: (actual - want).toString() });
    };
    for (const w of wallets) {
      seen.add(w.id);
      const want = expected.get(w.id);
      if (want === undefined) fail({ wallet: w.id, actual: w.balance.toString(), expected: null });
      else compare(w.id, want, w.balance);
      // Its holding account, `$held:<wallet>`, is its `held`; one the model never credited holds nothing.
      compare(`${HELD}${w.id}`, expected.get(`${HELD}${w.id}`) ?? 0n, w.held);
    }
    for (const w of workload.wallets) if (!seen.has(w)) fail({ wallet: w, actual: null, problem: 'wallet missing' });
  },
};

export const lastFenceCheck: Invariant<Pick<CheckFacts, 'wallets' | 'debits'>> = {
  name: "each wallet's last_fence is at least the fence of every debit it took",
  group: 'fence',
  find: ({ wallets, debits }, fail) => {
    const maxDebitFence = new Map<string, bigint>();
    for (const d of debits) {
      if (d.fence !== null && d.fence > (maxDebitFence.get(d.wallet_id) ?? 0n)) maxDebitFence.set(d.wallet_id, d.fence);
    }
    // A holding account is debited under its wallet's token (the wallet is the one locked and
    // fenced), so its debits are judged against that wallet's last_fence.
    for (const w of wallets) {
      const max = maxDebitFence.get(w.id) ?? 0n;
      if (w.last_fence < max)
        fail({ wallet: w.id, lastFence: w.last_fence.toString(), highestDebitFence: max.toString() });
      const heldMax = maxDebitFence.get(`${HELD}${w.id}`) ?? 0n;
      if (w.last_fence < heldMax) {
        const sourceLastFence = w.last_fence.toString();
        fail({ wallet: `${HELD}${w.id}`, sourceLastFence, highestDebitFence: heldMax.toString() });
      }
    }
  },
};
