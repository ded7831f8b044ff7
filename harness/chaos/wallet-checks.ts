// The wallets' lifecycle checks (chaos-wallets.ts plans what they judge). Each watched wallet's
// status history is rebuilt from the applied open, freeze, unfreeze and close records, and its
// balance history from its entries' running balances, both on the decision clock (wallet-state.ts
// says why that clock orders one wallet's decisions and what it leaves open inside a transaction).
// Where the order is open (decisions of one transaction, equal clocks), every status and balance it
// could have been is allowed, so a check fails only on what no order the database could have
// decided in explains. Proved: no debit of a wallet not open, no credit (other than its own holds'
// money back) to a wallet frozen for credits or closed, every opened wallet there once in the
// currency asked and ending in a status its history allows, and every refusal and status change of
// the stream, and every wallet_frozen or wallet_closed anywhere, what its reason claims.
import { walletOf } from '../../src/ledger/transfer-request.ts';
import type { Counterexample, Invariant } from './check-result.ts';
import type { CheckFacts } from './expected-model.ts';
import { kindOf, type Wire, wireOf } from './payment-model.ts';
import type { WalletEntryRow } from './wallet-state.ts';

export type WalletStatus = 'absent' | 'open' | 'debits_frozen' | 'frozen' | 'closed';

/** An applied status change: when it was decided, and the status it left. */
interface Change {
  readonly operationId: string;
  readonly at: bigint;
  readonly tx: bigint;
  readonly status: WalletStatus;
}

const STATUS_KINDS = new Set(['open_wallet', 'freeze_wallet', 'unfreeze_wallet', 'close_wallet']);
/** Later than every decision. */
const NEVER = 2n ** 62n;

type HistoryFacts = Pick<CheckFacts, 'workload' | 'recordList' | 'walletLog'>;

/** The status a change leaves. */
function statusAfter(kind: string, wire: Wire): WalletStatus {
  if (kind === 'freeze_wallet') return wire.credits === 'refused' ? 'frozen' : 'debits_frozen';
  return kind === 'close_wallet' ? 'closed' : 'open';
}

/** Every wallet's status history and entries, as the database decided them. */
export class WalletHistories {
  private readonly changes = new Map<string, Change[]>();
  private readonly entries = new Map<string, WalletEntryRow[]>();
  /** Applied status changes the feed has no event (so no clock) for. */
  readonly unstamped: string[] = [];

  constructor(private readonly facts: HistoryFacts) {
    for (const r of facts.recordList) {
      const kind = kindOf(facts.workload, r.operation_id);
      const wire = wireOf(facts.workload, r);
      if (r.status !== 'applied' || !STATUS_KINDS.has(kind) || wire === null) continue;
      const stamp = facts.walletLog.decided.get(r.operation_id);
      if (stamp === undefined) {
        this.unstamped.push(r.operation_id);
        continue;
      }
      const wallet = wire.wallet as string;
      const change = { operationId: r.operation_id, at: stamp.at, tx: stamp.tx, status: statusAfter(kind, wire) };
      this.changes.set(wallet, [...(this.changes.get(wallet) ?? []), change]);
    }
    for (const list of this.changes.values()) list.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
    for (const e of facts.walletLog.entries)
      this.entries.set(e.wallet_id, [...(this.entries.get(e.wallet_id) ?? []), e]);
  }

  /** Its status before any change: open when seeded, absent when only an open_wallet makes it. */
  initial(wallet: string): WalletStatus {
    const { workload } = this.facts;
    return workload.wallets.includes(wallet) || workload.credit.openingLimits.has(wallet) ? 'open' : 'absent';
  }

  changesOf(wallet: string): readonly Change[] {
    return this.changes.get(wallet) ?? [];
  }

  entriesOf(wallet: string): readonly WalletEntryRow[] {
    return this.entries.get(wallet) ?? [];
  }

  /**
   * The statuses the wallet may have had when a decision of transaction `tx` stamped `at` was taken:
   * the one the last transaction before it left (any of its changes: their order inside it is not
   * stored), and any its own transaction's changes (or a change with the same clock) set.
   */
  statusesAt(wallet: string, at: bigint, tx: bigint | null, except?: string): Set<WalletStatus> {
    const changes = this.changesOf(wallet).filter((c) => c.operationId !== except);
    return possibleAt(changes, at, tx, (c) => c.status, this.initial(wallet));
  }

  /** The balances the wallet may have had then, the same way, from its entries' running balances (0 before any). */
  balancesAt(wallet: string, at: bigint, tx: bigint | null): Set<bigint> {
    return possibleAt(this.entriesOf(wallet), at, tx, (e) => e.balance_after, 0n);
  }
}

/** What `value` may have been at (at, tx), given the events that set it: see statusesAt(). */
function possibleAt<E extends { at: bigint; tx: bigint | null }, V>(
  events: readonly E[],
  at: bigint,
  tx: bigint | null,
  value: (e: E) => V,
  before: V,
): Set<V> {
  const out = new Set<V>();
  let last: E | null = null;
  const sameAs = (e: E, other: { at: bigint; tx: bigint | null }) =>
    (other.tx !== null && e.tx === other.tx) || e.at === other.at;
  for (const e of events) {
    if (sameAs(e, { at, tx })) out.add(value(e));
    else if (e.at < at && (last === null || e.at > last.at)) last = e;
  }
  if (last === null) out.add(before);
  else for (const e of events) if (sameAs(e, last as E)) out.add(value(e));
  return out;
}

const listed = (s: Set<unknown>) => [...s].map(String).sort().join(' ');

/** Whether a status refuses a debit, or a credit from outside. */
const refusesDebit = (s: WalletStatus) => s !== 'open';
const refusesCredit = (s: WalletStatus) => s === 'frozen' || s === 'closed' || s === 'absent';

type EntryFacts = Pick<CheckFacts, 'workload' | 'recordList' | 'walletLog'>;

/** Each entry of a watched wallet whose every possible status then refuses it. */
function entriesRefused(facts: EntryFacts, debits: boolean, fail: (e: Counterexample) => void): void {
  const h = new WalletHistories(facts);
  for (const e of facts.walletLog.entries) {
    if (debits ? e.amount >= 0n : e.amount <= 0n || e.own_hold || e.tx === null) continue;
    const possible = h.statusesAt(e.wallet_id, e.at, e.tx);
    if ([...possible].every(debits ? refusesDebit : refusesCredit)) {
      const before = h.changesOf(e.wallet_id).filter((c) => c.at < e.at);
      fail({
        wallet: e.wallet_id,
        entry: e.id.toString(),
        operationId: e.operation_id,
        amount: e.amount.toString(),
        statuses: listed(possible),
        lastChange: before.at(-1)?.operationId ?? null,
      });
    }
  }
}

export const NO_FROZEN_DEBIT_CHECK = 'no debit of a wallet while it was frozen or closed (decision clock)';

export const noFrozenDebitCheck: Invariant<EntryFacts> = {
  name: NO_FROZEN_DEBIT_CHECK,
  group: 'money',
  appliesTo: ({ workload }) => workload.walletOps.watched.size > 0,
  find: (facts, fail) => entriesRefused(facts, true, fail),
};

export const noFrozenCreditCheck: Invariant<EntryFacts> = {
  name: 'no credit to a wallet frozen for credits or closed, but its own holds given back (decision clock)',
  group: 'money',
  appliesTo: ({ workload }) => workload.walletOps.watched.size > 0,
  find: (facts, fail) => entriesRefused(facts, false, fail),
};

export const openedWalletsCheck: Invariant<Pick<CheckFacts, 'workload' | 'recordList' | 'walletLog' | 'wallets'>> = {
  name: 'every opened wallet exists once, in the currency asked, its status one its history allows',
  group: 'money',
  appliesTo: ({ workload }) => workload.walletOps.watched.size > 0,
  find: (facts, fail) => {
    const h = new WalletHistories(facts);
    for (const operationId of h.unstamped) fail({ operationId, problem: 'an applied status change with no event' });
    const opens = new Map<string, string[]>();
    for (const r of facts.recordList) {
      const wire = wireOf(facts.workload, r);
      if (r.status !== 'applied' || kindOf(facts.workload, r.operation_id) !== 'open_wallet' || wire === null) continue;
      opens.set(wire.wallet as string, [...(opens.get(wire.wallet as string) ?? []), wire.currency as string]);
    }
    const rows = new Map(facts.wallets.map((w) => [w.id, w]));
    for (const [wallet, currencies] of opens) {
      const row = rows.get(wallet);
      if (currencies.length > 1 || h.initial(wallet) !== 'absent') fail({ wallet, problem: 'opened more than once' });
      if (row === undefined || row.currency !== currencies[0])
        fail({ wallet, asked: currencies[0] ?? null, currency: row?.currency ?? 'no row' });
    }
    for (const w of facts.wallets) {
      if (h.initial(w.id) === 'absent' && !opens.has(w.id)) fail({ wallet: w.id, problem: 'a row no open made' });
      const possible = h.statusesAt(w.id, NEVER, null);
      if (!possible.has(w.status as WalletStatus)) fail({ wallet: w.id, status: w.status, history: listed(possible) });
      if (w.status === 'closed' && (w.balance !== 0n || w.held !== 0n))
        fail({ wallet: w.id, status: 'closed', balance: w.balance.toString(), held: w.held.toString() });
    }
  },
};

/** The wallets an operation's request debits and credits (a capture's or refund's through the operation it names). */
function postingsOf(facts: HistoryFacts, kind: string, wire: Wire): { debited: string[]; credited: string[] } {
  const firstWire = (id: string) => {
    const op = facts.workload.operations.get(id);
    return op === undefined ? null : ([...op.wires.values()][0] as unknown as Wire);
  };
  switch (kind) {
    case 'transfer':
      return { debited: [wire.from], credited: [wire.to as string] };
    case 'split':
      return { debited: [wire.from], credited: (wire.legs as { to: string }[]).map((l) => l.to) };
    case 'hold':
    case 'withdrawal':
      return { debited: [wire.from], credited: [] };
    case 'deposit':
      return { debited: [], credited: [wire.to as string] };
    case 'capture': {
      const hold = firstWire(wire.hold as string);
      return { debited: [], credited: hold === null ? [] : [hold.to as string] };
    }
    case 'refund': {
      const original = firstWire(wire.original as string);
      return { debited: [wire.from], credited: original === null ? [] : [walletOf(original as never)] };
    }
    default:
      return { debited: [], credited: [] };
  }
}

/** Why a refusal is not what its reason claims, given the histories; null when some order explains it. */
function refusalProblem(facts: HistoryFacts, h: WalletHistories, r: CheckFacts['recordList'][number]): string | null {
  const stamp = facts.walletLog.decided.get(r.operation_id);
  const wire = wireOf(facts.workload, r);
  if (stamp === undefined || wire === null) return stamp === undefined ? 'no event' : null;
  const kind = kindOf(facts.workload, r.operation_id);
  const statuses = (w: string) => h.statusesAt(w, stamp.at, stamp.tx);
  const { debited, credited } = postingsOf(facts, kind, wire);
  const named = STATUS_KINDS.has(kind) ? [wire.wallet as string] : [...debited, ...credited];
  const some = (wallets: string[], ok: (s: WalletStatus) => boolean) => wallets.some((w) => [...statuses(w)].some(ok));
  const balances = (w: string) => [...h.balancesAt(w, stamp.at, stamp.tx)];
  switch (r.reason) {
    case 'wallet_frozen':
      return some(debited, (s) => s === 'debits_frozen' || s === 'frozen') || some(credited, (s) => s === 'frozen')
        ? null
        : 'no wallet it posts to was frozen then';
    case 'wallet_closed':
      return some(named, (s) => s === 'closed') ? null : 'no wallet it names was closed then';
    case 'unknown_wallet':
      return some(named, (s) => s === 'absent') ? null : 'every wallet it names was open then';
    case 'wallet_exists':
      return some(named, (s) => s !== 'absent') ? null : 'the wallet was not there then';
    case 'wallet_not_empty':
      return balances(wire.wallet as string).some((b) => b !== 0n) ? null : 'the wallet was empty then';
    case 'insufficient_funds': {
      const from = debited[0] ?? '';
      const limit = facts.workload.walletOps.opened.get(from)?.creditLimitMinor ?? 0n;
      const asked = BigInt((wire.amount as string | undefined) ?? '0');
      return balances(from).some((b) => b + limit < asked) ? null : `${from} covered ${asked} then`;
    }
    default:
      return 'not a reason this workload may have';
  }
}

/** Why an applied status change should have been refused, given the history; null when some order explains it. */
function changeProblem(facts: HistoryFacts, h: WalletHistories, r: CheckFacts['recordList'][number]): string | null {
  const stamp = facts.walletLog.decided.get(r.operation_id);
  const wire = wireOf(facts.workload, r);
  const kind = kindOf(facts.workload, r.operation_id);
  if (stamp === undefined || wire === null) return null; // unstamped: openedWalletsCheck
  const wallet = wire.wallet as string;
  // The statuses before it: its own change left out, the rest of its transaction's kept.
  const before = h.statusesAt(wallet, stamp.at, stamp.tx, r.operation_id);
  if (kind === 'open_wallet') return before.has('absent') ? null : 'opened a wallet that was there';
  if (![...before].some((s) => s !== 'absent' && s !== 'closed')) return `changed a wallet ${listed(before)}`;
  if (kind === 'close_wallet' && !h.balancesAt(wallet, stamp.at, stamp.tx).has(0n)) return 'closed a wallet not empty';
  return null;
}

export const walletDecisionsCheck: Invariant<HistoryFacts> = {
  name: "every wallet operation's answer, and every wallet_frozen or wallet_closed, is what its history allows",
  group: 'money',
  appliesTo: ({ workload }) => workload.walletOps.watched.size > 0,
  find: (facts, fail) => {
    const h = new WalletHistories(facts);
    const ours = facts.workload.walletOps.operationIds;
    for (const r of facts.recordList) {
      const kind = kindOf(facts.workload, r.operation_id);
      let problem: string | null = null;
      if (
        r.status === 'rejected' &&
        (ours.has(r.operation_id) || r.reason === 'wallet_frozen' || r.reason === 'wallet_closed')
      )
        problem = refusalProblem(facts, h, r);
      else if (r.status === 'applied' && STATUS_KINDS.has(kind) && ours.has(r.operation_id))
        problem = changeProblem(facts, h, r);
      if (problem !== null) fail({ operationId: r.operation_id, kind, status: r.status, reason: r.reason, problem });
    }
  },
};

/** Whether a refusal is judged here rather than by the transfers' and payments' checks. */
export function judgedByWalletChecks(
  workload: CheckFacts['workload'],
  r: Pick<CheckFacts['recordList'][number], 'operation_id' | 'reason'>,
): boolean {
  return (
    workload.walletOps.operationIds.has(r.operation_id) || r.reason === 'wallet_frozen' || r.reason === 'wallet_closed'
  );
}

/** Every wallet check, in the report's order. */
export const WALLET_CHECKS: readonly Invariant<CheckFacts>[] = [
  noFrozenDebitCheck,
  noFrozenCreditCheck,
  openedWalletsCheck,
  walletDecisionsCheck,
];
