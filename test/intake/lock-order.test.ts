// The intake's advisory locks in one order (issue 41, 4.6): two producers requesting the same
// operations in opposite orders, each in its own transaction, started together, must both commit.
// Locks taken in each caller's order meet head on and PostgreSQL ends one with "deadlock
// detected" (40P01); taken in the decisions' order (by the lock key) they queue instead.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestOperations, requestTransfers } from '../../src/intake/intake.ts';
import type { OperationWire, TransferWire } from '../../src/ledger/transfer-request.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const AMOUNT_MAX = 10n ** 15n;
const EXPIRY_MAX_MS = 604_800_000;
const ROUNDS = 4;
const IDS_PER_ROUND = 200;

let db: TestDatabase;
let producers: [pg.Client, pg.Client];
beforeAll(async () => {
  db = await createTestDatabase('ft_lockorder');
  producers = [new pg.Client({ connectionString: db.url }), new pg.Client({ connectionString: db.url })];
  await Promise.all(producers.map((c) => c.connect()));
});
afterAll(async () => {
  await Promise.all(producers.map((c) => c.end()));
  await db.drop();
});

/** Each producer requests `batches[i]` in a transaction of its own; both start together. */
async function bothProducers<T>(
  batches: [readonly T[], readonly T[]],
  request: (client: pg.Client, batch: readonly T[]) => Promise<unknown>,
): Promise<PromiseSettledResult<unknown>[]> {
  return Promise.allSettled(
    producers.map(async (client, i) => {
      await client.query('BEGIN');
      try {
        await request(client, batches[i] ?? []);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }),
  );
}

function failuresOf(results: PromiseSettledResult<unknown>[]): string[] {
  return results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message)] : []));
}

describe('two producers requesting the same ids in opposite orders', () => {
  it(`both commit, ${ROUNDS} rounds of ${IDS_PER_ROUND} transfers`, async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const wires: TransferWire[] = Array.from({ length: IDS_PER_ROUND }, (_, i) => ({
        operationId: `t-${round}-${i}`,
        from: 'a',
        to: 'b',
        amount: '5',
      }));
      const results = await bothProducers([wires, [...wires].reverse()], (client, batch) =>
        requestTransfers(client, batch, AMOUNT_MAX),
      );
      expect({ round, failures: failuresOf(results) }).toEqual({ round, failures: [] });
    }
    const { rows } = await db.pg.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM transfer_requests WHERE operation_id LIKE 't-%'",
    );
    expect(rows[0]?.n).toBe(String(ROUNDS * IDS_PER_ROUND));
  });

  it(`both commit, ${ROUNDS} rounds of ${IDS_PER_ROUND} payments`, async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const wires: OperationWire[] = Array.from({ length: IDS_PER_ROUND }, (_, i) => ({
        operationId: `h-${round}-${i}`,
        kind: 'hold',
        from: 'a',
        to: 'b',
        amount: '5',
        expiresInMs: 60_000,
      }));
      const results = await bothProducers([wires, [...wires].reverse()], (client, batch) =>
        requestOperations(client, batch, AMOUNT_MAX, EXPIRY_MAX_MS),
      );
      expect({ round, failures: failuresOf(results) }).toEqual({ round, failures: [] });
    }
  });
});
