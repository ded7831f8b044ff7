// Each kind's order of checks, as docs/reference/outcomes.md gives it (CHECK_ORDER in the
// vocabulary), is the order of the reasons its SQL decision assigns (issue 41, item 4.8): read off
// the current definitions in prisma/sql/, one branch per kind, each reason at its first
// assignment. So a kind that can give a reason the table omits, or a function that checks in
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

/** The reasons assigned in `text`, each at its first assignment; `skip` drops one by its guard. */
function reasonsIn(text: string, skip?: RegExp): string[] {
  const lines = text.split('\n');
  const out: string[] = [];
  lines.forEach((line, i) => {
    const reason = /v_reason := '(\w+)'/.exec(line)?.[1];
    if (reason === undefined || out.includes(reason)) return;
    if (skip?.test(`${lines[i - 1] ?? ''}\n${line}`)) return;
    out.push(reason);
  });
  return out;
}

const declared = (kind: keyof typeof CHECK_ORDER) => CHECK_ORDER[kind].map((step) => step.reason);

describe("each kind's order of checks", () => {
  const payments = sql('payments_decide_batch.sql');
  const branches = {
    hold: between(payments, "IF v_kind = 'hold' THEN", "ELSIF v_kind IN ('capture', 'void') THEN"),
    capture: between(payments, "ELSIF v_kind IN ('capture', 'void') THEN", "ELSIF v_kind = 'refund' THEN"),
    refund: between(payments, "ELSIF v_kind = 'refund' THEN", 'ELSE -- split'),
    split: between(payments, 'ELSE -- split', "v_detail := jsonb_build_object('legs'"),
  };

  it('a transfer checks as transfers_decide_batch() and apply_transfer() do', () => {
    expect(reasonsIn(sql('transfers_decide_batch.sql'))).toEqual(declared('transfer'));
    expect(reasonsIn(sql('apply_transfer.sql'))).toEqual(declared('transfer'));
  });

  it('each payment checks as its branch of payments_decide_batch() does', () => {
    expect(reasonsIn(branches.hold)).toEqual(declared('hold'));
    expect(reasonsIn(branches.capture)).toEqual(declared('capture'));
    expect(reasonsIn(branches.capture, /v_kind = 'capture'/)).toEqual(declared('void'));
    expect(reasonsIn(branches.refund)).toEqual(declared('refund'));
    expect(reasonsIn(branches.split)).toEqual(declared('split'));
  });

  it('covers every kind, and every rejection reason is some kind’s', () => {
    expect(Object.keys(CHECK_ORDER).sort()).toEqual([...OPERATION_KINDS].sort());
    const given = new Set(Object.values(CHECK_ORDER).flatMap((steps) => steps.map((step) => step.reason)));
    // invalid_request is no decision's check: it ends a stored request no worker can decide.
    expect([...REJECTION_REASONS].filter((reason) => !given.has(reason))).toEqual(['invalid_request']);
    expect(sql('request_decide_invalid.sql')).toContain("'invalid_request'");
  });
});
