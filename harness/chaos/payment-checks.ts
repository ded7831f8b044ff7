// The payments' checks: their invariants, read from the tables in SQL, and the checker's own
// model of the rules. The model starts from the opening balances and replays the decided records
// (every kind) in commit order (the first ledger entry of each operation, and of each expiry
// release: used for the order only, never for amounts), taking every amount from the request the
// harness sent under the record's hash and from its own state (what a hold holds, what is left of
// an original), never from the database's. It judges each applied record by the rules given its
// state then, each refusal by what its reason claims (where that is decidable after the fact), and
// ends with the balance and the held amount of every wallet and the end of every hold, which
// must be the database's.
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { OperationKind, OperationWire } from '../../src/ledger/transfer-request.ts';
import type { ChaosWorkload } from './chaos-workload.ts';
import { Check, type CheckResult } from './checker.ts';

export interface RecordRow {
  operation_id: string;
  request_hash: string;
  kind: string;
  original_id: string | null;
  from_wallet: string;
  to_wallet: string | null;
  amount: bigint | null;
  status: string;
  reason: string | null;
}

interface HoldRow {
  hold_id: string;
  from_wallet: string;
  to_wallet: string;
  amount: bigint;
  state: string;
  captured: bigint;
  released: bigint;
  ended_by: string | null;
}

/** Counts for the report: per kind, per outcome (applied, or the reason of a refusal; undecided). */
export interface PaymentFigures {
  readonly byKind: Record<string, Record<string, number>>;
  readonly holdsExpired: number;
  readonly holdsActive: number;
  readonly anchorsActive: number;
}

const HELD = '$held:';
const EXPIRY = '$expiry:';

type Wire = Record<string, unknown> & { operationId: string; from: string };

interface ModelHold {
  readonly id: string;
  readonly from: string;
  readonly to: string;
  readonly amount: bigint;
  state: 'active' | 'captured' | 'voided' | 'expired';
  captured: bigint;
  released: bigint;
  endedBy: string | null;
}

/** The SQL invariants of the payments, with counterexamples. */
async function sqlChecks(prisma: PrismaClient): Promise<CheckResult[]> {
  const out: CheckResult[] = [];
  const run = async (name: string, group: Check['group'], rows: Promise<Record<string, unknown>[]>) => {
    const c = new Check(name, group);
    for (const r of await rows)
      c.fail(
        Object.fromEntries(
          Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? v.toString() : (v as string | null)]),
        ),
      );
    out.push(c.result());
  };
  await run(
    'available balance >= 0 and held >= 0 on every wallet',
    'money',
    prisma.$queryRaw`SELECT id AS wallet, balance, held FROM wallets WHERE balance < 0 OR held < 0 ORDER BY id`,
  );
  await run(
    'every hold ended at most once, with captured + released = amount',
    'exactly-once',
    prisma.$queryRaw`
      WITH endings AS (
        SELECT original_id AS hold_id, count(*) AS n FROM transfers
         WHERE kind IN ('capture', 'void') AND status = 'applied' GROUP BY original_id
        UNION ALL
        SELECT substr(operation_id, 9), count(*) FROM ledger_entries
         WHERE operation_id LIKE '$expiry:%' AND kind = 'debit' GROUP BY operation_id
      ), per_hold AS (SELECT hold_id, sum(n) AS endings FROM endings GROUP BY hold_id)
      SELECT h.hold_id, h.state, h.amount, h.captured, h.released, coalesce(p.endings, 0) AS endings
        FROM holds h LEFT JOIN per_hold p ON p.hold_id = h.hold_id
       WHERE coalesce(p.endings, 0) > 1
          OR (h.state <> 'active' AND (h.captured + h.released <> h.amount OR coalesce(p.endings, 0) <> 1))
          OR (h.state = 'active' AND coalesce(p.endings, 0) <> 0)
       ORDER BY h.hold_id`,
  );
  await run(
    "each wallet's held equals the sum of its active holds",
    'money',
    prisma.$queryRaw`
      SELECT w.id AS wallet, w.held, coalesce(a.held, 0)::bigint AS active_holds
        FROM wallets w
        LEFT JOIN (SELECT from_wallet, sum(amount) AS held FROM holds WHERE state = 'active' GROUP BY from_wallet) a
          ON a.from_wallet = w.id
       WHERE w.held <> coalesce(a.held, 0)
       ORDER BY w.id`,
  );
  await run(
    'every hold past its expiry was released by the sweep (none still active)',
    'money',
    prisma.$queryRaw`
      SELECT hold_id, from_wallet, amount, expires_at::text AS expires_at FROM holds
       WHERE state = 'active' AND expires_at <= clock_timestamp() ORDER BY hold_id`,
  );
  await run(
    'no refund total above its original',
    'money',
    prisma.$queryRaw`
      WITH refunded AS (
        SELECT original_id, from_wallet, sum(amount)::bigint AS total FROM transfers
         WHERE kind = 'refund' AND status = 'applied' GROUP BY original_id, from_wallet
      )
      SELECT r.original_id, r.from_wallet AS payer, r.total, o.kind,
             CASE o.kind WHEN 'transfer' THEN CASE WHEN o.to_wallet = r.from_wallet THEN o.amount ELSE 0 END
                         WHEN 'hold' THEN (SELECT CASE WHEN h.to_wallet = r.from_wallet THEN h.captured ELSE 0 END
                                             FROM holds h WHERE h.hold_id = r.original_id)
                         WHEN 'split' THEN (SELECT coalesce(sum(s.amount), 0) FROM split_legs s
                                             WHERE s.operation_id = r.original_id AND s.to_wallet = r.from_wallet)
                         ELSE 0 END AS refundable
        FROM refunded r LEFT JOIN transfers o ON o.operation_id = r.original_id
       WHERE o.operation_id IS NULL OR o.status <> 'applied' OR r.total > coalesce(
             CASE o.kind WHEN 'transfer' THEN CASE WHEN o.to_wallet = r.from_wallet THEN o.amount ELSE 0 END
                         WHEN 'hold' THEN (SELECT CASE WHEN h.to_wallet = r.from_wallet THEN h.captured ELSE 0 END
                                             FROM holds h WHERE h.hold_id = r.original_id)
                         WHEN 'split' THEN (SELECT coalesce(sum(s.amount), 0) FROM split_legs s
                                             WHERE s.operation_id = r.original_id AND s.to_wallet = r.from_wallet)
                         ELSE 0 END, 0)
       ORDER BY r.original_id`,
  );
  await run(
    "every split's legs sum to its debit",
    'money',
    prisma.$queryRaw`
      SELECT t.operation_id, t.amount,
             (SELECT coalesce(sum(s.amount), 0) FROM split_legs s WHERE s.operation_id = t.operation_id)::bigint AS legs,
             (SELECT coalesce(-sum(e.amount), 0) FROM ledger_entries e
               WHERE e.operation_id = t.operation_id AND e.kind = 'debit')::bigint AS debit
        FROM transfers t
       WHERE t.kind = 'split' AND t.status = 'applied'
         AND ((SELECT coalesce(sum(s.amount), 0) FROM split_legs s WHERE s.operation_id = t.operation_id) <> t.amount
              OR (SELECT coalesce(-sum(e.amount), 0) FROM ledger_entries e
                   WHERE e.operation_id = t.operation_id AND e.kind = 'debit') <> t.amount)
       ORDER BY t.operation_id`,
  );
  await run(
    'no applied capture of a voided or expired hold, no applied void of a captured one',
    'exactly-once',
    prisma.$queryRaw`
      SELECT t.operation_id, t.kind, t.original_id AS hold, h.state, h.ended_by,
             EXISTS (SELECT 1 FROM ledger_entries e WHERE e.operation_id = '$expiry:' || t.original_id) AS expiry_released
        FROM transfers t JOIN holds h ON h.hold_id = t.original_id
       WHERE t.kind IN ('capture', 'void') AND t.status = 'applied'
         AND (h.state <> CASE t.kind WHEN 'capture' THEN 'captured' ELSE 'voided' END
              OR h.ended_by IS DISTINCT FROM t.operation_id
              OR EXISTS (SELECT 1 FROM ledger_entries e WHERE e.operation_id = '$expiry:' || t.original_id))
       ORDER BY t.operation_id`,
  );
  return out;
}

/** A reason a refusal of this kind may give, judged against the end state; null when it is consistent. */
type Judge = (wire: Wire, reason: string) => string | null;

export async function paymentChecks(
  prisma: PrismaClient,
  workload: ChaosWorkload,
  records: readonly RecordRow[],
): Promise<{ checks: CheckResult[]; expected: Map<string, bigint>; figures: PaymentFigures }> {
  const checks = await sqlChecks(prisma);
  const holdRows = await prisma.$queryRaw<HoldRow[]>`
    SELECT hold_id, from_wallet, to_wallet, amount, state, captured, released, ended_by FROM holds`;
  const order = await prisma.$queryRaw<{ operation_id: string; first: bigint }[]>`
    SELECT operation_id, min(id) AS first FROM ledger_entries WHERE kind IN ('debit', 'credit') GROUP BY operation_id`;
  const position = new Map(order.map((o) => [o.operation_id, o.first]));
  const dbHolds = new Map(holdRows.map((h) => [h.hold_id, h]));

  const wireOf = (r: RecordRow): Wire | null => {
    const op = workload.operations.get(r.operation_id);
    const wire = op?.wires.get(r.request_hash) as OperationWire | undefined;
    return (wire as Wire | undefined) ?? null;
  };
  const kindOf = (r: RecordRow): OperationKind => workload.operations.get(r.operation_id)?.kind ?? 'transfer';
  const recordOf = new Map(records.map((r) => [r.operation_id, r]));

  // The model's state.
  const balance = new Map<string, bigint>(workload.wallets.map((w) => [w, workload.openingBalanceMinor]));
  const add = (w: string, d: bigint) => balance.set(w, (balance.get(w) ?? 0n) + d);
  const holds = new Map<string, ModelHold>();
  const applied = new Map<string, { kind: OperationKind; wire: Wire; amount: bigint }>();
  const refunded = new Map<string, bigint>();
  const rules = new Check(
    "every decided record follows the payment rules (the checker's model, commit order)",
    'money',
  );
  const twice = new Check(
    'no hold ended twice, and none was captured or voided after it ended (model)',
    'exactly-once',
  );
  const overRefund = new Check('no refund moved more than what was left of its original (model)', 'money');

  type Event = { at: bigint; record: RecordRow | null; expiredHold: string | null };
  const events: Event[] = [];
  const END = BigInt(Number.MAX_SAFE_INTEGER);
  for (const r of records) {
    if (r.status !== 'applied' || !workload.operations.has(r.operation_id)) continue;
    events.push({ at: position.get(r.operation_id) ?? END, record: r, expiredHold: null });
  }
  for (const h of holdRows) {
    if (h.state === 'expired' || position.has(EXPIRY + h.hold_id))
      events.push({ at: position.get(EXPIRY + h.hold_id) ?? END, record: null, expiredHold: h.hold_id });
  }
  events.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));

  const limitOf = (original: string, payer: string): bigint | string => {
    const o = applied.get(original);
    if (o === undefined) return 'original not applied before it';
    if (o.kind === 'transfer') return o.wire.to === payer ? o.amount : 'payer is not the transfer destination';
    if (o.kind === 'hold') {
      const h = holds.get(original);
      if (h === undefined || h.state !== 'captured') return 'hold not captured before it';
      return h.to === payer ? h.captured : 'payer is not the hold payee';
    }
    if (o.kind === 'split') {
      const leg = (o.wire.legs as { to: string; amount: string }[]).find((l) => l.to === payer);
      return leg === undefined ? 'payer is no leg of the split' : BigInt(leg.amount);
    }
    return `original is a ${o.kind}`;
  };

  for (const e of events) {
    if (e.expiredHold !== null) {
      const h = holds.get(e.expiredHold);
      if (h === undefined) {
        rules.fail({ hold: e.expiredHold, problem: 'expiry of a hold the model never saw applied' });
      } else if (h.state !== 'active') {
        twice.fail({ hold: h.id, problem: `expired after it was ${h.state}`, endedBy: h.endedBy });
      } else {
        add(HELD + h.from, -h.amount);
        add(h.from, h.amount);
        h.state = 'expired';
        h.released = h.amount;
      }
      continue;
    }
    const r = e.record as RecordRow;
    const wire = wireOf(r);
    const kind = kindOf(r);
    if (wire === null) continue; // judged by "every stored outcome is one of the requests sent"
    const id = r.operation_id;
    const refuse = (problem: string) => rules.fail({ operationId: id, kind, problem });
    if (kind === 'transfer' || kind === 'split') {
      const legs =
        kind === 'transfer'
          ? [{ to: wire.to as string, amount: wire.amount as string }]
          : (wire.legs as { to: string; amount: string }[]);
      const total = legs.reduce((t, l) => t + BigInt(l.amount), 0n);
      if ((balance.get(wire.from) ?? 0n) < total) {
        refuse(`applied with ${balance.get(wire.from)} available of ${total}`);
        continue;
      }
      add(wire.from, -total);
      for (const l of legs) add(l.to, BigInt(l.amount));
      applied.set(id, { kind, wire, amount: total });
    } else if (kind === 'hold') {
      const amount = BigInt(wire.amount as string);
      if ((balance.get(wire.from) ?? 0n) < amount) {
        refuse(`hold applied with ${balance.get(wire.from)} available of ${amount}`);
        continue;
      }
      add(wire.from, -amount);
      add(HELD + wire.from, amount);
      holds.set(id, {
        id,
        from: wire.from,
        to: wire.to as string,
        amount,
        state: 'active',
        captured: 0n,
        released: 0n,
        endedBy: null,
      });
      applied.set(id, { kind, wire, amount });
    } else if (kind === 'capture' || kind === 'void') {
      const h = holds.get(wire.hold as string);
      if (h === undefined) {
        refuse('applied before its hold was');
        continue;
      }
      if (h.state !== 'active') {
        twice.fail({
          operationId: id,
          kind,
          hold: h.id,
          problem: `applied to a hold already ${h.state}`,
          endedBy: h.endedBy,
        });
        continue;
      }
      if (h.from !== wire.from) {
        refuse('applied from another wallet than the hold source');
        continue;
      }
      const captured = kind === 'capture' ? (wire.amount === undefined ? h.amount : BigInt(wire.amount as string)) : 0n;
      if (captured > h.amount) {
        refuse(`captured ${captured} of a hold of ${h.amount}`);
        continue;
      }
      add(HELD + h.from, -h.amount);
      add(h.to, captured);
      add(h.from, h.amount - captured);
      h.state = kind === 'capture' ? 'captured' : 'voided';
      h.captured = captured;
      h.released = h.amount - captured;
      h.endedBy = id;
      applied.set(id, { kind, wire, amount: captured });
    } else if (kind === 'refund') {
      const original = wire.original as string;
      const limit = limitOf(original, wire.from);
      if (typeof limit === 'string') {
        refuse(`refund applied: ${limit}`);
        continue;
      }
      const key = `${original}\n${wire.from}`;
      const left = limit - (refunded.get(key) ?? 0n);
      const amount = wire.amount === undefined ? left : BigInt(wire.amount as string);
      if (amount > left || amount <= 0n) {
        overRefund.fail({ operationId: id, original, asked: String(wire.amount ?? 'the rest'), left: left.toString() });
        continue;
      }
      if ((balance.get(wire.from) ?? 0n) < amount) {
        refuse(`refund applied with ${balance.get(wire.from)} available of ${amount}`);
        continue;
      }
      const source = applied.get(original)?.wire.from as string;
      add(wire.from, -amount);
      add(source, amount);
      refunded.set(key, (refunded.get(key) ?? 0n) + amount);
      applied.set(id, { kind, wire, amount });
    }
  }

  // Refusals: what each reason claims, against the end state (the order of refusals is not recorded).
  const systemMinor = workload.openingBalanceMinor * BigInt(workload.wallets.length);
  const holdWire = (holdId: string): Wire | null => {
    const op = workload.operations.get(holdId);
    return op?.kind === 'hold' ? ([...op.wires.values()][0] as unknown as Wire) : null;
  };
  const judges: Partial<Record<OperationKind, Judge>> = {
    split: (wire, reason) => {
      const total = (wire.legs as { amount: string }[]).reduce((t, l) => t + BigInt(l.amount), 0n);
      return reason === 'insufficient_funds' && total > systemMinor ? null : 'a split every wallet could cover';
    },
    capture: (wire, reason) => captureOrVoid(wire, reason, 'capture'),
    void: (wire, reason) => captureOrVoid(wire, reason, 'void'),
    refund: (wire, reason) => {
      const original = wire.original as string;
      const o = recordOf.get(original);
      const oKind = workload.operations.get(original)?.kind;
      if (reason === 'original_not_found') return null;
      if (reason === 'original_not_refundable')
        return o === undefined ||
          o.status !== 'applied' ||
          oKind === 'hold' ||
          !['transfer', 'split'].includes(oKind ?? '')
          ? null
          : 'the original is an applied transfer or split';
      if (reason === 'wallet_mismatch') return null;
      if (reason === 'refund_exceeds_original') {
        const limit = limitOf(original, wire.from);
        if (typeof limit === 'string') return `original: ${limit}`;
        const left = limit - (refunded.get(`${original}\n${wire.from}`) ?? 0n);
        const asked = wire.amount === undefined ? null : BigInt(wire.amount as string);
        return (asked === null && left <= 0n) || (asked !== null && asked > left)
          ? null
          : `asked ${asked ?? 'the rest'} with ${left} left at the end`;
      }
      return 'not a reason a refund of this workload may have';
    },
  };
  function captureOrVoid(wire: Wire, reason: string, kind: 'capture' | 'void'): string | null {
    const holdId = wire.hold as string;
    const h = holds.get(holdId);
    const hw = holdWire(holdId);
    const hr = recordOf.get(holdId);
    switch (reason) {
      case 'hold_not_found':
        return null;
      case 'hold_rejected':
        return hr?.status === 'rejected' ? null : 'the hold was not rejected';
      case 'hold_already_captured':
        return h?.state === 'captured' && h.endedBy !== wire.operationId ? null : `the hold is ${h?.state ?? 'absent'}`;
      case 'hold_already_voided':
        return h?.state === 'voided' && h.endedBy !== wire.operationId ? null : `the hold is ${h?.state ?? 'absent'}`;
      case 'hold_expired':
        return h?.state === 'expired' ? null : `the hold is ${h?.state ?? 'absent'}`;
      case 'exceeds_hold_amount':
        return kind === 'capture' &&
          hw !== null &&
          wire.amount !== undefined &&
          BigInt(wire.amount as string) > BigInt(hw.amount as string)
          ? null
          : 'the capture is within the hold';
      case 'wallet_mismatch':
        return hw !== null && hw.from !== wire.from ? null : 'the capture or void names the hold source';
      default:
        return 'not a reason a capture or void of this workload may have';
    }
  }
  for (const r of records) {
    if (r.status !== 'rejected') continue;
    const kind = kindOf(r);
    const wire = wireOf(r);
    if (kind === 'transfer' || wire === null) continue; // transfers: "no valid transfer was rejected"
    const judge = judges[kind];
    const problem = judge === undefined ? `a ${kind} of this workload is never refused` : judge(wire, r.reason ?? '');
    if (problem !== null) rules.fail({ operationId: r.operation_id, kind, reason: r.reason, problem });
  }

  // Every hold's end, the model's against the table's.
  const ends = new Check("every hold's end state equals the model's (state, captured, released, ended by)", 'money');
  for (const [id, h] of holds) {
    const d = dbHolds.get(id);
    const want = `${h.state} ${h.captured}/${h.released} ${h.endedBy ?? '-'}`;
    const got = d === undefined ? 'no row' : `${d.state} ${d.captured}/${d.released} ${d.ended_by ?? '-'}`;
    if (want !== got) ends.fail({ hold: id, model: want, database: got });
  }
  for (const id of dbHolds.keys()) if (!holds.has(id)) ends.fail({ hold: id, model: 'never applied', database: 'row' });

  checks.push(rules.result(), twice.result(), overRefund.result(), ends.result());

  // Figures.
  const byKind: Record<string, Record<string, number>> = {};
  const count = (kind: string, outcome: string) => {
    const k = byKind[kind] ?? {};
    k[outcome] = (k[outcome] ?? 0) + 1;
    byKind[kind] = k;
  };
  const decided = new Set<string>();
  for (const r of records) {
    const op = workload.operations.get(r.operation_id);
    if (op === undefined) continue;
    decided.add(r.operation_id);
    count(op.kind, r.status === 'applied' ? 'applied' : (r.reason ?? 'rejected'));
  }
  for (const op of workload.operations.values()) {
    if (decided.has(op.operationId)) continue;
    count(op.kind, 'undecided');
  }
  const figures: PaymentFigures = {
    byKind,
    holdsExpired: holdRows.filter((h) => h.state === 'expired').length,
    holdsActive: holdRows.filter((h) => h.state === 'active').length,
    anchorsActive: holdRows.filter((h) => h.state === 'active' && h.hold_id.startsWith('anchor-')).length,
  };
  return { checks, expected: balance, figures };
}
