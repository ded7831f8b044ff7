// The db-ceiling cases' warm-up: before the clock starts, every connection of the pool calls each
// decision the case runs (today's apply_transfer(), the first migration's, or both in the paired
// case) WARM_UP_CALLS times, and nothing of it stays in the tables. Real PostgreSQL, both real
// functions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { giveWalletsTheBenchLease, WARM_UP_CALLS, warmUpDecisions } from '../../../harness/bench/db-ceiling.ts';
import { decide, type SqlRunner } from '../../../harness/bench/decision-call.ts';
import { decideFirst, firstDecisionSql } from '../../../harness/bench/first-decision.ts';
import { BENCH_CURRENCY, BENCH_WALLET_PREFIX } from '../../../harness/bench/sandbox.ts';
import { seedWallets } from '../../../src/ledger/seed-wallets.ts';
import { createTestDatabase, type TestDatabase } from '../../support/test-db.ts';

const WALLETS = 50;
const CONNECTIONS = 4;
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_warmup');
  await seedWallets(db.prisma, {
    wallets: WALLETS,
    balanceMinor: 1_000n,
    prefix: BENCH_WALLET_PREFIX,
    currency: BENCH_CURRENCY,
  });
  await db.pg.query(firstDecisionSql());
  await giveWalletsTheBenchLease(db.pg);
}, 60_000);

afterAll(async () => {
  await db?.drop();
});

async function tableCounts(): Promise<Record<string, string>> {
  const { rows } = await db.pg.query(
    `SELECT (SELECT count(*) FROM transfers) AS transfers, (SELECT count(*) FROM ledger_entries) AS entries,
            (SELECT count(*) FROM outcome_pending) AS pending, (SELECT sum(balance) FROM wallets) AS money,
            (SELECT string_agg(id || ':' || balance, ',' ORDER BY id) FROM wallets) AS balances`,
  );
  return rows[0];
}

describe('db-ceiling warm-up', () => {
  it('runs both decisions on every connection, half of them today’s first, and leaves the tables as they were', async () => {
    const before = await tableCounts();
    const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => db.pg.connect()));
    const calls: { client: number; which: 'today' | 'first'; pid: number }[] = [];
    try {
      const pids = await Promise.all(
        clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number),
      );
      await warmUpDecisions(clients, WALLETS, ['today', 'first'], async (client: SqlRunner, which, request) => {
        const index = clients.indexOf(client as (typeof clients)[number]);
        const { rows } = await client.query('SELECT pg_backend_pid() AS pid', []);
        calls.push({ client: index, which, pid: (rows[0] as { pid: number }).pid });
        expect((rows[0] as { pid: number }).pid).toBe(pids[index]);
        return which === 'first' ? decideFirst(client, request) : decide(client, request);
      });
    } finally {
      for (const c of clients) c.release();
    }
    for (let c = 0; c < CONNECTIONS; c++) {
      const own = calls.filter((call) => call.client === c);
      expect(own.filter((call) => call.which === 'today')).toHaveLength(WARM_UP_CALLS);
      expect(own.filter((call) => call.which === 'first')).toHaveLength(WARM_UP_CALLS);
      expect(own[0]?.which).toBe(c % 2 === 0 ? 'today' : 'first');
    }
    // Every call was rolled back: no record, no entry, no event, every balance as before.
    expect(await tableCounts()).toEqual(before);
    expect(before.transfers).toBe('0');
  });

  it('runs only the one decision of a single case, on every connection', async () => {
    const before = await tableCounts();
    const clients = await Promise.all(Array.from({ length: CONNECTIONS }, () => db.pg.connect()));
    const calls: { client: number; which: string }[] = [];
    try {
      await warmUpDecisions(clients, WALLETS, ['first'], async (client: SqlRunner, which, request) => {
        calls.push({ client: clients.indexOf(client as (typeof clients)[number]), which });
        return decideFirst(client, request);
      });
    } finally {
      for (const c of clients) c.release();
    }
    expect(calls).toHaveLength(CONNECTIONS * WARM_UP_CALLS);
    expect(new Set(calls.map((call) => call.which))).toEqual(new Set(['first']));
    for (let c = 0; c < CONNECTIONS; c++) expect(calls.filter((call) => call.client === c)).toHaveLength(WARM_UP_CALLS);
    expect(await tableCounts()).toEqual(before);
  });

  it('stops on a call that does not apply, and rolls it back', async () => {
    const client = await db.pg.connect();
    try {
      await expect(warmUpDecisions([client], WALLETS, ['today', 'first'], async () => 'stale_fence')).rejects.toThrow(
        "warm-up call of today's function answered stale_fence",
      );
      const { rows } = await client.query('SELECT now() = statement_timestamp() AS own');
      expect(rows[0].own).toBe(true); // no transaction left open on the connection
    } finally {
      client.release();
    }
  });
});
