// The batched decision on its own (no queue, no lock), against a real PostgreSQL: every
// transfer of a batch keeps its own answer, twins and same-wallet debits are decided in order,
// a batch that dies is retried whole, and crossing batches never deadlock.

import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyTransfer, applyTransfers, type FencedTransfer } from '../../src/ledger/apply-transfer.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { TransferRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('ft_batch');
  // The no-lease-check control's variant, which no migrated database has (harness/chaos/unsafe/).
  await db.installUnsafeDecisions();
});
afterAll(async () => db.drop());
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  await seedWallets(db.prisma, { wallets: 1, balanceMinor: 1_000n, prefix: 'usd', currency: 'USD' });
});

const req = (operationId: string, over: Partial<TransferRequest> = {}): TransferRequest => ({
  operationId,
  from: 'w1',
  to: 'w2',
  amountMinor: 100n,
  currency: null,
  ...over,
});
/** A transfer under `fence`, by default decided by the one lease that owns that token. */
const at = (request: TransferRequest, fence: bigint, leaseId = leaseIdFor(fence)): FencedTransfer => ({
  request,
  fence,
  leaseId,
});

async function balance(id: string): Promise<bigint> {
  return BigInt(
    (await db.pg.query<{ balance: string }>('SELECT balance FROM wallets WHERE id = $1', [id])).rows[0]?.balance ??
      '-1',
  );
}

describe('apply_transfers', () => {
  it('twins of one operation in one batch give one decision and one duplicate; a changed twin gives conflict', async () => {
    const results = await applyTransfers(db.prisma, [
      at(req('twin'), 3n),
      at(req('twin'), 3n),
      at(req('twin', { amountMinor: 101n }), 3n),
    ]);
    expect(results).toEqual([
      { outcome: 'applied', operationId: 'twin', fence: '3' },
      { outcome: 'duplicate', operationId: 'twin', stored: { status: 'applied', fence: '3' } },
      { outcome: 'conflict', operationId: 'twin', stored: { status: 'applied', fence: '3' } },
    ]);
    expect(
      (await db.pg.query("SELECT 1 FROM ledger_entries WHERE operation_id = 'twin' AND kind = 'debit'")).rowCount,
    ).toBe(1);
    expect(await balance('w1')).toBe(900n);
  });

  it('each transfer answers for itself: one batch with every outcome, the refused ones record nothing', async () => {
    // w3 has already written with token 50: a token of 10 on w3 is stale, on w1 it is fine.
    await applyTransfers(db.prisma, [at(req('w3-before', { from: 'w3', to: 'w4', amountMinor: 1n }), 50n)]);
    const results = await applyTransfers(db.prisma, [
      at(req('ok-1'), 10n),
      at(req('too-much', { amountMinor: 5_000n }), 10n),
      at(req('stale', { from: 'w3', to: 'w1' }), 10n),
      at(req('nobody', { to: 'ghost' }), 10n),
      at(req('fx', { to: 'usd1' }), 10n),
      at(req('self', { to: 'w1' }), 10n),
      at(req('ok-2', { from: 'w2', to: 'w4', amountMinor: 7n }), 4n),
    ]);
    expect(results.map((r) => (r.outcome === 'rejected' ? `rejected:${r.reason}` : r.outcome))).toEqual([
      'applied',
      'rejected:insufficient_funds',
      'stale_fence',
      'rejected:unknown_wallet',
      'rejected:currency_mismatch',
      'rejected:same_wallet',
      'applied',
    ]);
    expect(results[2]).toEqual({ outcome: 'stale_fence', operationId: 'stale', walletFence: 50n });
    expect((await db.pg.query("SELECT 1 FROM transfers WHERE operation_id = 'stale'")).rowCount).toBe(0);
    expect(await balance('w1')).toBe(900n);
    expect(await balance('w2')).toBe(1_093n);
    expect(await balance('w3')).toBe(999n);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('a transfer between two wallets that do not exist is a recorded unknown_wallet, one or many at a time', async () => {
    expect(await applyTransfers(db.prisma, [at(req('ghosts', { from: 'ghost-a', to: 'ghost-b' }), 1n)])).toEqual([
      { outcome: 'rejected', operationId: 'ghosts', reason: 'unknown_wallet', fence: '1' },
    ]);
    expect(
      await applyTransfer(db.prisma, req('ghosts-1', { from: 'ghost-a', to: 'ghost-b' }), 1n, leaseIdFor(1n)),
    ).toMatchObject({
      outcome: 'rejected',
      reason: 'unknown_wallet',
    });
    expect(
      (await db.pg.query("SELECT count(*)::int AS n FROM transfers WHERE reason = 'unknown_wallet'")).rows[0],
    ).toEqual({ n: 2 });
  });

  it('two debits of one wallet in one batch see each other, in array order', async () => {
    const results = await applyTransfers(db.prisma, [
      at(req('first', { amountMinor: 600n }), 2n),
      at(req('second', { amountMinor: 600n, to: 'w3' }), 2n),
      at(req('third', { amountMinor: 400n, to: 'w4' }), 2n),
    ]);
    expect(results.map((r) => r.outcome)).toEqual(['applied', 'rejected', 'applied']);
    expect(results[1]).toMatchObject({ reason: 'insufficient_funds' });
    expect(await balance('w1')).toBe(0n);
  });

  it('an equal token passes for its own lease (riders); a lower one after a higher is stale', async () => {
    const results = await applyTransfers(db.prisma, [
      at(req('a'), 7n),
      at(req('b'), 7n),
      at(req('c'), 8n),
      at(req('d'), 7n),
      at(req('e'), 8n),
    ]);
    expect(results.map((r) => r.outcome)).toEqual(['applied', 'applied', 'applied', 'stale_fence', 'applied']);
  });

  it("an equal token of another lease is stale, answering the wallet's fence; the wallet and entries keep the lease", async () => {
    const p = leaseIdFor(100n, 1);
    const q = leaseIdFor(100n, 2);
    expect(await applyTransfers(db.prisma, [at(req('p-1'), 100n, p)])).toMatchObject([{ outcome: 'applied' }]);
    const results = await applyTransfers(db.prisma, [
      at(req('q-1', { to: 'w3' }), 100n, q),
      at(req('p-2', { to: 'w4' }), 100n, p),
      at(req('q-2', { from: 'w2', to: 'w3' }), 100n, q),
    ]);
    expect(results).toEqual([
      { outcome: 'stale_fence', operationId: 'q-1', walletFence: 100n },
      { outcome: 'applied', operationId: 'p-2', fence: '100' },
      // Another wallet: its fence is its own, so the same number is a fresh token there.
      { outcome: 'applied', operationId: 'q-2', fence: '100' },
    ]);
    expect((await db.pg.query("SELECT 1 FROM transfers WHERE operation_id = 'q-1'")).rowCount).toBe(0);
    const wallets = await db.pg.query(
      'SELECT id, last_fence, last_lease FROM wallets WHERE id IN ($1, $2) ORDER BY id',
      ['w1', 'w2'],
    );
    expect(wallets.rows).toEqual([
      { id: 'w1', last_fence: '100', last_lease: p },
      { id: 'w2', last_fence: '100', last_lease: q },
    ]);
    const entries = await db.pg.query(
      "SELECT e.operation_id, e.kind, e.fence, e.lease, t.lease AS record_lease FROM ledger_entries e JOIN transfers t USING (operation_id) WHERE e.kind IN ('debit', 'credit') ORDER BY e.id",
    );
    expect(entries.rows).toEqual(
      ['p-1', 'p-2', 'q-2'].flatMap((op) =>
        ['debit', 'credit'].map((kind) => {
          const lease = op.startsWith('p') ? p : q;
          return { operation_id: op, kind, fence: '100', lease, record_lease: lease };
        }),
      ),
    );
    // A higher token of any lease passes and takes the fence over; a rejection records it too.
    expect(
      await applyTransfers(db.prisma, [at(req('q-3', { amountMinor: 5_000n }), 101n, q), at(req('p-3'), 101n, p)]),
    ).toMatchObject([
      { outcome: 'rejected', reason: 'insufficient_funds' },
      { outcome: 'stale_fence', walletFence: 101n },
    ]);
    expect((await db.pg.query("SELECT last_lease FROM wallets WHERE id = 'w1'")).rows[0]).toEqual({ last_lease: q });
    expect((await db.pg.query("SELECT lease FROM transfers WHERE operation_id = 'q-3'")).rows[0]).toEqual({ lease: q });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it('with the lease check off (the no-lease-check control) an equal token of another lease passes again', async () => {
    const p = leaseIdFor(100n, 1);
    const q = leaseIdFor(100n, 2);
    await applyTransfers(db.prisma, [at(req('p-1'), 100n, p)]);
    expect(
      await applyTransfers(db.prisma, [at(req('q-1', { to: 'w3' }), 100n, q)], { skipLeaseCheck: true }),
    ).toMatchObject([{ outcome: 'applied' }]);
    expect(await applyTransfers(db.prisma, [at(req('p-2', { to: 'w4' }), 99n, p)], { skipLeaseCheck: true })).toEqual([
      { outcome: 'stale_fence', operationId: 'p-2', walletFence: 100n },
    ]);
  });

  it('refuses an empty batch, one above the limit and a fence below 1 before sending anything', async () => {
    await expect(applyTransfers(db.prisma, [])).rejects.toThrow(/between 1 and 1000/);
    await expect(
      applyTransfers(
        db.prisma,
        Array.from({ length: 1_001 }, (_, i) => at(req(`x${i}`), 1n)),
      ),
    ).rejects.toThrow(/between 1 and 1000/);
    await expect(applyTransfers(db.prisma, [at(req('zero'), 0n)])).rejects.toThrow(/fence must be positive/);
    await expect(applyTransfers(db.prisma, [at(req('no-lease'), 1n, 'lease-1')])).rejects.toThrow(/leaseId must be/);
  });

  it('the database refuses arrays of different lengths and a batch above its own limit', async () => {
    const call = (n: number, hashes: number) =>
      db.pg.query('SELECT * FROM apply_transfers($1, $2, $3, $4, $5, $6, $7, $8)', [
        Array(n).fill('op'),
        Array(hashes).fill('h'),
        Array(n).fill('w1'),
        Array(n).fill('w2'),
        Array(n).fill('1'),
        Array(n).fill(null),
        Array(n).fill('1'),
        Array(n).fill(leaseIdFor(1n)),
      ]);
    await expect(call(2, 1)).rejects.toMatchObject({ code: '22023' });
    await expect(call(1_001, 1_001)).rejects.toMatchObject({ code: '22023' });
  });

  it('a batch whose backend is killed mid-way commits nothing; the same batch again applies each transfer once', async () => {
    const batch = [
      at(req('k1', { from: 'w2', to: 'w3' }), 1n),
      at(req('k2'), 1n),
      at(req('k3', { from: 'w4', to: 'w1' }), 1n),
    ];
    // Hold w1's row so the batch stops inside the call, after taking its other locks.
    const blocker = new pg.Client({ connectionString: db.url });
    blocker.on('error', () => undefined);
    await blocker.connect();
    await blocker.query("BEGIN; SELECT 1 FROM wallets WHERE id = 'w1' FOR UPDATE");
    try {
      const attempt = applyTransfers(db.prisma, batch).then(
        () => 'committed',
        (err: unknown) => err,
      );
      let killed = 0;
      for (let i = 0; i < 200 && killed === 0; i++) {
        const r = await db.pg.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%apply_transfers%'",
        );
        for (const { pid } of r.rows) {
          await db.pg.query('SELECT pg_terminate_backend($1)', [pid]);
          killed += 1;
        }
        if (killed === 0) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(killed).toBe(1);
      expect(await attempt).toBeInstanceOf(Error);
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    expect((await db.pg.query('SELECT count(*)::int AS n FROM transfers')).rows[0]).toEqual({ n: 0 });

    const retried = await applyTransfers(db.prisma, batch);
    expect(retried.map((r) => r.outcome)).toEqual(['applied', 'applied', 'applied']);
    const again = await applyTransfers(db.prisma, batch);
    expect(again.map((r) => r.outcome)).toEqual(['duplicate', 'duplicate', 'duplicate']);
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });
});

describe('crossing batches', () => {
  /** 12 batches at once, each 16 random transfers among 4 wallets in both directions. */
  async function crossingBatches(call: string): Promise<{ deadlocks: number; failures: unknown[] }> {
    const pool = new pg.Pool({ connectionString: db.url, max: 12 });
    pool.on('error', () => undefined);
    const wallets = ['w1', 'w2', 'w3', 'w4'];
    let seed = 42;
    const random = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const failures: unknown[] = [];
    let deadlocks = 0;
    try {
      await Promise.all(
        Array.from({ length: 12 }, async (_, b) => {
          const requests = Array.from({ length: 16 }, (_, i) => {
            const from = wallets[Math.floor(random() * 4)] as string;
            const others = wallets.filter((w) => w !== from);
            return req(`x${b}-${i}`, { from, to: others[Math.floor(random() * 3)] as string, amountMinor: 1n });
          });
          try {
            await pool.query(`SELECT * FROM ${call}`, [
              requests.map((r) => r.operationId),
              requests.map((r) => requestHash(r)),
              requests.map((r) => r.from),
              requests.map((r) => r.to),
              requests.map((r) => r.amountMinor.toString()),
              requests.map(() => null),
              requests.map(() => '1'),
              requests.map(() => leaseIdFor(1n)),
            ]);
          } catch (err) {
            if ((err as { code?: string }).code === '40P01') deadlocks += 1;
            else failures.push(err);
          }
        }),
      );
    } finally {
      await pool.end();
    }
    return { deadlocks, failures };
  }

  it('twelve batches crossing the same wallets in both directions never deadlock, and the ledger holds', async () => {
    // Slow row-lock waits down so every batch is inside the call while the others are.
    await db.pg.query(`ALTER DATABASE "${db.name}" SET deadlock_timeout = '200ms'`);
    const { deadlocks, failures } = await crossingBatches('apply_transfers($1, $2, $3, $4, $5, $6, $7, $8)');
    expect(failures).toEqual([]);
    expect(deadlocks).toBe(0);
    expect((await db.pg.query('SELECT count(*)::int AS n FROM transfers')).rows[0]).toEqual({ n: 12 * 16 });
    expect((await reconcile(db.prisma)).ok).toBe(true);
  });

  it("control: the same decision locking each transfer's rows as it reaches them deadlocks", async () => {
    // The batch decision as the migrations define it, except that its wallets are read without
    // the up-front lock in id order (decision_wallets_locked() copied without it), and each
    // transfer locks its source then its destination when the loop reaches it, as a naive batch
    // would.
    const defOf = async (fn: string) =>
      (await db.pg.query<{ def: string }>(`SELECT pg_get_functiondef('${fn}'::regproc) AS def`)).rows[0]?.def ?? '';
    const renamed = (def: string, from: string, to: string) => {
      expect(def).toContain(from);
      return def.replace(from, to);
    };
    const upFrontLock = 'ORDER BY w.id FOR UPDATE) l;';
    const loopStep = 'v_fence := p_fences[v_i];';
    const unlocked = renamed(
      renamed(await defOf('decision_wallets_locked'), upFrontLock, ') l;'),
      'public.decision_wallets_locked(',
      'public.decision_wallets_unlocked(',
    );
    const read = renamed(
      renamed(
        await defOf('decision_state_read'),
        ':= decision_wallets_locked(v_wallets)',
        ':= decision_wallets_unlocked(v_wallets)',
      ),
      'public.decision_state_read(',
      'public.decision_state_read_unordered(',
    );
    const decide = renamed(
      renamed(
        renamed(await defOf('decide_batch'), ':= decision_state_read(', ':= decision_state_read_unordered('),
        'public.decide_batch(',
        'public.decide_batch_unordered(',
      ),
      loopStep,
      `${loopStep}
        PERFORM 1 FROM wallets w WHERE w.id = v_from FOR UPDATE;
        PERFORM pg_sleep(0.002);
        PERFORM 1 FROM wallets w WHERE w.id = p_tos[v_i] FOR UPDATE;`,
    );
    for (const def of [unlocked, read, decide]) await db.pg.query(def);
    await db.pg.query(`
      CREATE FUNCTION transfers_unordered(o TEXT[], h TEXT[], f TEXT[], t TEXT[], a BIGINT[], c TEXT[], n BIGINT[], l UUID[])
      RETURNS TABLE (ord INTEGER, outcome TEXT, status TEXT, reason TEXT, fence BIGINT, wallet_fence BIGINT)
      LANGUAGE sql AS $$
        SELECT * FROM decide_batch_unordered(array_fill('transfer'::TEXT, ARRAY[cardinality(o)]), o, h, f, t, a, c,
          array_fill(NULL::TEXT, ARRAY[cardinality(o)]), array_fill(NULL::BIGINT, ARRAY[cardinality(o)]),
          array_fill(NULL::TIMESTAMPTZ, ARRAY[cardinality(o)]), array_fill(NULL::JSONB, ARRAY[cardinality(o)]), n, l, 1, NULL)
      $$`);
    await db.pg.query(`ALTER DATABASE "${db.name}" SET deadlock_timeout = '200ms'`);
    const { deadlocks, failures } = await crossingBatches('transfers_unordered($1, $2, $3, $4, $5, $6, $7, $8)');
    expect(failures).toEqual([]);
    expect(deadlocks).toBeGreaterThan(0);
  });
});
