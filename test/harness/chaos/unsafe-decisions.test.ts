// The negative controls' decisions are derived from today's production files (harness/chaos/
// unsafe/unsafe-decisions.ts), never copied: every switch of a variant guards something, and a
// production change under a guard stops the derivation with the edit's name instead of letting a
// control test a decision that is not today's. Whether each variant, installed, breaks what its
// switch says is shown by the tests of the controls (test/ledger/record-insert.test.ts,
// payment-races.test.ts, apply-transfers.test.ts) and the chaos runs.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { unsafeDecisionsSql } from '../../../harness/chaos/unsafe/unsafe-decisions.ts';
import { SQL_SOURCES_DIR } from '../../../harness/schema/sql-sources.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A copy of prisma/sql with `find` replaced by `replace` in `file`. */
function sourcesWith(file: string, find: string, replace: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ft-unsafe-sources-'));
  dirs.push(dir);
  cpSync(SQL_SOURCES_DIR, dir, { recursive: true });
  const text = readFileSync(join(dir, file), 'utf8');
  expect(text).toContain(find);
  writeFileSync(join(dir, file), text.replace(find, replace));
  return dir;
}

/** The body ($$ … $$) of `fn` in the derived SQL. */
function bodyOf(sql: string, fn: string): string {
  const start = sql.indexOf(`CREATE OR REPLACE FUNCTION "${fn}"(`);
  const body = sql.indexOf('AS $$', start);
  return sql.slice(body, sql.indexOf('\n$$;\n', body));
}

describe('the negative controls’ decisions', () => {
  const sql = unsafeDecisionsSql();

  it('each read every switch they take', () => {
    const switches: Record<string, string[]> = {
      decide_batch_unsafe: ['idempotency', 'fence', 'lease', 'hold_state', 'refund_bound'],
      decision_verdict_unsafe: ['hold_state', 'refund_bound'],
      decision_hold_ended_unsafe: ['hold_state'],
      decision_refunded_unsafe: ['refund_bound'],
      decision_recorded_unsafe: ['idempotency'],
      apply_transfer_unsafe: ['idempotency', 'fence', 'lease'],
    };
    for (const [fn, checks] of Object.entries(switches)) {
      const body = bodyOf(sql, fn);
      for (const check of checks)
        expect(body, `${fn} reads p_check_${check}`).toMatch(new RegExp(`\\bp_check_${check}\\b`));
    }
  });

  it('keep every production statement: the production files have no switch of their own', () => {
    for (const file of [
      'decide_batch.sql',
      'decision_hold_ended.sql',
      'decision_refunded.sql',
      'decision_recorded.sql',
      'decision_stale.sql',
      'apply_transfer.sql',
    ]) {
      expect(readFileSync(join(SQL_SOURCES_DIR, file), 'utf8')).not.toMatch(/p_check_|p_skip_/);
    }
  });

  it('stop, naming the edit, when a guarded production text changes', () => {
    const changed = sourcesWith(
      'decision_refunded.sql',
      'IF v_moved > v_left OR v_moved <= 0 THEN',
      'IF v_moved > v_left THEN',
    );
    expect(() => unsafeDecisionsSql(changed)).toThrow(
      /the refund's bound of prisma\/sql\/decision_refunded\.sql found 0 times, expected once/,
    );
    const lease = sourcesWith(
      'apply_transfer.sql',
      'IF decision_stale(v_from_fence, v_from_lease, p_fence, p_lease_id) THEN',
      'IF decision_stale(v_from_fence, NULL, p_fence, p_lease_id) THEN',
    );
    expect(() => unsafeDecisionsSql(lease)).toThrow(
      /the fence and lease comparison of prisma\/sql\/apply_transfer\.sql/,
    );
  });
});
