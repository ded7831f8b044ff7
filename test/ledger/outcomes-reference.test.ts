// Each kind's order of checks, as docs/reference/outcomes.md gives it (CHECK_ORDER in the
// vocabulary), is the order of the reasons its SQL decision assigns (issue 41, item 4.8): read off
// the current definitions in prisma/sql/ (each kind's function, and the checks of a movement of
// money it asks decision_refusal() for), each reason at its first appearance. So a kind that can give a reason the table omits, or a function that checks in
// another order, fails here, and the reference says which check answers first.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { OPERATION_KINDS } from '../../src/ledger/transfer-request.ts';
import { CHECK_ORDER, REJECTION_REASONS } from '../../src/ledger/vocabulary.ts';

const sql = (file: string) => readFileSync(join(PROJECT_ROOT, 'prisma/sql', file), 'utf8');

/** The text between two markers, each found once. */
function between(text: string, start: string, end: string): string {
  const from = text.indexOf(start);
  const to = text.indexOf(end, from + start.length);
  if (from < 0 || to < 0 || text.indexOf(start, from + 1) >= 0) throw new Error(`markers not found once: ${start}`);
  return text.slice(from, to);
}

const isReason = (word: string) => (REJECTION_REASONS as readonly string[]).includes(word);

/** The index just past the parenthesis that closes the one opened at `open`. */
function closing(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '(') depth++;
    if (text[i] === ')' && --depth === 0) return i + 1;
  }
  throw new Error('unbalanced parentheses');
}

/**
 * The reasons `text` gives, in text order, each at its first appearance: a reason literal, or a
 * call of decision_refusal(), which gives the refusal's own reasons with the kind's refusal (a
 * reason literal among the call's arguments) in its place. `skip` drops a literal by its line or
 * the line before (a check one kind of the function makes and the other does not).
 */
function reasonsIn(text: string, skip?: RegExp): string[] {
  const out: string[] = [];
  const add = (reason: string) => {
    if (!out.includes(reason)) out.push(reason);
  };
  const refusal = sql('decision_refusal.sql');
  const body = refusal.slice(refusal.indexOf('AS $$'));
  const kindAt = body.indexOf('p_kind_refusal IS NOT NULL');
  const literals = (from: string) => [...from.matchAll(/'(\w+)'/g)].map((m) => m[1] ?? '').filter(isReason);
  const found = /decision_refusal\(|'(\w+)'/g;
  for (let m = found.exec(text); m !== null; m = found.exec(text)) {
    if (m[1] === undefined) {
      const end = closing(text, m.index + m[0].length - 1);
      for (const reason of literals(body.slice(0, kindAt))) add(reason);
      for (const reason of literals(text.slice(found.lastIndex, end))) add(reason);
      for (const reason of literals(body.slice(kindAt))) add(reason);
      found.lastIndex = end;
    } else if (isReason(m[1])) {
      const lineStart = text.lastIndexOf('\n', m.index);
      const context = text.slice(text.lastIndexOf('\n', lineStart - 1) + 1, text.indexOf('\n', m.index));
      if (skip?.test(context) !== true) add(m[1]);
    }
  }
  return out;
}

const declared = (kind: keyof typeof CHECK_ORDER) => CHECK_ORDER[kind].map((step) => step.reason);

describe("each kind's order of checks", () => {
  const moved = sql('decision_moved.sql');
  const transfer = between(moved, "IF p_kind = 'transfer' THEN", 'RETURN;');
  const hold = moved.slice(moved.indexOf('RETURN;'));
  // What the statuses refuse, last, once a kind's own checks passed (decide_batch() asks after the
  // verdict; apply_transfer() after decision_refusal()).
  const status = reasonsIn(sql('decision_status_refusal.sql'));
  const batch = sql('decide_batch.sql');
  const changed = sql('decision_wallet_changed.sql');
  const opening = between(changed, "IF p_kind = 'open_wallet' THEN", 'RETURN;');

  it('a status is judged after the verdict, on its postings', () => {
    expect(status).toEqual(['wallet_closed', 'wallet_frozen']);
    expect(batch.indexOf('decision_status_refusal(')).toBeGreaterThan(batch.indexOf('decision_verdict('));
    expect(batch.indexOf('decision_status_refusal(')).toBeLessThan(
      batch.indexOf('FOR v_j IN 1 .. coalesce(cardinality(v.wallets)'),
    );
  });

  it('a transfer checks as decide_batch() (decision_moved()) and apply_transfer() do', () => {
    expect([...reasonsIn(transfer), ...status]).toEqual(declared('transfer'));
    const single = sql('apply_transfer.sql');
    expect([...reasonsIn(single), ...status]).toEqual(declared('transfer'));
    expect(single.indexOf('decision_status_refusal(')).toBeGreaterThan(single.indexOf('decision_refusal('));
  });

  it("each payment checks as its kind's function does", () => {
    expect([...reasonsIn(hold), ...status]).toEqual(declared('hold'));
    expect([...reasonsIn(sql('decision_hold_ended.sql')), ...status]).toEqual(declared('capture'));
    // A void only gives a hold's money back to its source: no status refuses it.
    expect(reasonsIn(sql('decision_hold_ended.sql'), /p_kind = 'capture'/)).toEqual(declared('void'));
    expect([...reasonsIn(sql('decision_refunded.sql')), ...status]).toEqual(declared('refund'));
    expect([...reasonsIn(sql('decision_split.sql')), ...status]).toEqual(declared('split'));
    expect([...reasonsIn(sql('decision_settled.sql')), ...status]).toEqual(declared('withdrawal'));
    expect([...reasonsIn(sql('decision_settled.sql'), /p_kind = 'withdrawal'/), ...status]).toEqual(
      declared('deposit'),
    );
  });

  it('each wallet operation checks as decision_wallet_changed() does', () => {
    expect(reasonsIn(opening)).toEqual(declared('open_wallet'));
    const common = reasonsIn(between(changed, 'IF p_currency_now IS NULL THEN', "ELSIF p_kind = 'credit_limit'"));
    expect(common).toEqual(declared('freeze_wallet'));
    expect(common).toEqual(declared('unfreeze_wallet'));
    expect([...common, ...reasonsIn(changed.slice(changed.indexOf("IF p_kind = 'close_wallet' AND")))]).toEqual(
      declared('close_wallet'),
    );
    const limit = reasonsIn(sql('decision_limit_changed.sql')).filter((r) => !common.includes(r));
    expect([...common, ...limit]).toEqual(declared('credit_limit'));
  });

  it('counts a reason given through decision_refusal() where the call puts it', () => {
    expect([
      ...reasonsIn("x := decision_refusal(a, b, CASE WHEN c THEN 'expiry_out_of_range' END);"),
      ...status,
    ]).toEqual(declared('hold'));
  });

  it('covers every kind, and every rejection reason is some kind’s', () => {
    expect(Object.keys(CHECK_ORDER).sort()).toEqual([...OPERATION_KINDS].sort());
    const given = new Set(Object.values(CHECK_ORDER).flatMap((steps) => steps.map((step) => step.reason)));
    // invalid_request is no decision's check: it ends a stored request no worker can decide.
    expect([...REJECTION_REASONS].filter((reason) => !given.has(reason))).toEqual(['invalid_request']);
    expect(sql('request_decide_invalid.sql')).toContain("'invalid_request'");
  });
});
