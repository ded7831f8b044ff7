// The outcome feed never skips an event that commits late. Two decisions in overlapping
// transactions: tx1 appends its pending event first (the lower id), tx2 second, tx2 commits
// first. A naive reader that reads outcome_pending by "id > last id seen" skips tx1's event
// (the negative control: the scenario is real); the feed, read after the last position seen
// at the same moments, hands out both, positions 1 and 2. Then many deciders at once and a
// reader polling the feed: every decision exactly once, positions 1..N, nothing missed.
import { randomInt } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OutcomeEvent } from '../../src/intake/outcome-feed.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { settledRead } from '../support/feed.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;

/** The decision, as the worker calls it, on this transaction's client. */
async function decide(client: pg.ClientBase, operationId: string, from: string, to: string): Promise<void> {
  const hash = requestHash({ operationId, from, to, amountMinor: 1n, currency: null });
  const { rows } = await client.query<{ outcome: string }>(
    `SELECT outcome FROM apply_transfers($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[],
                                         $7::bigint[], $8::uuid[])`,
    [[operationId], [hash], [from], [to], ['1'], [null], ['1'], [leaseIdFor(1n)]],
  );
  expect(rows.map((r) => r.outcome)).toEqual(['applied']);
}

async function pendingId(client: pg.ClientBase, operationId: string): Promise<bigint> {
  const { rows } = await client.query<{ id: string }>(
    'SELECT id::text AS id FROM outcome_pending WHERE operation_id = $1',
    [operationId],
  );
  return BigInt(rows[0]!.id);
}

beforeAll(async () => {
  db = await createTestDatabase('ft_feed');
});

afterAll(async () => {
  await db.drop();
});

beforeEach(async () => {
  await db.truncateAll();
});

describe('the outcome feed with decisions that commit out of order', () => {
  it('a naive reader of outcome_pending by id skips the late commit; the feed gives both, positions 1 and 2', async () => {
    await seedWallets(db.prisma, { wallets: 4, balanceMinor: 100n, prefix: 'w', currency: 'EUR' });
    const tx1 = await db.pg.connect();
    const tx2 = await db.pg.connect();
    try {
      await tx1.query('BEGIN');
      await tx2.query('BEGIN');
      await decide(tx1, 'op-tx1', 'w1', 'w2');
      await decide(tx2, 'op-tx2', 'w3', 'w4');
      expect(await pendingId(tx1, 'op-tx1')).toBeLessThan(await pendingId(tx2, 'op-tx2'));

      let naiveLastId = 0n;
      const naiveSeen: string[] = [];
      const naiveRead = async () => {
        const { rows } = await db.pg.query<{ id: string; operation_id: string }>(
          'SELECT id::text AS id, operation_id FROM outcome_pending WHERE id > $1 ORDER BY id',
          [naiveLastId.toString()],
        );
        for (const r of rows) {
          naiveSeen.push(r.operation_id);
          naiveLastId = BigInt(r.id);
        }
      };
      let feedLast = 0n;
      const feedSeen: OutcomeEvent[] = [];
      const feedRead = async () => {
        for (const e of await settledRead(db.pg, feedLast)) {
          feedSeen.push(e);
          feedLast = e.position;
        }
      };

      await tx2.query('COMMIT');
      await naiveRead();
      await feedRead();
      await tx1.query('COMMIT');
      await naiveRead();
      await feedRead();

      // The negative control: by id, tx1's event (a lower id, visible after tx2's) is never read.
      expect(naiveSeen).toEqual(['op-tx2']);
      expect(feedSeen.map((e) => [e.position, e.operationId])).toEqual([
        [1n, 'op-tx2'],
        [2n, 'op-tx1'],
      ]);
      expect((await settledRead(db.pg, 0n)).map((e) => e.operationId)).toEqual(['op-tx2', 'op-tx1']);
    } finally {
      tx1.release();
      tx2.release();
    }
  });

  it('stress: parallel deciders and a polling reader; each decision once, positions 1..N, the poller misses none', async () => {
    const DECIDERS = 8;
    const EACH = 15;
    await seedWallets(db.prisma, { wallets: DECIDERS * 2, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
    // Connections enough for every decider and the poller at once.
    const pool = new pg.Pool({ connectionString: db.url, max: DECIDERS + 2 });
    // An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
    pool.on('error', () => undefined);
    let done = false;
    const polled: OutcomeEvent[] = [];
    const poller = (async () => {
      let last = 0n;
      while (true) {
        const finished = done;
        for (const e of await settledRead(pool, last)) {
          polled.push(e);
          last = e.position;
        }
        if (finished) return;
        await new Promise((r) => setTimeout(r, randomInt(0, 5)));
      }
    })();
    const decided: string[] = [];
    /** Pending ids in the order their transactions committed. */
    const committedIds: bigint[] = [];
    await Promise.all(
      Array.from({ length: DECIDERS }, async (_, k) => {
        const client = await pool.connect();
        try {
          for (let i = 0; i < EACH; i += 1) {
            const op = `stress-${k}-${i}`;
            await client.query('BEGIN');
            await decide(client, op, `w${2 * k + 1}`, `w${2 * k + 2}`);
            const id = await pendingId(client, op);
            // Hold the commit a little, so that later ids commit first.
            await new Promise((r) => setTimeout(r, randomInt(0, 15)));
            await client.query('COMMIT');
            decided.push(op);
            committedIds.push(id);
          }
        } finally {
          client.release();
        }
      }),
    );
    done = true;
    await poller;
    await pool.end();
    // The scenario is real: some id committed after a higher one.
    expect(committedIds.some((id, i) => committedIds.slice(0, i).some((earlier) => earlier > id))).toBe(true);
    const all = await settledRead(db.pg, 0n, 10_000);
    const n = DECIDERS * EACH;
    expect(all.map((e) => e.position)).toEqual(Array.from({ length: n }, (_, i) => BigInt(i + 1)));
    expect(all.map((e) => e.operationId).sort()).toEqual([...decided].sort());
    expect(new Set(all.map((e) => e.operationId)).size).toBe(n);
    expect(polled.map((e) => [e.position, e.operationId])).toEqual(all.map((e) => [e.position, e.operationId]));
  });
});
