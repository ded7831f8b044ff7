// The negative controls' decisions, which no production database has. The production functions
// (prisma/sql/) have no parameter and no branch that skips a check; a control needs the same
// decision with one check off. Copies would go stale, so each variant is derived here, at install
// time, from the current production source file: renamed `<name>_unsafe`, given one BOOLEAN
// `p_check_<check>` per check it can skip, and each checked region of the production text guarded
// by its switch. Every edit names the production text it guards and must find it exactly once:
// when the decision changes under a guard, the derivation fails and says which edit, instead of
// running a control against a decision that is not today's. A check that lives in a function the
// decision calls is switched off in that function's variant, which the caller's variant calls
// instead, its switches first. The wrappers the worker calls by name (apply_transfers_unsafe(),
// apply_payments_unsafe()) are the .sql files beside this one.
//
// They are installed (as the owner, never granted to anyone) only into the database the chaos
// harness made for a run that uses such a control (chaos-services.ts), and into tests' own
// databases (TestDatabase.installUnsafeDecisions(), test/support/test-db.ts). A worker with
// TRANSFERS_UNSAFE pointed at any other database gets a LedgerContractError
// `unsafe_decision_missing` (callUnsafeDecision(), src/ledger/apply-transfer.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { UnsafeMode } from '../../../src/config/config.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';
import { SQL_SOURCES_DIR } from '../../schema/sql-sources.ts';

export const UNSAFE_DECISIONS_DIR = join(PROJECT_ROOT, 'harness', 'chaos', 'unsafe');

/**
 * The worker's unsafe modes that switch a check of the SQL decision off: the worker then calls
 * apply_transfers_unsafe() / apply_payments_unsafe() (src/ledger/apply-transfer.ts), so the
 * database must have them, and the worker logs in as the owner (the only one who may call them).
 */
export const UNSAFE_DECISION_MODES: readonly UnsafeMode[] = Object.freeze([
  'no-idempotency',
  'no-fencing',
  'no-lease-check',
  'double-capture',
  'refund-unbounded',
  'no-credit-limit',
  'no-wallet-status',
]);

/** Whether a worker with these TRANSFERS_UNSAFE modes calls the variants. */
export function needsUnsafeDecisions(modes: readonly string[]): boolean {
  return modes.some((mode) => (UNSAFE_DECISION_MODES as readonly string[]).includes(mode));
}

/** A check a variant can skip; its switch is the parameter `p_check_<check>`. */
export type Check =
  | 'idempotency'
  | 'fence'
  | 'lease'
  | 'hold_state'
  | 'refund_bound'
  | 'credit_limit'
  | 'wallet_status';

/** One edit of the production text: `find` must occur exactly once (a region: from `find` through the first `through` after it). */
interface Edit {
  readonly what: string;
  readonly find: string;
  readonly through?: string;
  readonly to: (found: string) => string;
}

interface Variant {
  /** The production function, and its file under prisma/sql/. */
  readonly fn: string;
  readonly checks: readonly Check[];
  /** Switches before the function's own parameters (a helper the batch variant calls); else after them. */
  readonly switchesFirst?: boolean;
  readonly edits: readonly Edit[];
}

const switchOf = (check: Check): string => `p_check_${check}`;

/** The region (whole lines) runs only when `check` is on; `otherwise` runs when it is off. */
function guard(check: Check, otherwise?: string): (found: string) => string {
  return (found) => {
    const indent = /^ */.exec(found)?.[0] ?? '';
    const body = (text: string) => text.replace(/\n$/, '').replace(/^/gm, '    ');
    const off =
      otherwise === undefined
        ? ''
        : `${indent}ELSE\n${body(otherwise.startsWith(' ') ? otherwise : indent + otherwise)}\n`;
    return `${indent}IF ${switchOf(check)} THEN\n${body(found)}\n${off}${indent}END IF;\n`;
  };
}

/** One replacement inside a found region, which must match exactly once. */
function within(found: string, what: string, pattern: RegExp, replacement: string): string {
  const global = new RegExp(pattern.source, `${pattern.flags.replace('g', '')}g`);
  const count = [...found.matchAll(global)].length;
  if (count !== 1) throw new Error(`unsafe decisions: ${what} found ${count} times, expected once`);
  return found.replace(pattern, replacement);
}

/** A call of `callee` inside a variant: the call goes to its variant, given `checks` first. */
function callOfVariant(callee: string, checks: readonly Check[]): Edit {
  return {
    what: `the call of ${callee}()`,
    find: `${callee}(`,
    to: () => `${callee}_unsafe(${checks.map(switchOf).join(', ')}, `,
  };
}

// Off, a record written meanwhile keeps the first outcome and the money moved again commits;
// only the records inserted have their event.
const RECORDS_INSERTED: Edit = {
  what: 'the records inserted',
  find: '    WITH recorded AS (\n',
  through: ';\n',
  to: (found) => {
    const inserted = within(
      found,
      'the records insert',
      /(inserted AS \(\s*INSERT INTO transfers[\s\S]*?FROM recorded d)(\s*\),)/,
      '$1\n        ON CONFLICT (operation_id) DO NOTHING RETURNING operation_id$2',
    );
    const unchecked = within(
      inserted,
      "the records' events",
      /FROM recorded d(\s+UNION ALL)/,
      'FROM recorded d WHERE EXISTS (SELECT 1 FROM inserted i WHERE i.operation_id = d.operation_id) ' +
        'AND d.element = (SELECT min(f.element) FROM recorded f WHERE f.operation_id = d.operation_id)$1',
    );
    return guard('idempotency', unchecked)(found);
  },
};

/**
 * Off, a debit may take its wallet down to minus CREDIT_LIMIT_MAX (10^17) whatever its own limit:
 * the spendable amount decision_moved() and decision_verdict() are given is the balance plus that.
 */
const UNLIMITED_CREDIT = '100000000000000000';

/**
 * The spendable amount passed to one call (`before` the argument, which must make it unique;
 * `after`, what follows it).
 */
function spendable(before: string, after = ','): Edit {
  return {
    what: `the credit limit in the spendable amount (${before.trim()})`,
    find: `${before}w_balance[v_fi] + w_limit[v_fi]${after}`,
    to: () =>
      `${before}w_balance[v_fi] + CASE WHEN ${switchOf('credit_limit')} THEN w_limit[v_fi] ELSE ${UNLIMITED_CREDIT} END${after}`,
  };
}

// The variants: the batch decision (decide_batch(), whose idempotency, fence and lease checks and
// the credit limit in the amount a debit may spend are its own lines, and whose hold-state, refund-bound and record checks are in the functions it
// calls, through decision_verdict() for the first two: each given its own variant), and the single
// decision.
const VARIANTS: readonly Variant[] = [
  {
    fn: 'decide_batch',
    checks: ['idempotency', 'fence', 'lease', 'hold_state', 'refund_bound', 'credit_limit', 'wallet_status'],
    edits: [
      {
        what: "the operations' advisory locks",
        find: '    v_j := decision_operations_locked(p_operation_ids);\n',
        to: guard('idempotency'),
      },
      {
        what: 'the records read',
        find: '    v := decision_records_found(p_operation_ids);\n',
        through: 'r_fence := v.r_fence;\n',
        to: guard('idempotency', "r_op := '{}'; r_hash := '{}'; r_status := '{}'; r_reason := '{}'; r_fence := '{}';"),
      },
      {
        what: 'the answer from a record',
        find: '        v_k := array_position(r_op, v_op);\n',
        through: '            RETURN NEXT; CONTINUE;\n        END IF;\n',
        to: guard('idempotency'),
      },
      {
        // Off, the lease compared is the caller's own: only a lower token is stale.
        what: 'the fence and lease comparison',
        find: 'IF decision_stale(w_fence[v_fi], w_lease[v_fi], v_fence, v_lease) THEN',
        to: () =>
          `IF ${switchOf('fence')} AND decision_stale(w_fence[v_fi], ` +
          `CASE WHEN ${switchOf('lease')} THEN w_lease[v_fi] ELSE v_lease END, v_fence, v_lease) THEN`,
      },
      {
        // Off, no posting is refused for its wallet's status (decision_status_refusal() not asked).
        what: "the wallets' statuses",
        find: 'IF NOT v_all_open AND v.reason IS NULL THEN',
        to: () => `IF ${switchOf('wallet_status')} AND NOT v_all_open AND v.reason IS NULL THEN`,
      },
      spendable('w_currency[v_ti], '),
      spendable('v_now, w_id, w_currency, '),
      callOfVariant('decision_verdict', ['hold_state', 'refund_bound']),
      callOfVariant('decision_recorded', ['idempotency']),
    ],
  },
  {
    fn: 'decision_verdict',
    checks: ['hold_state', 'refund_bound'],
    switchesFirst: true,
    edits: [callOfVariant('decision_hold_ended', ['hold_state']), callOfVariant('decision_refunded', ['refund_bound'])],
  },
  {
    fn: 'decision_hold_ended',
    checks: ['hold_state'],
    switchesFirst: true,
    edits: [
      "ELSIF p_hold.state = 'captured' THEN",
      "ELSIF p_hold.state = 'voided' THEN",
      "ELSIF p_hold.state = 'expired' OR p_hold.expires_at <= p_now THEN",
    ].map(
      (find): Edit => ({
        what: `the hold's state (${find})`,
        find,
        to: (found) => `ELSIF ${switchOf('hold_state')} AND (${found.slice('ELSIF '.length, -' THEN'.length)}) THEN`,
      }),
    ),
  },
  {
    fn: 'decision_refunded',
    checks: ['refund_bound'],
    switchesFirst: true,
    edits: [
      {
        // Off, a refund without an amount takes the original's whole amount again.
        what: "the refund's default amount",
        find: 'v_moved := coalesce(p_amount, v_left);',
        to: () =>
          `v_moved := coalesce(p_amount, CASE WHEN v_left > 0 OR ${switchOf('refund_bound')} THEN v_left ELSE v_limit END);`,
      },
      {
        what: "the refund's bound",
        find: 'IF v_moved > v_left OR v_moved <= 0 THEN',
        to: () => `IF ${switchOf('refund_bound')} AND (v_moved > v_left OR v_moved <= 0) THEN`,
      },
    ],
  },
  { fn: 'decision_recorded', checks: ['idempotency'], switchesFirst: true, edits: [RECORDS_INSERTED] },
  {
    fn: 'apply_transfer',
    checks: ['idempotency', 'fence', 'lease'],
    edits: [
      {
        what: "the operation's advisory lock and the answer from its record",
        find: "    PERFORM pg_advisory_xact_lock(hashtextextended('transfer:' || p_operation_id, 0));\n",
        through: '        RETURN;\n    END IF;\n',
        to: guard('idempotency'),
      },
      {
        what: 'the fence and lease comparison',
        find: 'IF decision_stale(v_from_fence, v_from_lease, p_fence, p_lease_id) THEN',
        to: () =>
          `IF ${switchOf('fence')} AND decision_stale(v_from_fence, ` +
          `CASE WHEN ${switchOf('lease')} THEN v_from_lease ELSE p_lease_id END, p_fence, p_lease_id) THEN`,
      },
      {
        what: 'the record inserted',
        find: '    INSERT INTO transfers (operation_id, request_hash, from_wallet',
        through: ';\n',
        to: (found) =>
          guard('idempotency', found.replace(/;\n$/, '\n    ON CONFLICT (operation_id) DO NOTHING;'))(found),
      },
    ],
  },
];

function applyEdit(sql: string, fn: string, edit: Edit): string {
  const count = sql.split(edit.find).length - 1;
  if (count !== 1) {
    throw new Error(
      `unsafe decisions: ${edit.what} of prisma/sql/${fn}.sql found ${count} times, expected once; ` +
        'the decision changed there: update harness/chaos/unsafe/unsafe-decisions.ts to guard its new text',
    );
  }
  const start = sql.indexOf(edit.find);
  let end = start + edit.find.length;
  if (edit.through !== undefined) {
    const at = sql.indexOf(edit.through, end);
    if (at < 0) throw new Error(`unsafe decisions: ${edit.what} of prisma/sql/${fn}.sql has no end`);
    end = at + edit.through.length;
  }
  return sql.slice(0, start) + edit.to(sql.slice(start, end)) + sql.slice(end);
}

/** The CREATE FUNCTION statement of `fn` in its source file, through its closing `$$;`. */
function definitionOf(sourcesDir: string, fn: string): string {
  const text = readFileSync(join(sourcesDir, `${fn}.sql`), 'utf8');
  const head = `CREATE OR REPLACE FUNCTION "${fn}"(`;
  const start = text.indexOf(head);
  const end = text.indexOf('\n$$;\n', start);
  if (start < 0 || end < 0 || text.indexOf(head, start + 1) >= 0) {
    throw new Error(`unsafe decisions: prisma/sql/${fn}.sql must define ${fn}() once`);
  }
  return text.slice(start, end + '\n$$;\n'.length);
}

/** One variant's SQL: the production definition renamed, with switches, its checked regions guarded. */
export function variantSql(variant: Variant, sourcesDir = SQL_SOURCES_DIR): string {
  let sql = definitionOf(sourcesDir, variant.fn);
  const head = `FUNCTION "${variant.fn}_unsafe"(`;
  sql = sql.replace(`FUNCTION "${variant.fn}"(`, head);
  const switches = variant.checks.map((c) => `    ${switchOf(c)} BOOLEAN`).join(',\n');
  sql = applyEdit(
    sql,
    variant.fn,
    variant.switchesFirst === true
      ? { what: 'the parameter list', find: `${head}\n`, to: (found) => `${found}${switches},\n` }
      : { what: 'the parameter list', find: '\n) RETURNS TABLE (', to: (found) => `,\n${switches}${found}` },
  );
  for (const edit of variant.edits) sql = applyEdit(sql, variant.fn, edit);
  return (
    `-- Derived from prisma/sql/${variant.fn}.sql by harness/chaos/unsafe/unsafe-decisions.ts.\n${sql}\n` +
    `REVOKE EXECUTE ON FUNCTION ${variant.fn}_unsafe FROM PUBLIC;\n`
  );
}

/** The names of the functions the install defines. */
export const UNSAFE_FUNCTIONS: readonly string[] = Object.freeze([
  ...VARIANTS.map((v) => `${v.fn}_unsafe`),
  'apply_transfers_unsafe',
  'apply_payments_unsafe',
]);

/** The whole install: every derived variant, then the wrappers the worker calls by name. */
export function unsafeDecisionsSql(sourcesDir = SQL_SOURCES_DIR): string {
  const wrappers = ['apply_transfers_unsafe.sql', 'apply_payments_unsafe.sql'].map((file) =>
    readFileSync(join(UNSAFE_DECISIONS_DIR, file), 'utf8'),
  );
  return [...VARIANTS.map((v) => variantSql(v, sourcesDir)), ...wrappers].join('\n');
}

/**
 * The table's own last line of defence, dropped for `no-credit-limit` (withoutLimitCheck): else a
 * debit past its limit aborts its whole batch on the CHECK instead of committing to be caught.
 */
export const DROP_LIMIT_CHECK_SQL = 'ALTER TABLE wallets DROP CONSTRAINT wallets_balance_within_limit;\n';

/** A closed wallet's CHECK (balance = 0 AND held = 0), dropped for `no-wallet-status`: else a credit to it aborts its batch. */
export const DROP_CLOSED_CHECK_SQL = 'ALTER TABLE wallets DROP CONSTRAINT wallets_closed_empty;\n';

export interface InstallOptions {
  /** Drop CHECK (balance >= -credit_limit) too, in the same transaction: the `no-credit-limit` control. */
  readonly withoutLimitCheck?: boolean;
  /** Drop the closed wallets' CHECK too, in the same transaction: the `no-wallet-status` control. */
  readonly withoutClosedCheck?: boolean;
}

/** Whether a worker with these TRANSFERS_UNSAFE modes needs the wallets' limit CHECK dropped. */
export function needsLimitCheckDropped(modes: readonly string[]): boolean {
  return modes.includes('no-credit-limit');
}

/** Whether a worker with these TRANSFERS_UNSAFE modes needs the closed wallets' CHECK dropped. */
export function needsClosedCheckDropped(modes: readonly string[]): boolean {
  return modes.includes('no-wallet-status');
}

/** Installs the variants into the connected database, in one transaction; the client must be the owner. */
export async function installUnsafeDecisions(client: pg.ClientBase, options: InstallOptions = {}): Promise<void> {
  const sql =
    unsafeDecisionsSql() +
    (options.withoutLimitCheck === true ? DROP_LIMIT_CHECK_SQL : '') +
    (options.withoutClosedCheck === true ? DROP_CLOSED_CHECK_SQL : '');
  await client.query('BEGIN');
  try {
    await client.query(sql);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** installUnsafeDecisions() over a connection of its own. */
export async function installUnsafeDecisionsAt(databaseUrl: string, options: InstallOptions = {}): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'unsafe-decisions' });
  await client.connect();
  try {
    await installUnsafeDecisions(client, options);
  } finally {
    await client.end();
  }
}
